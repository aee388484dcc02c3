// FrozenSet: what a replay's proxy may serve — exactly the objects (URL -> sha256, size) the original run
// received, read back from the proxy's blob cache; any other URL is refused with a message naming it.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>

#include <nlohmann/json.hpp>

namespace capsule::proxy {

struct FrozenObject {
  std::string sha256;  // hex
  std::uint64_t size = 0;
};

class FrozenSet {
 public:
  // `original_run`: the id of the run whose objects these are (named in refusals). `objects`: url -> object; the
  // first of duplicate URLs is kept.
  FrozenSet(std::string original_run, std::map<std::string, FrozenObject> objects);
  // From a run's pinned.dependencies ([{"url", "sha256", "size"}]); entries that are not of that shape are
  // skipped (parse_pinned checked them when the run was read).
  static FrozenSet from_dependencies(std::string original_run, const nlohmann::json& dependencies);

  const FrozenObject* find(const std::string& url) const;
  const std::string& original_run() const { return original_run_; }
  std::size_t size() const { return objects_.size(); }
  // "not fetched by the original run <id>: <url>"
  std::string refusal(const std::string& url) const;

 private:
  std::string original_run_;
  std::map<std::string, FrozenObject> objects_;
};

// The content type a frozen object is served with, from its URL and bytes (the original response's header is
// not recorded): PyPI pages JSON or HTML by their first byte, PEP 658 metadata text, Maven by extension.
std::string frozen_content_type(const std::string& url, std::string_view body);

}  // namespace capsule::proxy
