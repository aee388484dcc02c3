// What a finished run's object says about its verdict and its test cases, read the one way that runs diff and
// the flakiness report share: passed or not, and each case's outcome under its "Class.method" name.
#pragma once

#include <map>
#include <nlohmann/json.hpp>
#include <string>

namespace capsule::daemon {

// A run object (as GET /v1/runs/{id} returns it) passed: its state is "succeeded", its exit code 0, its
// tests (when collected) have no failed or errored case, its baseline check (record.baseline, test_loss.h), if
// any, passed, and it has no protect_violations (test_config.h).
bool run_passed(const nlohmann::json& run);

// A case of tests.cases named as the record keeps it: "<class>.<name>", or only "<name>" without a class.
std::string case_name(const nlohmann::json& test_case);

// Each case of run.tests.cases by case_name with its outcome (passed, failed, error, skipped). A name listed
// more than once (one class in two reports) keeps its worst outcome: error, then failed, passed, skipped.
// Empty when the run has no cases; entries that are not objects are skipped.
std::map<std::string, std::string> case_outcomes(const nlohmann::json& run);

// "failed" and "error" both count as a failure.
bool is_failure(const std::string& outcome);

// The value at run[section][key], or null where a level is missing or not an object.
nlohmann::json field_of(const nlohmann::json& run, const char* section, const char* key);

}  // namespace capsule::daemon
