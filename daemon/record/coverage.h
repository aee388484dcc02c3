// collect.coverage: line and branch coverage summaries from JaCoCo XML (report-level LINE/BRANCH counters)
// and Cobertura XML (coverage.py's `coverage xml`: lines-/branches-valid/covered), per report and summed.
#pragma once

#include <chrono>
#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

namespace capsule::daemon {

struct CoverageLimits {
  std::size_t max_files = 100;                  // reports parsed
  std::uint64_t max_file_bytes = 64ull << 20;   // apparent size of one report; larger ones are not read
  std::uint64_t max_total_bytes = 256ull << 20; // bytes parsed over all reports
  std::uint64_t max_visited = 1000000;          // directory entries looked at while matching globs
  std::chrono::milliseconds time_budget{20000}; // for matching and parsing together
  std::size_t max_listed = 100;                 // entries in unreadable
};

struct CoverageCounts {
  std::uint64_t lines_covered = 0, lines_total = 0, branches_covered = 0, branches_total = 0;
  CoverageCounts& operator+=(const CoverageCounts& other);
  // {"lines": {"covered", "total"}, "branches": {"covered", "total"}}
  nlohmann::json to_json() const;
};

struct CoverageReport {
  std::string path;
  std::string format;  // "jacoco" or "cobertura"
  CoverageCounts counts;
};

struct CoverageSummary {
  std::vector<CoverageReport> reports;
  CoverageCounts total;                 // summed over reports
  std::vector<std::string> unreadable;  // "<rel>: <reason>"
  bool truncated = false;               // a limit left reports unread or problems unlisted

  // {"reports": [{"path", "format", "lines", "branches"}], "total": {"lines", "branches"}, "unreadable",
  //  "truncated"}
  nlohmann::json to_json() const;
};

// One report, recognised by its root element (<report>: JaCoCo, <coverage>: Cobertura). Throws CollectError for
// unreadable, oversized, malformed or unknown files and for counters that are not counts.
CoverageReport parse_coverage_file(const std::string& path, std::uint64_t max_bytes = CoverageLimits{}.max_file_bytes);

// parse_coverage_file over the files below `root` matching `globs` (workspace_glob.h), within `limits`.
CoverageSummary collect_coverage(const std::string& root, const std::vector<std::string>& globs,
                                 const CoverageLimits& limits = {});

}  // namespace capsule::daemon
