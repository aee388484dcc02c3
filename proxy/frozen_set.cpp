// FrozenSet: the original run's served objects by URL, and the content type each is served with again.
#include "proxy/frozen_set.h"

namespace capsule::proxy {

FrozenSet::FrozenSet(std::string original_run, std::map<std::string, FrozenObject> objects)
    : original_run_(std::move(original_run)), objects_(std::move(objects)) {}

FrozenSet FrozenSet::from_dependencies(std::string original_run, const nlohmann::json& dependencies) {
  std::map<std::string, FrozenObject> objects;
  if (dependencies.is_array()) {
    for (const auto& item : dependencies) {
      if (!item.is_object()) continue;
      const nlohmann::json url = item.value("url", nlohmann::json()), sha256 = item.value("sha256", nlohmann::json()),
                           size = item.value("size", nlohmann::json());
      if (!url.is_string() || !sha256.is_string() || !size.is_number_integer() || size.get<std::int64_t>() < 0) continue;
      objects.emplace(item["url"].get<std::string>(),
                      FrozenObject{item["sha256"].get<std::string>(), item["size"].get<std::uint64_t>()});
    }
  }
  return FrozenSet(std::move(original_run), std::move(objects));
}

const FrozenObject* FrozenSet::find(const std::string& url) const {
  const auto found = objects_.find(url);
  return found == objects_.end() ? nullptr : &found->second;
}

std::string FrozenSet::refusal(const std::string& url) const {
  return "not fetched by the original run " + original_run_ + ": " + url;
}

std::string frozen_content_type(const std::string& url, std::string_view body) {
  const auto ends = [&](std::string_view suffix) { return url.ends_with(suffix); };
  if (url.starts_with("/pypi/")) {
    if (url.find("/files/") != std::string::npos) {
      return ends(".metadata") ? "text/plain; charset=utf-8" : "application/octet-stream";
    }
    return !body.empty() && body.front() == '{' ? "application/vnd.pypi.simple.v1+json" : "text/html; charset=utf-8";
  }
  if (ends(".pom") || ends(".xml")) return "text/xml";
  if (ends(".jar")) return "application/java-archive";
  if (ends(".module")) return "application/json";
  if (ends(".md5") || ends(".sha1") || ends(".sha256") || ends(".sha512")) return "text/plain";
  return "application/octet-stream";
}

}  // namespace capsule::proxy
