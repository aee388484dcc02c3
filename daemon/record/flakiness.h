// The flakiness report over repeated runs (GET /v1/runs/flakiness, `capsule replay --repeat`): how often the
// verdict and each test case flip between passing and failing, runs added one at a time so few are held at once.
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <nlohmann/json.hpp>
#include <string>

namespace capsule::daemon {

// min(passed, failed) / (passed + failed): the fraction of the runs (skips left out) whose outcome differs from
// the majority's; 0 when it always passed or always failed (or never ran), at most 0.5.
double flip_rate(std::uint64_t passed, std::uint64_t failed);

class FlakinessTally {
 public:
  // Tracks at most `max_cases` case names; the report says "cases_truncated": true when more were seen.
  explicit FlakinessTally(std::size_t max_cases = 20000) : max_cases_(max_cases) {}

  // Counts one finished run object (as GET /v1/runs/{id} returns it): its verdict (run_verdict.h) and each
  // case's outcome (failed and error count as failed).
  void add(const nlohmann::json& run);

  // {"runs": N, "verdict": {"passed", "failed", "flip_rate"}, "cases": [{"name", "passed", "failed", "skipped",
  //  "flip_rate"}] (sorted by name), "flaky": [names with flip_rate > 0]}, plus "cases_truncated": true when
  // case names past max_cases were left out.
  nlohmann::json to_json() const;

 private:
  struct Counts {
    std::uint64_t passed = 0, failed = 0, skipped = 0;
  };
  std::size_t max_cases_;
  std::uint64_t runs_ = 0;
  Counts verdict_;
  std::map<std::string, Counts> cases_;
  bool cases_truncated_ = false;
};

}  // namespace capsule::daemon
