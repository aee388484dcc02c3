// The v1 -> v2 row conversion: limits renamed to the request's vocabulary, pins moved out of the spec, the
// record's status (the row's state) and manifest (a copy of the spec) dropped, its sections lifted.
#include "daemon/ledger_upgrade.h"

namespace capsule::daemon {

using nlohmann::json;

UpgradedRow upgrade_v1_row(const json& spec, const json& record) {
  UpgradedRow out;
  out.spec = json::object();
  for (const auto& [key, value] : spec.items()) {
    if (key == "image_digest" || key == "image_digests" || key == "image_choice" || key == "stdin_bytes") continue;
    if (value.is_null()) continue;  // v1 wrote absent cwd / workspace as null
    out.spec[key] = value;
  }
  if (spec.contains("toolchains")) out.spec.erase("image");  // v1 stored the picked image's ref beside them
  if (spec.contains("limits") && spec["limits"].is_object()) {
    static const std::pair<const char*, const char*> kRenamed[] = {
        {"wall_time_ms", "wall_time"},   {"cpu_time_ms", "cpu_time"},       {"kill_grace_ms", "kill_grace"},
        {"memory_bytes", "memory"},      {"tmp_size_bytes", "tmp_size"},    {"output_cap_bytes", "output_cap"},
        {"disk_bytes", "disk"}};
    json limits = json::object();
    for (const auto& [key, value] : spec["limits"].items()) {
      std::string name = key;
      for (const auto& [old_name, new_name] : kRenamed) {
        if (key == old_name) name = new_name;
      }
      limits[name] = value;
    }
    out.spec["limits"] = limits;
  }
  out.pinned = {{"image_digests", spec.value("image_digests", json::array())},
                {"image_choice", spec.contains("image_choice") ? spec["image_choice"] : json::object()},
                {"policy_sha256", nullptr},
                {"workspace_digest", nullptr},
                {"cutoff", spec.value("network", "") == "proxy" && spec.contains("as_of") ? spec["as_of"] : json()},
                {"toolchains", spec.contains("image_choice") ? spec["image_choice"].value("provided", json::object())
                                                             : json::object()}};
  if (!record.is_object()) return out;
  json result = json::object();
  out.outcome = json::object();
  for (const auto& [key, value] : record.items()) {
    if (key == "status" || key == "manifest") continue;
    if (key == "tests" || key == "diff" || key == "proxy" || key == "collect_error" || key == "record_error") {
      out.outcome[key] = value;
    } else {
      result[key] = value;
    }
  }
  out.outcome["result"] = result;
  return out;
}

}  // namespace capsule::daemon
