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
  // Apparent size of one report; larger ones are not read. pugixml's DOM takes up to ~16 times the text
  // (a node per element), so one report costs at most ~256 MiB while parsed.
  std::uint64_t max_file_bytes = 16ull << 20;
  std::uint64_t max_total_bytes = 256ull << 20; // bytes read over all reports (parsed or not)
  std::uint64_t max_visited = 1000000;          // directory entries looked at while matching globs
  std::chrono::milliseconds time_budget{20000}; // for matching and parsing together
  std::chrono::steady_clock::time_point deadline = std::chrono::steady_clock::time_point::max();  // if earlier
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
  std::uint64_t reports_not_read = 0;   // matched files not read (limits) or not parsed as a report

  // "found": at least one report was read, so 0 of 0 lines is what the reports say; "unreadable": files
  // matched but none was read as a report; "none_found": no file matched (a directory the search could not
  // enter is no report), so there is no coverage to speak of, not 0 %.
  std::string state() const;

  // {"state", "reports": [{"path", "format", "lines", "branches"}], "total": {"lines", "branches"},
  //  "unreadable", "truncated"}
  nlohmann::json to_json() const;
};

// One report, recognised by its root element (<report>: JaCoCo, <coverage>: Cobertura). Throws CollectError for
// unreadable, oversized, malformed or unknown files and for counters that are not counts.
CoverageReport parse_coverage_file(const std::string& path, std::uint64_t max_bytes = CoverageLimits{}.max_file_bytes);

// The reports below `root` matching `globs`, read by collect_files (workspace_glob.h) within `limits`: every
// report opened counts against max_files and its bytes against max_total_bytes, parsed or not. Errors quote at
// most 64 bytes of what a report holds.
CoverageSummary collect_coverage(const std::string& root, const std::vector<std::string>& globs,
                                 const CoverageLimits& limits = {});

}  // namespace capsule::daemon
