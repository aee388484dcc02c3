// Test counts and cases from JUnit XML reports (Maven Surefire, pytest --junitxml and friends), found in a
// workspace with the collectors' glob (workspace_glob.h).
#pragma once

#include <chrono>
#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "daemon/record/workspace_glob.h"

namespace capsule::daemon {

// A report, glob or report root that could not be read or is not JUnit XML.
using JunitError = CollectError;

// One <testcase>: "class" (classname), "name", "outcome" (passed, failed, error, skipped), "time" (seconds,
// null when absent or not a number) and, for the failed, errored or skipped, "message" (bounded).
struct TestCase {
  std::string class_name;
  std::string name;
  std::string outcome;
  std::optional<double> time;
  std::string message;

  nlohmann::json to_json() const;
};

struct TestCounts {
  std::uint64_t total = 0, failed = 0, errors = 0, skipped = 0;
  std::vector<TestCase> cases;          // every <testcase> of the reports read, in order, up to a limit
  bool cases_truncated = false;         // more cases than listed
  std::vector<std::string> files;       // reports counted (relative to the root for collect_junit)
  // "<relative path>: <reason>" for matched files that could not be counted or were not read (limits), and
  // for directories the search could not enter; at most JunitLimits::max_listed.
  std::vector<std::string> unreadable;
  bool truncated = false;       // a limit stopped the collection: some matching reports were not counted
  std::uint64_t not_read = 0;   // matched reports (or problems) beyond what `unreadable` lists or counts
  std::uint64_t reports_not_read = 0;  // matched reports that could not be read or parsed, or a limit left unread

  // {"total","failed","errors","skipped","cases","cases_truncated","files","unreadable"}, plus "truncated": true
  // and "not_read" when a limit was hit.
  nlohmann::json to_json() const;
  TestCounts& operator+=(const TestCounts& other);
};

// What a sandbox's reports may cost the daemon: they are collected after the run, from untrusted files.
struct JunitLimits {
  std::size_t max_files = 1000;                 // reports parsed
  std::uint64_t max_file_bytes = 16ull << 20;   // apparent size (st_size) of one report; larger ones are not read
  std::uint64_t max_total_bytes = 128ull << 20; // bytes parsed over all reports
  std::uint64_t max_visited = 1000000;          // directory entries looked at while matching globs
  std::chrono::milliseconds time_budget{20000}; // for matching and parsing together
  std::chrono::steady_clock::time_point deadline = std::chrono::steady_clock::time_point::max();  // if earlier
  std::size_t max_listed = 100;                 // entries in TestCounts::unreadable
  std::size_t max_cases = 10000;                // entries in TestCounts::cases
  std::size_t max_message_bytes = 1024;         // of each case's message, class and name
};

// Counts one report. A <testsuite> with a `tests` attribute is taken at its word (tests, failures, errors,
// skipped; nested suites are then not counted again); one without is counted from its <testcase> children
// (a <failure>, <error> or <skipped> child each count once) and nested <testsuite>s. A <testsuites> root
// sums its suites and ignores its own totals. Throws JunitError for unreadable, malformed, oversized
// (> max_bytes) or non-JUnit files. pugixml expands no DTD entities, so hostile XML cannot blow up.
// Only a regular file is opened (read_bounded_file), and only up to `max_bytes`. Reports nested more than 64
// levels deep are refused ("nested too deep"). Every <testcase> in the
// document (at any depth) is listed in `cases`, the first `max_cases` of them.
TestCounts parse_junit_file(const std::string& path, std::uint64_t max_bytes = 64ull << 20,
                            std::size_t max_cases = JunitLimits{}.max_cases,
                            std::size_t max_message_bytes = JunitLimits{}.max_message_bytes);

// Sum of the reports below `root` matching `globs`, read by collect_files (workspace_glob.h) within `limits`
// (every report opened counts against max_files and its bytes against max_total_bytes, parsed or not);
// malformed reports, reports not read because of a limit and directories that could not be searched go to
// `unreadable`. Errors quote at most 64 bytes of what a report holds.
TestCounts collect_junit(const std::string& root, const std::vector<std::string>& globs,
                         const JunitLimits& limits = {});

}  // namespace capsule::daemon
