// Maven upstreams: an HTTP(S) repository (publish time = Last-Modified of a HEAD on the .pom) and local
// repository trees (publish time from the publish-times file, else the .pom's mtime).
#include "proxy/upstream/maven_upstream.h"

#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <fstream>
#include <map>
#include <set>
#include <string_view>
#include <utility>

#include "base/error.h"
#include "base/file_util.h"
#include "proxy/error.h"
#include "proxy/upstream/url.h"
#include "base/unique_fd.h"

namespace capsule::proxy {
namespace {

using base::UniqueFd;

constexpr std::uint64_t kMaxGetBytes = 1ULL << 30;

// One path segment of a coordinate or a request: not empty, not "." or "..", no '/', NUL or control characters.
bool valid_segment(std::string_view segment) {
  if (segment.empty() || segment == "." || segment == "..") return false;
  for (char c : segment) {
    if (c == '/' || static_cast<unsigned char>(c) < 0x20 || c == 0x7f) return false;
  }
  return true;
}

// "org.apache.maven" -> "org/apache/maven".
std::string group_path(const std::string& group_id) {
  std::string path;
  std::string_view rest = group_id;
  for (;;) {
    const std::size_t dot = rest.find('.');
    const std::string_view part = rest.substr(0, dot);
    if (!valid_segment(part)) throw ProxyError("bad_coordinate", "maven", group_id, "not a valid groupId");
    path += part;
    if (dot == std::string_view::npos) return path;
    path += '/';
    rest = rest.substr(dot + 1);
  }
}

std::string artifact_dir(const std::string& group_id, const std::string& artifact_id) {
  if (!valid_segment(artifact_id)) {
    throw ProxyError("bad_coordinate", "maven", artifact_id, "not a valid artifactId");
  }
  return group_path(group_id) + "/" + artifact_id;
}

// <group path>/<artifact>/<version>/<artifact>-<version>.pom
std::string pom_path(const std::string& group_id, const std::string& artifact_id, const std::string& version) {
  if (!valid_segment(version)) throw ProxyError("bad_coordinate", "maven", version, "not a valid version");
  return artifact_dir(group_id, artifact_id) + "/" + version + "/" + artifact_id + "-" + version + ".pom";
}

// The caller checks request paths; this refuses again what must never reach a file system or a URL.
void check_request_path(const std::string& path) {
  bool valid = !path.empty() && path.front() != '/';
  std::string_view rest = path;
  while (valid && !rest.empty()) {
    const std::size_t slash = rest.find('/');
    valid = valid_segment(rest.substr(0, slash));
    rest = slash == std::string_view::npos ? std::string_view() : rest.substr(slash + 1);
  }
  if (!valid || path.back() == '/') {
    throw ProxyError("bad_path", "maven", path, "not a repository-relative file path");
  }
}

std::optional<Micros> last_modified_of(const HttpResponse& response) {
  auto found = response.headers.find("Last-Modified");
  if (found == response.headers.end()) return std::nullopt;
  return parse_http_date(found->second);
}

// A local file that exists but cannot be read: the mirror is unavailable, not the file missing.
[[noreturn]] void throw_file_errno(const std::string& file, const std::string& operation) {
  throw ProxyError("upstream_unavailable", "maven", file, operation + ": " + std::strerror(errno));
}

Micros mtime_of(const struct stat& st) {
  return static_cast<Micros>(st.st_mtim.tv_sec) * 1000000 + static_cast<Micros>(st.st_mtim.tv_nsec / 1000);
}

// ---- HTTP repository ----

class HttpMavenUpstream final : public MavenUpstream {
 public:
  HttpMavenUpstream(std::shared_ptr<HttpClient> client, std::string base_url)
      : client_(std::move(client)), base_url_(std::move(base_url)) {
    if (!parse_url(base_url_) || base_url_.back() != '/') {
      throw ProxyError("bad_upstream_url", "maven", base_url_, "a repository URL is http(s) and ends with '/'");
    }
  }

  MavenFetch get(const std::string& path) override {
    check_request_path(path);
    HttpResponse response = client_->get(base_url_ + path);
    check_status(response);
    MavenFetch fetch;
    fetch.status = response.status;
    if (response.status == 200) {
      fetch.body = std::move(response.body);
      fetch.last_modified = last_modified_of(response);
    }
    return fetch;
  }

  unsigned get_to(const std::string& path, const BodySink& sink) override {
    check_request_path(path);
    const HttpResponse response = client_->get_to(base_url_ + path, sink);
    check_status(response);
    return response.status;
  }

  std::optional<Micros> publish_time(const std::string& group_id, const std::string& artifact_id,
                                     const std::string& version) override {
    const HttpResponse response = client_->head(base_url_ + pom_path(group_id, artifact_id, version));
    check_status(response);
    if (response.status == 404) return std::nullopt;
    return last_modified_of(response);
  }

  std::optional<std::vector<std::string>> list_versions(const std::string&, const std::string&) override {
    return std::nullopt;
  }

  std::string describe() const override { return base_url_; }

 private:
  static void check_status(const HttpResponse& response) {
    if (response.status != 200 && response.status != 404) {
      throw ProxyError("bad_upstream", "maven", response.url, "answered " + std::to_string(response.status));
    }
  }

  std::shared_ptr<HttpClient> client_;
  std::string base_url_;
};

// ---- local repository trees ----

std::string trim(std::string_view text) {
  const std::size_t first = text.find_first_not_of(" \t\r");
  if (first == std::string_view::npos) return {};
  const std::size_t last = text.find_last_not_of(" \t\r");
  return std::string(text.substr(first, last + 1 - first));
}

// One "groupId:artifactId:version<TAB or spaces>RFC3339" per line; blank lines and '#' comments skipped. A
// coordinate listed twice must carry the same time.
std::map<std::string, Micros> read_publish_times(const std::filesystem::path& file) {
  std::ifstream in(file);
  if (!in) {
    throw ProxyError("upstream_unavailable", "publish-times", file.string(),
                     std::string("open: ") + std::strerror(errno));
  }
  std::map<std::string, Micros> times;
  std::map<std::string, unsigned> first_line;
  std::string raw;
  unsigned number = 0;
  while (std::getline(in, raw)) {
    ++number;
    const std::string line = trim(raw);
    if (line.empty() || line.front() == '#') continue;
    auto bad = [&](const std::string& detail) {
      return ProxyError("bad_publish_times", "publish-times", file.string() + ":" + std::to_string(number),
                        detail);
    };
    const std::size_t space = line.find_first_of(" \t");
    if (space == std::string::npos) throw bad("expected 'groupId:artifactId:version <RFC 3339 time>'");
    const std::string coordinate = line.substr(0, space);
    const std::string when = trim(line.substr(space));
    const std::size_t colon1 = coordinate.find(':');
    const std::size_t colon2 = colon1 == std::string::npos ? colon1 : coordinate.find(':', colon1 + 1);
    if (colon2 == std::string::npos || coordinate.find(':', colon2 + 1) != std::string::npos) {
      throw bad("'" + coordinate + "' is not groupId:artifactId:version");
    }
    try {
      pom_path(coordinate.substr(0, colon1), coordinate.substr(colon1 + 1, colon2 - colon1 - 1),
               coordinate.substr(colon2 + 1));
    } catch (const ProxyError& e) {  // a bad coordinate in the file is the mirror's fault: name file:line
      throw bad("'" + coordinate + "': " + e.cause().detail);
    }
    const std::optional<Micros> at = parse_timestamp(when);
    if (!at) throw bad("'" + when + "' is not an RFC 3339 time");
    auto [existing, inserted] = times.emplace(coordinate, *at);
    if (inserted) {
      first_line[coordinate] = number;
    } else if (existing->second != *at) {
      throw bad(coordinate + " already has a different time on line " + std::to_string(first_line[coordinate]));
    }
  }
  if (in.bad()) throw ProxyError("upstream_unavailable", "publish-times", file.string(), "read failed");
  return times;
}

class LocalMavenMirror final : public MavenUpstream {
 public:
  LocalMavenMirror(std::vector<std::filesystem::path> roots, std::optional<std::filesystem::path> times_file)
      : roots_(std::move(roots)) {
    if (roots_.empty()) throw ProxyError("bad_mirror", "maven", "mirror", "no repository roots given");
    for (const auto& root : roots_) {
      struct stat st {};
      if (::stat(root.c_str(), &st) != 0 || !S_ISDIR(st.st_mode)) {
        throw ProxyError("upstream_unavailable", "maven", root.string(), "not a directory");
      }
    }
    if (times_file) times_ = read_publish_times(*times_file);
  }

  MavenFetch get(const std::string& path) override {
    check_request_path(path);
    MavenFetch fetch;
    Found found = find(path);
    if (!found.fd) {
      fetch.status = 404;
      return fetch;
    }
    try {
      fetch.body = base::read_fd(found.fd.get(), kMaxGetBytes, "maven", found.shown);
    } catch (const base::Error& e) {  // a mirror file that cannot be read is an upstream failure (502), not ours
      throw ProxyError("upstream_unavailable", e.cause());
    }
    fetch.status = 200;
    fetch.last_modified = mtime_of(found.st);
    return fetch;
  }

  unsigned get_to(const std::string& path, const BodySink& sink) override {
    check_request_path(path);
    Found found = find(path);
    if (!found.fd) return 404;
    char buffer[65536];
    for (;;) {
      const ssize_t n = ::read(found.fd.get(), buffer, sizeof buffer);
      if (n < 0) {
        if (errno == EINTR) continue;
        throw_file_errno(found.shown, "read");
      }
      if (n == 0) return 200;
      sink(buffer, static_cast<std::size_t>(n));
    }
  }

  std::optional<Micros> publish_time(const std::string& group_id, const std::string& artifact_id,
                                     const std::string& version) override {
    const std::string pom = pom_path(group_id, artifact_id, version);
    if (auto listed = times_.find(group_id + ":" + artifact_id + ":" + version); listed != times_.end()) {
      return listed->second;
    }
    Found found = find(pom);
    if (!found.fd) return std::nullopt;
    return mtime_of(found.st);
  }

  std::optional<std::vector<std::string>> list_versions(const std::string& group_id,
                                                        const std::string& artifact_id) override {
    const std::string relative = artifact_dir(group_id, artifact_id);
    std::set<std::string> versions;
    for (const auto& root : roots_) {
      const std::filesystem::path dir = root / relative;
      DIR* stream = ::opendir(dir.c_str());
      if (stream == nullptr) {
        if (errno == ENOENT || errno == ENOTDIR) continue;
        throw_file_errno(dir.string(), "open directory");
      }
      while (const dirent* entry = ::readdir(stream)) {
        const std::string version = entry->d_name;
        if (!valid_segment(version) || version.front() == '.') continue;
        struct stat st {};
        const std::filesystem::path pom = dir / version / (artifact_id + "-" + version + ".pom");
        if (::stat(pom.c_str(), &st) == 0 && S_ISREG(st.st_mode)) versions.insert(version);
      }
      ::closedir(stream);
    }
    return std::vector<std::string>(versions.begin(), versions.end());
  }

  std::map<std::string, Micros> listed_publish_times() const override { return times_; }

  std::string describe() const override {
    std::string text = "mirror";
    for (const auto& root : roots_) {
      text += ' ';
      text += root.string();
    }
    return text;
  }

 private:
  struct Found {
    UniqueFd fd;  // empty: in no root
    struct stat st {};
    std::string shown;
  };

  // The first root holding `path` as a regular file. Symlinks are followed wherever they point: the roots are
  // the operator's trusted trees (Debian's maven-repo links its jars to /usr/share/java), while the request
  // path itself was checked to have no "..", so a client cannot climb out of a root.
  Found find(const std::string& path) const {
    for (const auto& root : roots_) {
      Found found;
      found.shown = (root / path).string();
      found.fd.reset(::open(found.shown.c_str(), O_RDONLY | O_CLOEXEC | O_NOCTTY | O_NONBLOCK));
      if (!found.fd) {
        if (errno == ENOENT || errno == ENOTDIR || errno == ENAMETOOLONG || errno == ELOOP) continue;
        throw_file_errno(found.shown, "open");
      }
      if (::fstat(found.fd.get(), &found.st) != 0) {
        throw_file_errno(found.shown, "stat");
      }
      if (S_ISREG(found.st.st_mode)) return found;
    }
    return Found{};
  }

  std::vector<std::filesystem::path> roots_;
  std::map<std::string, Micros> times_;  // from the publish-times file; read-only after construction
};

}  // namespace

std::unique_ptr<MavenUpstream> make_http_maven_upstream(std::shared_ptr<HttpClient> client, std::string base_url) {
  return std::make_unique<HttpMavenUpstream>(std::move(client), std::move(base_url));
}

std::unique_ptr<MavenUpstream> make_local_maven_mirror(std::vector<std::filesystem::path> roots,
                                                       std::optional<std::filesystem::path> publish_times_file) {
  return std::make_unique<LocalMavenMirror>(std::move(roots), std::move(publish_times_file));
}

}  // namespace capsule::proxy
