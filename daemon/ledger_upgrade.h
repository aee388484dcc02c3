// Upgrading rows a v1 ledger stored (one spec with pins and *_ms limits inside, a record nesting status and
// manifest) to the run object's v2 form, so runs recorded before the upgrade read and resubmit like new ones.
#pragma once

#include <nlohmann/json.hpp>

namespace capsule::daemon {

struct UpgradedRow {
  nlohmann::json spec;
  nlohmann::json pinned;
  nlohmann::json outcome;  // null for a run that never finished
};

UpgradedRow upgrade_v1_row(const nlohmann::json& spec, const nlohmann::json& record);

}  // namespace capsule::daemon
