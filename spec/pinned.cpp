// Printing and reading the pins of a run, so a stored run's {"spec", "pinned"} is a request that runs the
// same images under the same policy and cutoff, and a replay knows which objects the proxy served.
#include "spec/pinned.h"

#include <set>

#include "spec/json_fields.h"
#include "store/digest.h"

namespace capsule::spec {

using nlohmann::json;

namespace {

json optional_text(const std::optional<std::string>& value) { return value ? json(*value) : json(); }

bool is_sha256_hex(const std::string& text) {
  return text.size() == 64 && text.find_first_not_of("0123456789abcdef") == std::string::npos;
}

std::optional<std::string> optional_string(const json& body, const char* name) {
  if (!body.contains(name) || body[name].is_null()) return std::nullopt;
  return string_field(body[name], std::string("pinned.") + name);
}

std::vector<Dependency> parse_dependencies(const json& list) {
  if (!list.is_array()) invalid("pinned.dependencies", "must be an array of {url, sha256, size}");
  if (list.size() > kMaxPinnedDependencies) {
    invalid("pinned.dependencies", "at most " + std::to_string(kMaxPinnedDependencies) + " objects");
  }
  std::vector<Dependency> out;
  for (std::size_t i = 0; i < list.size(); ++i) {
    const std::string field = "pinned.dependencies[" + std::to_string(i) + "]";
    const json& item = list[i];
    if (!item.is_object()) invalid(field, "must be an object {url, sha256, size}");
    reject_unknown(item, field, {"url", "sha256", "size"});
    Dependency dependency;
    dependency.url = string_field(item.value("url", json()), field + ".url");
    dependency.sha256 = string_field(item.value("sha256", json()), field + ".sha256");
    if (!is_sha256_hex(dependency.sha256)) invalid(field + ".sha256", "must be 64 lowercase hex digits");
    const json size = item.value("size", json());
    if (!size.is_number_integer() || size.get<std::int64_t>() < 0) invalid(field + ".size", "must be a byte count");
    dependency.size = item["size"].get<std::uint64_t>();
    out.push_back(std::move(dependency));
  }
  return out;
}

}  // namespace

json to_json(const std::vector<Dependency>& dependencies) {
  json out = json::array();
  for (const auto& dependency : dependencies) {
    out.push_back({{"url", dependency.url}, {"sha256", dependency.sha256}, {"size", dependency.size}});
  }
  return out;
}

std::vector<Dependency> dependencies_of(const json& served) {
  std::vector<Dependency> out;
  if (!served.is_array()) return out;
  std::set<std::string> seen;
  for (const auto& object : served) {
    if (!object.is_object() || !object.contains("url") || !object["url"].is_string()) continue;
    const std::string url = object["url"];
    if (!seen.insert(url).second) continue;
    out.push_back({url, object.value("sha256", ""), object.value("size", std::uint64_t{0})});
  }
  return out;
}

json to_json(const Pinned& pinned) {
  json replayable;
  json reasons = json::array();
  if (pinned.not_replayable) {
    replayable = pinned.not_replayable->empty();
    reasons = *pinned.not_replayable;
  }
  return {{"image_digests", pinned.image_digests},
          {"image_choice", pinned.image_choice},
          {"policy_sha256", pinned.policy_sha256},
          {"workspace_digest", optional_text(pinned.workspace_digest)},
          {"cutoff", optional_text(pinned.cutoff)},
          {"toolchains", pinned.toolchains},
          {"kernel", optional_text(pinned.kernel)},
          {"capsule", optional_text(pinned.capsule)},
          {"host_image", optional_text(pinned.host_image)},
          {"replayable", replayable},
          {"not_replayable", reasons},
          {"dependencies", to_json(pinned.dependencies)}};
}

Pinned parse_pinned(const json& body) {
  if (!body.is_object()) invalid("pinned", "must be an object");
  reject_unknown(body, "pinned",
                 {"image_digests", "image_choice", "policy_sha256", "workspace_digest", "cutoff", "toolchains",
                  "kernel", "capsule", "host_image", "replayable", "not_replayable", "dependencies"});
  Pinned out;
  auto digest = [](const json& value, const std::string& field) {
    const std::string text = string_field(value, field);
    if (!store::Digest::try_parse(text)) invalid(field, "'" + text + "' is not a sha256 digest");
    return text;
  };
  if (body.contains("image_digests")) {
    const json& list = body["image_digests"];
    if (!list.is_array()) invalid("pinned.image_digests", "must be an array of digests");
    // No root stacks more (images/image_stack.h caps its filesystem layers at 128): refused before any lookup.
    if (list.size() > kMaxPinnedImages) invalid("pinned.image_digests", "at most " + std::to_string(kMaxPinnedImages) + " images");
    for (std::size_t i = 0; i < list.size(); ++i) {
      out.image_digests.push_back(digest(list[i], "pinned.image_digests[" + std::to_string(i) + "]"));
    }
  }
  if (body.contains("image_choice") && !body["image_choice"].is_null()) {
    if (!body["image_choice"].is_object()) invalid("pinned.image_choice", "must be an object");
    out.image_choice = body["image_choice"];
  }
  if (body.contains("policy_sha256") && !body["policy_sha256"].is_null()) {
    out.policy_sha256 = digest(body["policy_sha256"], "pinned.policy_sha256");
  }
  if (body.contains("workspace_digest") && !body["workspace_digest"].is_null()) {
    out.workspace_digest = digest(body["workspace_digest"], "pinned.workspace_digest");
  }
  out.cutoff = optional_string(body, "cutoff");
  if (body.contains("toolchains")) out.toolchains = string_map(body["toolchains"], "pinned.toolchains");
  out.kernel = optional_string(body, "kernel");
  out.capsule = optional_string(body, "capsule");
  if (body.contains("host_image") && !body["host_image"].is_null()) {
    out.host_image = digest(body["host_image"], "pinned.host_image");
  }
  if (body.contains("replayable") && !body["replayable"].is_null() && !body["replayable"].is_boolean()) {
    invalid("pinned.replayable", "must be true, false or null");
  }
  // Known only when "replayable" was recorded: older rows say nothing about it.
  if (body.contains("replayable") && body["replayable"].is_boolean()) {
    std::vector<std::string> reasons;
    if (body.contains("not_replayable")) {
      const json& list = body["not_replayable"];
      if (!list.is_array()) invalid("pinned.not_replayable", "must be an array of reasons");
      for (std::size_t i = 0; i < list.size(); ++i) {
        reasons.push_back(string_field(list[i], "pinned.not_replayable[" + std::to_string(i) + "]"));
      }
    }
    out.not_replayable = std::move(reasons);
  }
  if (body.contains("dependencies") && !body["dependencies"].is_null()) {
    out.dependencies = parse_dependencies(body["dependencies"]);
  }
  return out;
}

}  // namespace capsule::spec
