// Coverage summaries with pugixml (no DTD is loaded or expanded): JaCoCo's report-level counters and
// Cobertura's root attributes, read from bounded files found by the workspace glob.
#include "daemon/record/coverage.h"

#include <sys/stat.h>

#include <charconv>
#include <pugixml.hpp>

#include "daemon/record/workspace_glob.h"

namespace capsule::daemon {
namespace {

std::uint64_t count_of(const pugi::xml_node& node, const char* attribute, const std::string& path) {
  const std::string_view text = node.attribute(attribute).value();
  std::uint64_t value = 0;
  const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (text.empty() || ec != std::errc() || end != text.data() + text.size()) {
    throw CollectError(path, std::string("<") + node.name() + " " + attribute + "=\"" + std::string(text) +
                                 "\"> is not a count");
  }
  return value;
}

// JaCoCo: <report> holds one <counter type missed covered> per kind for the whole report, after its packages.
CoverageCounts jacoco_counts(const pugi::xml_node& report, const std::string& path) {
  CoverageCounts counts;
  for (const pugi::xml_node& counter : report.children("counter")) {
    const std::string_view type = counter.attribute("type").value();
    if (type != "LINE" && type != "BRANCH") continue;
    const std::uint64_t covered = count_of(counter, "covered", path);
    const std::uint64_t total = covered + count_of(counter, "missed", path);
    if (type == "LINE") {
      counts.lines_covered = covered;
      counts.lines_total = total;
    } else {
      counts.branches_covered = covered;
      counts.branches_total = total;
    }
  }
  return counts;
}

// Cobertura: <coverage lines-valid lines-covered branches-valid branches-covered ...>.
CoverageCounts cobertura_counts(const pugi::xml_node& coverage, const std::string& path) {
  CoverageCounts counts;
  counts.lines_covered = count_of(coverage, "lines-covered", path);
  counts.lines_total = count_of(coverage, "lines-valid", path);
  if (coverage.attribute("branches-valid")) {
    counts.branches_covered = count_of(coverage, "branches-covered", path);
    counts.branches_total = count_of(coverage, "branches-valid", path);
  }
  return counts;
}

}  // namespace

CoverageCounts& CoverageCounts::operator+=(const CoverageCounts& other) {
  lines_covered += other.lines_covered;
  lines_total += other.lines_total;
  branches_covered += other.branches_covered;
  branches_total += other.branches_total;
  return *this;
}

nlohmann::json CoverageCounts::to_json() const {
  return {{"lines", {{"covered", lines_covered}, {"total", lines_total}}},
          {"branches", {{"covered", branches_covered}, {"total", branches_total}}}};
}

nlohmann::json CoverageSummary::to_json() const {
  nlohmann::json listed = nlohmann::json::array();
  for (const CoverageReport& report : reports) {
    nlohmann::json entry = report.counts.to_json();
    entry["path"] = report.path;
    entry["format"] = report.format;
    listed.push_back(std::move(entry));
  }
  return {{"reports", std::move(listed)},
          {"total", total.to_json()},
          {"unreadable", unreadable},
          {"truncated", truncated}};
}

CoverageReport parse_coverage_file(const std::string& path, std::uint64_t max_bytes) {
  std::string content = read_bounded_file(path, max_bytes);  // outlives doc, which parses it in place
  pugi::xml_document doc;
  const pugi::xml_parse_result parsed = doc.load_buffer_inplace(content.data(), content.size());
  if (!parsed) {
    throw CollectError(path, std::string("malformed XML: ") + parsed.description() + " at offset " +
                                 std::to_string(parsed.offset));
  }
  const pugi::xml_node root = doc.document_element();
  const std::string_view name = root.name();
  CoverageReport report;
  report.path = path;
  if (name == "report") {
    report.format = "jacoco";
    report.counts = jacoco_counts(root, path);
  } else if (name == "coverage") {
    report.format = "cobertura";
    report.counts = cobertura_counts(root, path);
  } else {
    throw CollectError(path, "not a JaCoCo or Cobertura report (root element <" + std::string(name) + ">)");
  }
  return report;
}

CoverageSummary collect_coverage(const std::string& root, const std::vector<std::string>& globs,
                                 const CoverageLimits& limits) {
  SearchBudget budget;
  budget.deadline = std::chrono::steady_clock::now() + limits.time_budget;
  budget.visits_left = limits.max_visited;
  CoverageSummary summary;
  const auto note = [&](std::string text) {
    if (summary.unreadable.size() < limits.max_listed) summary.unreadable.push_back(std::move(text));
    else summary.truncated = true;
  };
  const std::vector<std::string> found = glob_within(root, globs, budget);
  for (auto& problem : budget.problems) note(std::move(problem));
  if (budget.exhausted) summary.truncated = true;

  std::uint64_t bytes = 0;
  for (const std::string& rel : found) {
    const std::string path = root + "/" + rel;
    struct stat st {};
    const std::uint64_t size = ::lstat(path.c_str(), &st) == 0 ? static_cast<std::uint64_t>(st.st_size) : 0;
    if (summary.reports.size() >= limits.max_files || std::chrono::steady_clock::now() > budget.deadline ||
        (size <= limits.max_file_bytes && bytes + size > limits.max_total_bytes)) {
      summary.truncated = true;
      note(rel + ": not read: more than " + std::to_string(limits.max_files) + " reports, " +
           std::to_string(limits.max_total_bytes >> 20) + " MiB in all, or out of time");
      continue;
    }
    try {
      CoverageReport report = parse_coverage_file(path, limits.max_file_bytes);
      bytes += size;
      report.path = rel;
      summary.total += report.counts;
      summary.reports.push_back(std::move(report));
    } catch (const CollectError& e) {
      note(rel + ": " + e.cause().detail);
    }
  }
  return summary;
}

}  // namespace capsule::daemon
