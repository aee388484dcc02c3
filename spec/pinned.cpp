// Printing and reading the pins of a run, so a stored run's {"spec", "pinned"} is a request that runs the
// same images under the same policy and cutoff.
#include "spec/pinned.h"

#include "spec/json_fields.h"
#include "store/digest.h"

namespace capsule::spec {

using nlohmann::json;

json to_json(const Pinned& pinned) {
  return {{"image_digests", pinned.image_digests},
          {"image_choice", pinned.image_choice},
          {"policy_sha256", pinned.policy_sha256},
          {"workspace_digest", pinned.workspace_digest ? json(*pinned.workspace_digest) : json()},
          {"cutoff", pinned.cutoff ? json(*pinned.cutoff) : json()},
          {"toolchains", pinned.toolchains}};
}

Pinned parse_pinned(const json& body) {
  if (!body.is_object()) invalid("pinned", "must be an object");
  reject_unknown(body, "pinned",
                 {"image_digests", "image_choice", "policy_sha256", "workspace_digest", "cutoff", "toolchains"});
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
  if (body.contains("cutoff") && !body["cutoff"].is_null()) out.cutoff = string_field(body["cutoff"], "pinned.cutoff");
  if (body.contains("toolchains")) out.toolchains = string_map(body["toolchains"], "pinned.toolchains");
  return out;
}

}  // namespace capsule::spec
