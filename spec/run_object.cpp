// The run object's one JSON form, assembled from the ledger's row: the outcome's sections are lifted to the
// top so nothing is nested twice or said twice.
#include "spec/run_object.h"

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
  out["outputs"] = outcome && outcome->contains("outputs") ? (*outcome)["outputs"] : json();  // daemon/runs/run_outputs.h
  for (const char* note : {"collect_error", "record_error"}) {
    if (outcome && outcome->contains(note)) out[note] = (*outcome)[note];
  }
  return out;
}

}  // namespace capsule::spec
