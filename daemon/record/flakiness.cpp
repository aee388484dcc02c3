// FlakinessTally: per-run verdicts and per-case outcomes counted into one map by case name; the flip rate is
// the share of the minority outcome, so a case failing one run in three has 1/3.
#include "daemon/record/flakiness.h"

#include <algorithm>

#include "daemon/record/run_verdict.h"

namespace capsule::daemon {

using nlohmann::json;

double flip_rate(std::uint64_t passed, std::uint64_t failed) {
  if (passed + failed == 0) return 0.0;
  return static_cast<double>(std::min(passed, failed)) / static_cast<double>(passed + failed);
}

void FlakinessTally::add(const json& run) {
  ++runs_;
  ++(run_passed(run) ? verdict_.passed : verdict_.failed);
  for (const auto& [name, outcome] : case_outcomes(run)) {
    auto it = cases_.find(name);
    if (it == cases_.end()) {
      if (cases_.size() >= max_cases_) {
        cases_truncated_ = true;
        continue;
      }
      it = cases_.emplace(name, Counts{}).first;
    }
    if (is_failure(outcome)) ++it->second.failed;
    else if (outcome == "passed") ++it->second.passed;
    else ++it->second.skipped;
  }
}

json FlakinessTally::to_json() const {
  json cases = json::array(), flaky = json::array();
  for (const auto& [name, counts] : cases_) {
    const double rate = flip_rate(counts.passed, counts.failed);
    cases.push_back({{"name", name}, {"passed", counts.passed}, {"failed", counts.failed},
                     {"skipped", counts.skipped}, {"flip_rate", rate}});
    if (rate > 0) flaky.push_back(name);
  }
  json out = {{"runs", runs_},
              {"verdict", {{"passed", verdict_.passed}, {"failed", verdict_.failed},
                           {"flip_rate", flip_rate(verdict_.passed, verdict_.failed)}}},
              {"cases", std::move(cases)},
              {"flaky", std::move(flaky)}};
  if (cases_truncated_) out["cases_truncated"] = true;
  return out;
}

}  // namespace capsule::daemon
