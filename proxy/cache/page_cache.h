// PageCache: the upstream index pages the proxy last fetched (PyPI project pages, root indexes, Maven metadata),
// kept on disk with their validators so they can be revalidated (ETag / serial) and served in offline mode.
#pragma once

#include <filesystem>
#include <optional>
#include <string>

#include "proxy/cutoff.h"

namespace capsule::proxy {

struct CachedPage {
  std::string body;         // as the upstream sent it
  std::string etag;         // the upstream's validator (quoted), or empty
  std::string last_serial;  // X-PyPI-Last-Serial, or empty
  std::string url;          // the page's URL, the base for relative URLs in it
  Micros fetched_at = 0;    // when the body was last fetched or revalidated
};

// One file per page, <dir>/<kind>/<key>.page, replaced atomically (temporary file + rename), so concurrent
// readers see the old page or the new one, never a mix. Thread-safe without locks.
class PageCache {
 public:
  explicit PageCache(std::filesystem::path dir);

  // kind: [a-z0-9-]+ ("pypi-project", "pypi-index", ...). key: a normalized name of [A-Za-z0-9._:+-], starting
  // with a letter or digit, at most 200 characters (so "/", ".." and hidden names are impossible).
  // Other kinds or keys throw ProxyError 400 "bad_cache_key".
  // nullopt when the page is not cached (a damaged file is logged and treated as missing).
  std::optional<CachedPage> get(const std::string& kind, const std::string& key) const;
  // Throws ProxyError 500 "cache_failure" when the file cannot be written.
  void put(const std::string& kind, const std::string& key, const CachedPage& page);

 private:
  std::filesystem::path file_for(const std::string& kind, const std::string& key) const;

  std::filesystem::path dir_;
};

}  // namespace capsule::proxy
