// The test cases a run lost against an earlier one (removed, or skipped where they used to run): what
// `runs diff` and a run's `baseline` check fail on, so a run cannot pass by running fewer tests.
#pragma once

#include <cstddef>
#include <nlohmann/json.hpp>
#include <string>

namespace capsule::daemon {

struct TestLoss {
  std::size_t removed = 0;        // cases of a (any outcome) that b does not have
  std::size_t newly_skipped = 0;  // cases that passed, failed or errored in a and are skipped in b
  bool fewer_total = false;       // b's tests.total is below a's (caught even when a case list was cut)
  nlohmann::json removed_cases = nlohmann::json::array();  // [{name, outcome (in a)}], at most max_listed
  nlohmann::json newly_skipped_cases = nlohmann::json::array();  // [{name, a (its outcome there)}], likewise
  bool truncated = false;         // a list hit max_listed, or a record's case list was cut

  // The reasons a check fails for: "tests_removed" (removed > 0 or fewer_total), "tests_newly_skipped".
  nlohmann::json reasons() const;
  bool any() const { return removed > 0 || fewer_total || newly_skipped > 0; }
};

// Compares the tests.cases (by case_name, run_verdict.h) and tests.total of run objects a and b.
TestLoss lost_tests(const nlohmann::json& a, const nlohmann::json& b, std::size_t max_listed);

// What a check against `a` says of `b` (a run's record.baseline, runs diff's "check"):
// {"verdict": "passed" | "regressed", "reasons": [...] (failing), "allowed": [...] (seen, but opted out by
//  allow_removed), "allow_removed", "removed": {"count", "cases", "fewer_total"}, "newly_skipped": {"count",
//  "cases"}, "truncated"}. With allow_removed the losses are listed and never fail the check.
nlohmann::json loss_check(const TestLoss& loss, bool allow_removed);

// Of a run object, only what lost_tests reads: {"id", "tests": {"total", "cases_truncated", "truncated",
// "cases": [{class, name, outcome}]}} (what a submission holds of its baseline until the run ends).
nlohmann::json tests_view(const nlohmann::json& run);

// record.baseline of a run whose record so far is `record` ("tests" as build_record made them), against the
// baseline run object `baseline` (null when it could not be read: verdict "unchecked", which fails too):
// loss_check's fields, case lists at most max_listed, with "run" (the baseline's id).
nlohmann::json baseline_check(const std::string& baseline_id, const nlohmann::json* baseline,
                              const nlohmann::json& record, bool allow_removed, std::size_t max_listed = 100);

}  // namespace capsule::daemon
