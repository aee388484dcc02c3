// The verdict and case outcomes of a run object, read defensively: records of any age, with or without
// tests, and whatever shape a hostile report gave the case names.
#include "daemon/record/run_verdict.h"

namespace capsule::daemon {
namespace {

using nlohmann::json;

int severity(const std::string& outcome) {
  if (outcome == "error") return 3;
  if (outcome == "failed") return 2;
  if (outcome == "passed") return 1;
  return 0;  // skipped, or anything unknown
}

std::string string_of(const json& object, const char* key) {
  const auto it = object.find(key);
  return it != object.end() && it->is_string() ? it->get<std::string>() : std::string();
}

std::uint64_t count_of(const json& tests, const char* key) {
  const auto it = tests.find(key);
  return it != tests.end() && it->is_number_unsigned() ? it->get<std::uint64_t>() : 0;
}

}  // namespace

json field_of(const json& run, const char* section, const char* key) {
  if (!run.is_object()) return nullptr;
  const auto part = run.find(section);
  if (part == run.end() || !part->is_object()) return nullptr;
  const auto value = part->find(key);
  return value == part->end() ? json() : *value;
}

bool run_passed(const json& run) {
  if (!run.is_object() || string_of(run, "state") != "succeeded") return false;
  const json exit_code = field_of(run, "result", "exit_code");
  if (!exit_code.is_number_integer() || exit_code.get<std::int64_t>() != 0) return false;
  const auto baseline = run.find("baseline");
  if (baseline != run.end() && !baseline->is_null() && field_of(run, "baseline", "verdict") != "passed") return false;
  const auto violations = run.find("protect_violations");
  if (violations != run.end() && (!violations->is_array() || !violations->empty())) return false;
  const auto tests = run.find("tests");
  if (tests == run.end() || !tests->is_object()) return true;
  return count_of(*tests, "failed") == 0 && count_of(*tests, "errors") == 0;
}

std::string case_name(const json& test_case) {
  const std::string class_name = string_of(test_case, "class");
  const std::string name = string_of(test_case, "name");
  return class_name.empty() ? name : class_name + "." + name;
}

std::map<std::string, std::string> case_outcomes(const json& run) {
  std::map<std::string, std::string> outcomes;
  const json cases = field_of(run, "tests", "cases");
  if (!cases.is_array()) return outcomes;
  for (const json& test_case : cases) {
    if (!test_case.is_object()) continue;
    const std::string outcome = string_of(test_case, "outcome");
    auto [it, inserted] = outcomes.emplace(case_name(test_case), outcome);
    if (!inserted && severity(outcome) > severity(it->second)) it->second = outcome;
  }
  return outcomes;
}

bool is_failure(const std::string& outcome) { return outcome == "failed" || outcome == "error"; }

}  // namespace capsule::daemon
