// ServedLog: every object a proxy listener handed out (URL, sha256, size, where it came from), in order — kept
// with the run it served, so a later audit can fetch exactly the same bytes again; a frozen (replay) listener
// also lists the URLs it refused because the original run never fetched them.
#pragma once

#include <cstdint>
#include <mutex>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace capsule::proxy {

struct ServedObject {
  std::string url;     // the path asked for, e.g. /pypi/snapshot/2023-04-11T00:00:00Z/files/demo/demo-1.0.tar.gz
  std::string sha256;  // of the bytes sent
  std::uint64_t size = 0;
  std::string source;  // "upstream" (fetched for this request), "cache", or "frozen" (a replay's)
};

class ServedLog {
 public:
  void add(ServedObject object);
  std::vector<ServedObject> objects() const;
  std::size_t size() const;
  // [{"url","sha256","size","source"}...], from the `from`th object on (0: all).
  nlohmann::json to_json(std::size_t from = 0) const;

  // A URL a frozen listener refused; each is listed once, at most kMaxRefused of them.
  void refuse(const std::string& url);
  nlohmann::json refused_json() const;  // ["url", ...] in the order first refused
  static constexpr std::size_t kMaxRefused = 1000;

 private:
  mutable std::mutex mutex_;
  std::vector<ServedObject> objects_;
  std::vector<std::string> refused_;
};

}  // namespace capsule::proxy
