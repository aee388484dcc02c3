// Test counts from JUnit XML reports (Maven Surefire, pytest --junitxml and friends), and the small glob
// matcher (*, ?, [..] per path segment, ** for any depth) that finds the reports inside a workspace.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <stdexcept>
#include <string>
#include <vector>

namespace capsule::daemon {

// A report (or directory) that could not be read or is not JUnit XML: what() is "<path>: <reason>".
class JunitError : public std::runtime_error {
 public:
  JunitError(std::string path, std::string reason)
      : std::runtime_error(path + ": " + reason), path_(std::move(path)), reason_(std::move(reason)) {}
  const std::string& path() const { return path_; }
  const std::string& reason() const { return reason_; }

 private:
  std::string path_;
  std::string reason_;
};

struct TestCounts {
  std::uint64_t total = 0, failed = 0, errors = 0, skipped = 0;
  std::vector<std::string> files;       // reports counted (relative to the root for collect_junit)
  std::vector<std::string> unreadable;  // "<relative path>: <reason>" for matched files that could not be counted

  // {"total","failed","errors","skipped","files","unreadable"}
  nlohmann::json to_json() const;
  TestCounts& operator+=(const TestCounts& other);
};

// Counts one report. A <testsuite> with a `tests` attribute is taken at its word (tests, failures, errors,
// skipped; nested suites are then not counted again); one without is counted from its <testcase> children
// (a <failure>, <error> or <skipped> child each count once) and nested <testsuite>s. A <testsuites> root
// sums its suites and ignores its own totals. Throws JunitError for unreadable, malformed, oversized
// (> 64 MiB) or non-JUnit files. pugixml expands no DTD entities, so hostile XML cannot blow up.
TestCounts parse_junit_file(const std::string& path);

// Regular files below `root` (symlinks are never followed) matching any of the relative globs, as sorted,
// de-duplicated "/"-separated relative paths. `**` matches zero or more directories; wildcards do not match
// a leading '.' (so `**` skips hidden directories). Throws JunitError for an absolute glob or one with "..".
std::vector<std::string> glob_files(const std::string& root, const std::vector<std::string>& globs);

// Sum of parse_junit_file over glob_files(root, globs); malformed reports go to `unreadable`.
TestCounts collect_junit(const std::string& root, const std::vector<std::string>& globs);

}  // namespace capsule::daemon
