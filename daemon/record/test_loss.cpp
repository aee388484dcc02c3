// lost_tests: the cases of one run missing or newly skipped in another, counted in full and listed within a
// bound; loss_check turns that into the verdict both runs diff and a run's baseline check report.
#include "daemon/record/test_loss.h"

#include <map>

#include "daemon/record/run_verdict.h"

namespace capsule::daemon {
namespace {

using nlohmann::json;

json total_of(const json& run) {
  const json total = field_of(run, "tests", "total");
  return total.is_number_integer() && total.get<std::int64_t>() >= 0 ? total : json();
}

bool cases_cut(const json& run) {
  return field_of(run, "tests", "cases_truncated") == true || field_of(run, "tests", "truncated") == true;
}

}  // namespace

json TestLoss::reasons() const {
  json out = json::array();
  if (removed > 0 || fewer_total) out.push_back("tests_removed");
  if (newly_skipped > 0) out.push_back("tests_newly_skipped");
  return out;
}

TestLoss lost_tests(const json& a, const json& b, std::size_t max_listed) {
  TestLoss loss;
  loss.truncated = cases_cut(a) || cases_cut(b);
  const std::map<std::string, std::string> in_a = case_outcomes(a), in_b = case_outcomes(b);
  for (const auto& [name, outcome] : in_a) {
    const auto other = in_b.find(name);
    if (other == in_b.end()) {
      ++loss.removed;
      if (loss.removed_cases.size() < max_listed) loss.removed_cases.push_back({{"name", name}, {"outcome", outcome}});
      else loss.truncated = true;
    } else if (other->second == "skipped" && outcome != "skipped") {
      ++loss.newly_skipped;
      if (loss.newly_skipped_cases.size() < max_listed) loss.newly_skipped_cases.push_back({{"name", name}, {"a", outcome}});
      else loss.truncated = true;
    }
  }
  const json total_a = total_of(a), total_b = total_of(b);
  if (total_a.is_number()) {
    const std::uint64_t before = total_a.get<std::uint64_t>();
    const std::uint64_t after = total_b.is_number() ? total_b.get<std::uint64_t>() : 0;
    loss.fewer_total = after < before;
  }
  return loss;
}

json loss_check(const TestLoss& loss, bool allow_removed) {
  const json seen = loss.reasons();
  const bool fails = !seen.empty() && !allow_removed;
  return {{"verdict", fails ? "regressed" : "passed"},
          {"reasons", fails ? seen : json::array()},
          {"allowed", fails ? json::array() : seen},
          {"allow_removed", allow_removed},
          {"removed", {{"count", loss.removed}, {"cases", loss.removed_cases}, {"fewer_total", loss.fewer_total}}},
          {"newly_skipped", {{"count", loss.newly_skipped}, {"cases", loss.newly_skipped_cases}}},
          {"truncated", loss.truncated}};
}

json tests_view(const json& run) {
  json view = {{"id", run.is_object() ? run.value("id", json()) : json()}};
  const json tests = run.is_object() ? run.value("tests", json()) : json();
  if (!tests.is_object()) return view;
  json cases = json::array();
  const json listed = tests.value("cases", json::array());
  for (const json& test_case : listed.is_array() ? listed : json::array()) {
    if (!test_case.is_object()) continue;
    json kept = json::object();
    for (const char* key : {"class", "name", "outcome"}) {
      if (test_case.contains(key)) kept[key] = test_case[key];
    }
    cases.push_back(std::move(kept));
  }
  view["tests"] = {{"total", tests.value("total", json())}, {"cases_truncated", tests.value("cases_truncated", json())},
                   {"truncated", tests.value("truncated", json())}, {"cases", std::move(cases)}};
  return view;
}

json baseline_check(const std::string& baseline_id, const json* baseline, const json& record, bool allow_removed,
                    std::size_t max_listed) {
  if (baseline == nullptr || !baseline->is_object()) {
    return {{"run", baseline_id}, {"verdict", "unchecked"}, {"reasons", {"baseline_unreadable"}},
            {"allow_removed", allow_removed}};
  }
  json check = loss_check(lost_tests(*baseline, record, max_listed), allow_removed);
  check["run"] = baseline_id;
  return check;
}

}  // namespace capsule::daemon
