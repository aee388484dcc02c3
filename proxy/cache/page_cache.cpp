// PageCache files: one line of JSON (validators, URL, fetch time, body length) then the body's bytes as they
// came, so multi-megabyte pages are neither escaped nor re-encoded.
#include "proxy/cache/page_cache.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <nlohmann/json.hpp>
#include <spdlog/spdlog.h>

#include "base/ascii.h"
#include "base/error.h"
#include "base/file_util.h"
#include "proxy/error.h"
#include "base/unique_fd.h"

namespace capsule::proxy {
namespace {

constexpr std::size_t kMaxKeyLength = 200;
constexpr std::size_t kMaxKindLength = 64;
constexpr std::uint64_t kMaxFileBytes = 1ULL << 30;

bool valid_kind(const std::string& kind) {
  if (kind.empty() || kind.size() > kMaxKindLength || kind.front() == '-') return false;
  for (char c : kind) {
    if (!((c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '-')) return false;
  }
  return true;
}

bool valid_key(const std::string& key) {
  if (key.empty() || key.size() > kMaxKeyLength || !base::is_ascii_alnum(key.front())) return false;
  for (char c : key) {
    if (!(base::is_ascii_alnum(c) || c == '.' || c == '_' || c == ':' || c == '+' || c == '-')) return false;
  }
  return true;
}

}  // namespace

PageCache::PageCache(std::filesystem::path dir) : dir_(std::move(dir)) {}

std::filesystem::path PageCache::file_for(const std::string& kind, const std::string& key) const {
  if (!valid_kind(kind) || !valid_key(key)) {
    throw ProxyError("bad_cache_key", "page-cache", kind + "/" + key,
                     "kind must be [a-z0-9-]+ and key a normalized name of [A-Za-z0-9._:+-]");
  }
  return dir_ / kind / (key + ".page");
}

std::optional<CachedPage> PageCache::get(const std::string& kind, const std::string& key) const {
  const std::filesystem::path path = file_for(kind, key);
  base::UniqueFd fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NOFOLLOW));
  if (!fd) {
    if (errno == ENOENT) return std::nullopt;
    throw ProxyError("cache_failure", base::Cause{"page-cache", path.string(), errno, "open"});
  }
  std::string data;
  try {
    data = base::read_fd(fd.get(), kMaxFileBytes, "page-cache", path.string());
  } catch (const base::Error& e) {  // the proxy's code for a cache it cannot use; the cause names the file
    throw ProxyError("cache_failure", e.cause());
  }

  const std::size_t newline = data.find('\n');
  try {
    if (newline == std::string::npos) throw std::runtime_error("no header line");
    const auto header = nlohmann::json::parse(data.begin(), data.begin() + static_cast<std::ptrdiff_t>(newline));
    const auto body_bytes = header.at("body_bytes").get<std::uint64_t>();
    if (body_bytes != data.size() - newline - 1) {
      throw std::runtime_error("body is " + std::to_string(data.size() - newline - 1) + " bytes, header says " +
                               std::to_string(body_bytes));
    }
    CachedPage page;
    page.etag = header.at("etag").get<std::string>();
    page.last_serial = header.at("last_serial").get<std::string>();
    page.url = header.at("url").get<std::string>();
    page.fetched_at = header.at("fetched_at").get<Micros>();
    page.body = data.substr(newline + 1);
    return page;
  } catch (const std::exception& e) {
    spdlog::warn("page-cache {}: damaged, treated as not cached: {}", path.string(), e.what());
    return std::nullopt;
  }
}

void PageCache::put(const std::string& kind, const std::string& key, const CachedPage& page) {
  const std::filesystem::path path = file_for(kind, key);
  const nlohmann::json header = {{"etag", page.etag},
                                 {"last_serial", page.last_serial},
                                 {"url", page.url},
                                 {"fetched_at", page.fetched_at},
                                 {"body_bytes", page.body.size()}};
  std::string content = header.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
  content += '\n';
  content += page.body;
  try {
    base::make_dir(path.parent_path(), 0755, "page-cache");
    base::write_file_atomic(path, content, "page-cache", 0644);
  } catch (const base::Error& e) {  // the proxy's code for a cache it cannot use; the cause names the file
    throw ProxyError("cache_failure", e.cause());
  }
}

}  // namespace capsule::proxy
