// The run object's one JSON form, assembled from the ledger's row: the outcome's sections are lifted to the
// top so nothing is nested twice or said twice.
#include "spec/run_object.h"

#include <algorithm>

#include "spec/pinned.h"

namespace capsule::spec {

using nlohmann::json;

json RunObject::to_json() const {
  auto optional = [](const auto& value) { return value ? json(*value) : json(); };
  json out = {{"id", id},
              {"state", state},
              {"labels", labels},
              {"peer", {{"uid", peer_uid}, {"pid", peer_pid}}},
              {"times", {{"created", created_ms}, {"started", optional(started_ms)}, {"finished", optional(finished_ms)}}},
              {"spec", spec},
              {"pinned", pinned}};
  for (const char* section : {"result", "tests", "diff", "proxy", "classfiles", "coverage"}) {
    out[section] = outcome && outcome->contains(section) ? (*outcome)[section] : json();
  }
  if (out["pinned"].is_object() && out["proxy"].is_object() && out["proxy"].contains("served")) {
    out["pinned"]["dependencies"] = capsule::spec::to_json(dependencies_of(out["proxy"]["served"]));
  }
  out["replay_of"] = labels.is_object() && labels.contains(kReplayOfLabel) ? labels[kReplayOfLabel] : json();
  out["replay_vary"] = json();
  if (labels.is_object() && labels.contains(kReplayVaryLabel) && labels[kReplayVaryLabel].is_string()) {
    const std::string list = labels[kReplayVaryLabel];
    out["replay_vary"] = json::array();
    for (std::size_t start = 0; start < list.size();) {
      const std::size_t comma = std::min(list.find(',', start), list.size());
      if (comma > start) out["replay_vary"].push_back(list.substr(start, comma - start));
      start = comma + 1;
    }
  }
  out["outputs"] = outcome && outcome->contains("outputs") ? (*outcome)["outputs"] : json();  // daemon/runs/run_outputs.h
  // imported: daemon/bundle/bundle_import.h; the verdict's checks: daemon/record/test_config.h, test_loss.h.
  for (const char* note : {"collect_error", "record_error", "imported", "test_config_changes", "protect_violations",
                           "baseline"}) {
    if (outcome && outcome->contains(note)) out[note] = (*outcome)[note];
  }
  return out;
}

}  // namespace capsule::spec
