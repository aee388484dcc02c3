// Coverage summaries with pugixml (no DTD is loaded or expanded): JaCoCo's report-level counters and
// Cobertura's root attributes, read from bounded files found by the workspace glob.
#include "daemon/record/coverage.h"

#include <algorithm>
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
    throw CollectError(path, std::string("<") + node.name() + " " + attribute + "=\"" + quote_excerpt(text) +
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

std::string CoverageSummary::state() const {
  if (!reports.empty()) return "found";
  return reports_not_read > 0 ? "unreadable" : "none_found";
}

nlohmann::json CoverageSummary::to_json() const {
  nlohmann::json listed = nlohmann::json::array();
  for (const CoverageReport& report : reports) {
    nlohmann::json entry = report.counts.to_json();
    entry["path"] = report.path;
    entry["format"] = report.format;
    listed.push_back(std::move(entry));
  }
  return {{"state", state()},
          {"reports", std::move(listed)},
          {"total", total.to_json()},
          {"unreadable", unreadable},
          {"truncated", truncated}};
}

namespace {

// One report's bytes, parsed in place (pugixml changes `content`); `path` names it in errors.
CoverageReport parse_coverage_text(std::string& content, const std::string& path) {
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
    throw CollectError(path, "not a JaCoCo or Cobertura report (root element <" + quote_excerpt(name) + ">)");
  }
  return report;
}

}  // namespace

CoverageReport parse_coverage_file(const std::string& path, std::uint64_t max_bytes) {
  std::string content = read_bounded_file(path, max_bytes);
  return parse_coverage_text(content, path);
}

CoverageSummary collect_coverage(const std::string& root, const std::vector<std::string>& globs,
                                 const CoverageLimits& limits) {
  CoverageSummary summary;
  const auto note = [&](std::string text) {
    if (summary.unreadable.size() < limits.max_listed) summary.unreadable.push_back(std::move(text));
    else summary.truncated = true;
  };
  CollectLimits collect = collect_limits_of(limits);
  collect.max_file_bytes = limits.max_file_bytes;
  collect.max_total_bytes = limits.max_total_bytes;
  const auto use = [&](const std::string& rel, std::string& content) {
    CoverageReport report = parse_coverage_text(content, rel);
    summary.total += report.counts;
    summary.reports.push_back(std::move(report));
  };
  const CollectOutcome outcome = collect_files(root, globs, collect, note, use);
  summary.truncated = summary.truncated || outcome.truncated;
  summary.reports_not_read = outcome.files_not_read;
  return summary;
}

}  // namespace capsule::daemon
