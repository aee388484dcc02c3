// PyPI upstreams: an HTTP(S) index asked for PEP 691 JSON, and a local directory mirror whose files are opened
// with openat2(RESOLVE_BENEATH), so neither ".." in a file URL nor a symlink can reach outside the mirror.
#include "proxy/upstream/pypi_upstream.h"

#include <dirent.h>
#include <fcntl.h>
#include <linux/openat2.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <nlohmann/json.hpp>
#include <string_view>
#include <utility>
#include <vector>

#include "store/digest.h"
#include "base/error.h"
#include "base/file_util.h"
#include "proxy/error.h"
#include "proxy/upstream/url.h"
#include "base/unique_fd.h"

namespace capsule::proxy {
namespace {

using base::UniqueFd;

constexpr std::string_view kPep691Json = "application/vnd.pypi.simple.v1+json";
constexpr std::string_view kMirrorScheme = "mirror:";
constexpr std::uint64_t kMaxPageBytes = 1ULL << 30;

// A PEP 503-normalized name is lower-case letters, digits and '-'; anything else cannot name a project and must
// not reach a URL path or a file name.
bool is_normalized_name(std::string_view name) {
  return !name.empty() && std::all_of(name.begin(), name.end(), [](char c) {
    return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '-';
  });
}

void check_normalized_name(const std::string& name) {
  if (!is_normalized_name(name)) {
    throw ProxyError("bad_project_name", "upstream", name, "not a PEP 503-normalized project name");
  }
}

// RFC 9110 If-None-Match: a list of entity tags (or "*"), compared weakly.
bool etag_matches(std::string_view header, std::string_view etag) {
  auto opaque = [](std::string_view tag) { return tag.substr(0, 2) == "W/" ? tag.substr(2) : tag; };
  if (etag.empty()) return false;
  const std::string_view wanted = opaque(etag);
  std::size_t i = 0;
  while (i < header.size()) {
    const char c = header[i];
    if (c == ' ' || c == '\t' || c == ',') {
      ++i;
    } else if (c == '*') {
      return true;
    } else {
      const std::size_t start = i;
      if (header.substr(i, 2) == "W/") i += 2;
      if (i >= header.size() || header[i] != '"') return false;  // malformed: match nothing
      const std::size_t close = header.find('"', i + 1);
      if (close == std::string_view::npos) return false;
      if (opaque(header.substr(start, close + 1 - start)) == wanted) return true;
      i = close + 1;
    }
  }
  return false;
}

std::string lower_media_type(std::string_view content_type) {
  std::string type(content_type.substr(0, content_type.find(';')));
  while (!type.empty() && (type.back() == ' ' || type.back() == '\t')) type.pop_back();
  for (char& c : type) c = static_cast<char>(c >= 'A' && c <= 'Z' ? c - 'A' + 'a' : c);
  return type;
}

std::string header_or_empty(const HttpResponse& response, std::string_view name) {
  auto found = response.headers.find(name);
  return found == response.headers.end() ? std::string() : found->second;
}

// ---- HTTP index ----

class HttpPypiUpstream final : public PypiUpstream {
 public:
  HttpPypiUpstream(std::shared_ptr<HttpClient> client, std::string index_url)
      : client_(std::move(client)), index_url_(std::move(index_url)) {
    if (!parse_url(index_url_) || index_url_.back() != '/') {
      throw ProxyError("bad_upstream_url", "upstream", index_url_, "an index URL is http(s) and ends with '/'");
    }
  }

  UpstreamPage project_page(const std::string& normalized_name, const std::string& if_none_match) override {
    check_normalized_name(normalized_name);
    return fetch_page(index_url_ + normalized_name + "/", if_none_match);
  }

  UpstreamPage index_page(const std::string& if_none_match) override { return fetch_page(index_url_, if_none_match); }

  void fetch_file(const std::string& url, const BodySink& sink) override {
    if (!parse_url(url)) throw ProxyError("bad_upstream", "upstream", url, "a file URL must be http or https");
    const HttpResponse response = client_->get_to(url, sink);
    if (response.status == 200) return;
    if (response.status == 404) throw ProxyError("not_found", "upstream", url, "the upstream has no such file");
    throw ProxyError("bad_upstream", "upstream", url, "answered " + std::to_string(response.status));
  }

  std::string describe() const override { return index_url_; }

 private:
  UpstreamPage fetch_page(const std::string& url, const std::string& if_none_match) {
    std::vector<std::pair<std::string, std::string>> headers = {{"Accept", std::string(kPep691Json)}};
    if (!if_none_match.empty()) headers.emplace_back("If-None-Match", if_none_match);
    HttpResponse response = client_->get(url, headers);

    UpstreamPage page;
    page.status = response.status;
    page.url = response.url.empty() ? url : response.url;
    page.etag = header_or_empty(response, "ETag");
    page.last_serial = header_or_empty(response, "X-PyPI-Last-Serial");
    switch (response.status) {
      case 200: {
        // Without PEP 691 support an index answers HTML, which must not be handed on as JSON.
        const std::string type = lower_media_type(header_or_empty(response, "Content-Type"));
        if (!type.empty() && type != kPep691Json && type != "application/vnd.pypi.simple.latest+json" &&
            type != "application/json") {
          throw ProxyError("bad_upstream", "upstream", page.url,
                           "answered Content-Type " + type + ", not PEP 691 JSON");
        }
        page.body = std::move(response.body);
        return page;
      }
      case 304:
        if (page.etag.empty()) page.etag = if_none_match;
        return page;
      case 404:
        return page;
      default:
        throw ProxyError("bad_upstream", "upstream", page.url, "answered " + std::to_string(response.status));
    }
  }

  std::shared_ptr<HttpClient> client_;
  std::string index_url_;
};

// ---- local directory mirror ----

enum class OpenResult { kOpened, kMissing, kOutside };

// A page or file of the mirror, opened beneath the root.
struct MirrorFile {
  OpenResult result = OpenResult::kMissing;
  UniqueFd fd;
  struct stat st {};
};

int hex_digit(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

// "mirror:/files/a%2Bb.whl?x#frag" -> "files/a+b.whl"; nullopt when the path climbs above the root, names the root
// itself, or holds bad escapes or NUL.
std::optional<std::string> mirror_relative_path(std::string_view url) {
  if (url.substr(0, kMirrorScheme.size()) != kMirrorScheme) return std::nullopt;
  std::string_view path = url.substr(kMirrorScheme.size());
  path = path.substr(0, path.find_first_of("?#"));
  if (path.empty() || path.front() != '/') return std::nullopt;

  std::string decoded;
  for (std::size_t i = 0; i < path.size(); ++i) {
    if (path[i] != '%') {
      decoded += path[i];
      continue;
    }
    if (i + 2 >= path.size()) return std::nullopt;
    const int high = hex_digit(path[i + 1]);
    const int low = hex_digit(path[i + 2]);
    if (high < 0 || low < 0 || (high == 0 && low == 0)) return std::nullopt;
    decoded += static_cast<char>(high * 16 + low);
    i += 2;
  }

  std::vector<std::string_view> segments;
  std::string_view rest = decoded;
  while (!rest.empty()) {
    const std::size_t slash = rest.find('/');
    const std::string_view segment = rest.substr(0, slash);
    rest = slash == std::string_view::npos ? std::string_view() : rest.substr(slash + 1);
    if (segment.empty() || segment == ".") continue;
    if (segment == "..") {
      if (segments.empty()) return std::nullopt;
      segments.pop_back();
    } else {
      segments.push_back(segment);
    }
  }
  if (segments.empty()) return std::nullopt;
  std::string relative;
  for (const auto& segment : segments) {
    if (!relative.empty()) relative += '/';
    relative += segment;
  }
  return relative;
}

class LocalPypiMirror final : public PypiUpstream {
 public:
  explicit LocalPypiMirror(std::filesystem::path root) : root_(std::move(root)) {
    open_root();  // a wrong root fails at startup, not at the first request
  }

  UpstreamPage project_page(const std::string& normalized_name, const std::string& if_none_match) override {
    check_normalized_name(normalized_name);
    return read_page("simple/" + normalized_name + "/index.json", "mirror:/simple/" + normalized_name + "/",
                     if_none_match);
  }

  UpstreamPage index_page(const std::string& if_none_match) override {
    UpstreamPage page = read_page("simple/index.json", "mirror:/simple/", if_none_match);
    if (page.status != 404) return page;
    return list_projects(if_none_match);
  }

  void fetch_file(const std::string& url, const BodySink& sink) override {
    const std::optional<std::string> relative = mirror_relative_path(url);
    if (!relative) throw ProxyError("not_found", "mirror", url, "not a file URL inside the mirror");
    MirrorFile file = open_in_mirror(*relative);
    if (file.result == OpenResult::kOutside) {
      throw ProxyError("not_found", "mirror", url, "refused: the path leaves the mirror through a symlink");
    }
    if (file.result == OpenResult::kMissing) throw ProxyError("not_found", "mirror", url, "no such file");
    char buffer[65536];
    for (;;) {
      const ssize_t n = ::read(file.fd.get(), buffer, sizeof buffer);
      if (n < 0) {
        if (errno == EINTR) continue;
        throw ProxyError("upstream_unavailable", "mirror", (root_ / *relative).string(),
                         std::string("read: ") + std::strerror(errno));
      }
      if (n == 0) return;
      sink(buffer, static_cast<std::size_t>(n));
    }
  }

  std::string describe() const override { return "mirror " + root_.string(); }

 private:
  UniqueFd open_root() const {
    UniqueFd fd(::open(root_.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
    if (!fd) {
      throw ProxyError("upstream_unavailable", "mirror", root_.string(),
                       std::string("open mirror directory: ") + std::strerror(errno));
    }
    return fd;
  }

  // Opens `relative` beneath the root; symlinks are followed only while they stay inside it. Without
  // O_DIRECTORY the result must be a regular file.
  MirrorFile open_in_mirror(const std::string& relative, int extra_flags = 0) const {
    const UniqueFd root = open_root();
    struct open_how how {};
    // O_NONBLOCK: a FIFO must not block the open (it is then refused as not a regular file).
    how.flags = static_cast<std::uint64_t>(O_RDONLY | O_CLOEXEC | O_NOCTTY | O_NONBLOCK | extra_flags);
    how.resolve = RESOLVE_BENEATH | RESOLVE_NO_MAGICLINKS;
    MirrorFile file;
    const long fd = ::syscall(SYS_openat2, root.get(), relative.c_str(), &how, sizeof how);
    if (fd < 0) {
      if (errno == ENOENT || errno == ENOTDIR || errno == ENAMETOOLONG) return file;
      if (errno == EXDEV || errno == ELOOP) {
        file.result = OpenResult::kOutside;
        return file;
      }
      throw ProxyError("upstream_unavailable", "mirror", (root_ / relative).string(),
                       std::string("open: ") + std::strerror(errno));
    }
    file.fd.reset(static_cast<int>(fd));
    if (::fstat(file.fd.get(), &file.st) != 0) {
      throw ProxyError("upstream_unavailable", "mirror", (root_ / relative).string(),
                       std::string("stat: ") + std::strerror(errno));
    }
    if (!S_ISREG(file.st.st_mode) && (extra_flags & O_DIRECTORY) == 0) return MirrorFile{};
    file.result = OpenResult::kOpened;
    return file;
  }

  // A strong validator for a file: it changes whenever the file is replaced or rewritten.
  static std::string file_etag(const struct stat& st) {
    char text[96];
    std::snprintf(text, sizeof text, "\"%llx-%llx-%llx.%lx\"", static_cast<unsigned long long>(st.st_ino),
                  static_cast<unsigned long long>(st.st_size), static_cast<unsigned long long>(st.st_mtim.tv_sec),
                  static_cast<unsigned long>(st.st_mtim.tv_nsec));
    return text;
  }

  UpstreamPage read_page(const std::string& relative, std::string url, const std::string& if_none_match) const {
    UpstreamPage page;
    page.url = std::move(url);
    MirrorFile file = open_in_mirror(relative);
    if (file.result != OpenResult::kOpened) {
      page.status = 404;
      return page;
    }
    page.etag = file_etag(file.st);
    if (!if_none_match.empty() && etag_matches(if_none_match, page.etag)) {
      page.status = 304;
      return page;
    }
    try {
      page.body = base::read_fd(file.fd.get(), kMaxPageBytes, "mirror", (root_ / relative).string());
    } catch (const base::Error& e) {  // a mirror file that cannot be read is an upstream failure (502), not ours
      throw ProxyError("upstream_unavailable", e.cause());
    }
    page.status = 200;
    return page;
  }

  // Without simple/index.json the root index lists the project directories that hold an index.json.
  UpstreamPage list_projects(const std::string& if_none_match) const {
    UpstreamPage page;
    page.url = "mirror:/simple/";
    MirrorFile simple = open_in_mirror("simple", O_DIRECTORY);
    if (simple.result != OpenResult::kOpened) {
      page.status = 404;
      return page;
    }
    std::unique_ptr<DIR, int (*)(DIR*)> dir(::fdopendir(simple.fd.get()), ::closedir);
    if (!dir) {
      throw ProxyError("upstream_unavailable", "mirror", (root_ / "simple").string(),
                       std::string("read directory: ") + std::strerror(errno));
    }
    simple.fd.release();  // owned by dir now
    std::vector<std::string> names;
    while (const dirent* entry = ::readdir(dir.get())) {
      const std::string name = entry->d_name;
      if (!is_normalized_name(name)) continue;
      if (open_in_mirror("simple/" + name + "/index.json").result == OpenResult::kOpened) names.push_back(name);
    }
    std::sort(names.begin(), names.end());
    nlohmann::json projects = nlohmann::json::array();
    for (const auto& name : names) projects.push_back({{"name", name}});
    const nlohmann::json index = {{"meta", {{"api-version", "1.0"}}}, {"projects", projects}};
    const std::string body = index.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);

    page.etag = "\"" + store::sha256_of(body).hex().substr(0, 32) + "\"";
    if (!if_none_match.empty() && etag_matches(if_none_match, page.etag)) {
      page.status = 304;
      return page;
    }
    page.status = 200;
    page.body = body;
    return page;
  }

  std::filesystem::path root_;
};

}  // namespace

std::unique_ptr<PypiUpstream> make_http_pypi_upstream(std::shared_ptr<HttpClient> client, std::string index_url) {
  return std::make_unique<HttpPypiUpstream>(std::move(client), std::move(index_url));
}

std::unique_ptr<PypiUpstream> make_local_pypi_mirror(std::filesystem::path root) {
  return std::make_unique<LocalPypiMirror>(std::move(root));
}

}  // namespace capsule::proxy
