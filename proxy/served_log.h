// ServedLog: every object a proxy listener handed out (URL, sha256, size, where it came from), in order — kept
// with the run it served, so a later audit can fetch exactly the same bytes again.
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
  std::string source;  // "upstream" (fetched for this request) or "cache"
};

class ServedLog {
 public:
  void add(ServedObject object);
  std::vector<ServedObject> objects() const;
  std::size_t size() const;
  // [{"url","sha256","size","source"}...], from the `from`th object on (0: all).
  nlohmann::json to_json(std::size_t from = 0) const;

 private:
  mutable std::mutex mutex_;
  std::vector<ServedObject> objects_;
};

}  // namespace capsule::proxy
