// Test configuration a run changed in its workspace (pytest's conftest.py, pytest.ini and [pytest] sections,
// Maven's surefire/failsafe skips, excludes and failure-ignores): what lets a run pass by running fewer tests.
#pragma once

#include <chrono>
#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "daemon/record/workspace_diff.h"

namespace capsule::daemon {

// One change, as record.test_config_changes lists it: {path, kind, detail}. Kinds:
//  "pytest_conftest"  a conftest.py added, modified or deleted (detail: which);
//  "pytest_ini"       a pytest.ini or .pytest.ini added, modified or deleted;
//  "pytest_section"   tox.ini [pytest], setup.cfg [tool:pytest] or pyproject.toml [tool.pytest...] added,
//                     changed or removed (detail: the section and which);
//  "maven_tests"      a pom.xml setting of surefire/failsafe (skip, skipTests, skipITs, excludes, includes, test,
//                     testFailureIgnore, phase...) or a property (maven.test.skip, skipTests, ...) that differs
//                     (detail: "<where>: <before> -> <after>", "(none)" for absent);
//  "unreadable"       a file of one of those names changed but could not be read (detail: why).
struct TestConfigChange {
  std::string path, kind, detail;
  nlohmann::json to_json() const;
  bool operator==(const TestConfigChange&) const = default;
};

// What changed in the test configuration of file `path` (its name says what it is) from `before` to `after`
// (nullopt: the file is absent on that side). Files of other names, and pom.xml below a target/ directory (a
// build's copy), give nothing. Never throws; malformed XML is one "unreadable" change.
std::vector<TestConfigChange> compare_test_config(const std::string& path, const std::optional<std::string>& before,
                                                  const std::optional<std::string>& after);

struct TestConfigLimits {
  std::size_t max_files = 200;                 // candidate files compared
  std::uint64_t max_file_bytes = 1ull << 20;   // larger ones are "unreadable"
  std::uint64_t max_visited = 1000000;         // directory entries looked at while searching the upper layer
  std::size_t max_listed = 100;                // changes listed
  std::chrono::steady_clock::time_point deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
};

struct TestConfigScan {
  std::vector<TestConfigChange> changes;  // sorted by path
  bool truncated = false;                 // a limit left candidates unread or changes unlisted

  // record.test_config_changes: [{path, kind, detail}].
  nlohmann::json changes_json() const;
  // record.protect_violations under protect_test_config: [{path, reason}] for each change, and one with path ""
  // when the scan was cut (what it did not see cannot be allowed).
  nlohmann::json violations_json() const;
};

// The changes a run made: the candidate files are those of the names above that the cow upper layer holds
// (searched below `upper_dir`, hidden directories skipped as pytest does) or that `diff` lists (symlinks and
// deletions too), each compared with its `lower_dir` original. Files are read beneath their root without
// following symlinks, at most max_file_bytes each. Throws base::Error only when a root cannot be opened.
TestConfigScan scan_test_config(const std::string& upper_dir, const std::string& lower_dir, const WorkspaceDiff& diff,
                                const TestConfigLimits& limits = {});

}  // namespace capsule::daemon
