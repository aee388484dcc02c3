// Test configuration changes: candidate files by name (from the upper layer and the diff), each side read
// bounded and beneath its root, then compared by what configures tests in it (ini/TOML sections, pom settings).
#include "daemon/record/test_config.h"

#include <algorithm>
#include <map>
#include <pugixml.hpp>
#include <set>
#include <string_view>

#include "daemon/record/workspace_glob.h"

namespace capsule::daemon {
namespace {

using nlohmann::json;

constexpr std::size_t kMaxChangesPerFile = 20;
constexpr std::size_t kMaxDetailBytes = 512;
constexpr std::size_t kMaxValueBytes = 120;
constexpr std::size_t kMaxPomDepth = 32;  // a pom's settings sit a few levels down; deeper nesting is not walked

const std::vector<std::string> kCandidateGlobs = {"**/conftest.py", "**/pytest.ini", "**/.pytest.ini", "**/tox.ini",
                                                  "**/setup.cfg",   "**/pyproject.toml", "**/pom.xml"};

// Surefire/failsafe configuration elements that choose, skip or forgive tests.
const std::set<std::string, std::less<>> kPluginSettings = {
    "skip",          "skipTests",         "skipITs",         "skipExec",       "skipUTs",
    "excludes",      "exclude",           "excludesFile",    "includes",       "include",
    "includesFile",  "test",              "testFailureIgnore", "failIfNoTests", "failIfNoSpecifiedTests",
    "groups",        "excludedGroups",    "excludeJUnit5Engines", "phase",     "skipAfterFailureCount",
    "testSourceDirectory", "testClassesDirectory", "dependenciesToScan"};
// <properties> that the same plugins read.
const std::set<std::string, std::less<>> kTestProperties = {
    "maven.test.skip", "maven.test.skip.exec", "skipTests", "skipITs", "maven.test.failure.ignore", "test", "it.test"};

std::string_view file_name(std::string_view path) {
  const std::size_t slash = path.rfind('/');
  return slash == std::string_view::npos ? path : path.substr(slash + 1);
}

bool is_candidate(std::string_view path) {
  const std::string_view name = file_name(path);
  return name == "conftest.py" || name == "pytest.ini" || name == ".pytest.ini" || name == "tox.ini" ||
         name == "setup.cfg" || name == "pyproject.toml" || name == "pom.xml";
}

std::string trimmed(std::string_view text) {
  const auto blank = [](char c) { return c == ' ' || c == '\t' || c == '\r' || c == '\n'; };
  while (!text.empty() && blank(text.front())) text.remove_prefix(1);
  while (!text.empty() && blank(text.back())) text.remove_suffix(1);
  return std::string(text);
}

std::string presence_change(bool before, bool after) {
  if (!before) return "added";
  return after ? "modified" : "deleted";
}

std::string bounded_detail(std::string detail) {
  if (detail.size() > kMaxDetailBytes) {
    cut_utf8(detail, kMaxDetailBytes);
    detail += "...";
  }
  return detail;
}

// --- pytest's ini and TOML sections

// Whether a section header (trimmed, with its brackets) of the file named `name` configures pytest.
bool pytest_header(std::string_view name, std::string_view header) {
  if (name == "tox.ini") return header == "[pytest]";
  if (name == "setup.cfg") return header == "[tool:pytest]";
  return header == "[tool.pytest]" || header.starts_with("[tool.pytest.");  // pyproject.toml
}

// header -> its lines (trimmed; blank lines and comments left out) for every pytest section of the file; in a
// pyproject.toml also dotted keys outside them ("tool.pytest.ini_options.addopts = ..." at the top, "pytest..."
// under [tool]).
std::map<std::string, std::vector<std::string>> pytest_sections(std::string_view name, std::string_view text) {
  std::map<std::string, std::vector<std::string>> sections;
  std::string header = "(top level)";
  bool inside = false;
  for (std::size_t start = 0; start < text.size();) {
    const std::size_t end = std::min(text.find('\n', start), text.size());
    const std::string line = trimmed(text.substr(start, end - start));
    start = end + 1;
    if (line.empty() || line[0] == '#' || line[0] == ';') continue;
    if (line[0] == '[') {
      header = line;
      inside = pytest_header(name, header);
      if (inside) sections[header];
      continue;
    }
    const bool dotted = name == "pyproject.toml" && ((header == "(top level)" && line.starts_with("tool.pytest")) ||
                                                     (header == "[tool]" && line.starts_with("pytest")));
    if (inside || dotted) sections[header].push_back(line);
  }
  return sections;
}

void compare_sections(const std::string& path, std::string_view name, const std::optional<std::string>& before,
                      const std::optional<std::string>& after, std::vector<TestConfigChange>& out) {
  const auto in_before = before ? pytest_sections(name, *before) : decltype(pytest_sections(name, "")){};
  const auto in_after = after ? pytest_sections(name, *after) : decltype(pytest_sections(name, "")){};
  std::set<std::string> headers;
  for (const auto& entry : in_before) headers.insert(entry.first);
  for (const auto& entry : in_after) headers.insert(entry.first);
  for (const std::string& header : headers) {
    const auto was = in_before.find(header), now = in_after.find(header);
    const bool had = was != in_before.end(), has = now != in_after.end();
    if (had && has && was->second == now->second) continue;
    const std::string change = !had ? "added" : has ? "changed" : "removed";
    out.push_back({path, "pytest_section", bounded_detail(quote_excerpt(header, 128) + " " + change)});
  }
}

// --- Maven

// "<where>" -> the values set there (several for excludes/exclude), for every test setting of a pom.
using MavenSettings = std::map<std::string, std::vector<std::string>>;

bool test_plugin(std::string_view artifact) {
  return artifact.find("surefire") != std::string_view::npos || artifact.find("failsafe") != std::string_view::npos;
}

bool has_elements(const pugi::xml_node& node) {
  for (const pugi::xml_node& child : node.children()) {
    if (child.type() == pugi::node_element) return true;
  }
  return false;
}

void walk_pom(const pugi::xml_node& node, const std::string& where, bool in_test_plugin, std::size_t depth,
              MavenSettings& out) {
  if (depth > kMaxPomDepth) return;
  const bool in_properties = std::string_view(node.name()) == "properties";
  for (const pugi::xml_node& child : node.children()) {
    if (child.type() != pugi::node_element) continue;
    const std::string name = child.name();
    std::string label = name;
    bool test_plugin_here = in_test_plugin;
    if (name == "plugin") {
      const std::string artifact = trimmed(child.child_value("artifactId"));
      label += "[";
      label += quote_excerpt(artifact, 64);
      label += "]";
      test_plugin_here = test_plugin(artifact);
    }
    const std::string here = where.empty() ? label : where + "/" + label;
    const bool property = in_properties && (kTestProperties.count(name) != 0 || name.starts_with("surefire.") ||
                                            name.starts_with("failsafe."));
    const bool setting = in_test_plugin && kPluginSettings.count(name) != 0;
    if ((property || setting) && !has_elements(child)) {
      std::string value = trimmed(child.text().get());
      out[quote_excerpt(here, 256)].push_back(quote_excerpt(value, kMaxValueBytes));
      continue;
    }
    walk_pom(child, here, test_plugin_here, depth + 1, out);
  }
}

MavenSettings maven_test_settings(const std::string& text, const std::string& path) {
  pugi::xml_document doc;
  const pugi::xml_parse_result parsed = doc.load_buffer(text.data(), text.size());
  if (!parsed) {
    throw CollectError(path, std::string("malformed XML: ") + parsed.description() + " at offset " +
                                 std::to_string(parsed.offset));
  }
  MavenSettings settings;
  walk_pom(doc.document_element(), "", false, 0, settings);
  for (auto& entry : settings) std::sort(entry.second.begin(), entry.second.end());
  return settings;
}

std::string values_text(const MavenSettings& settings, const std::string& where) {
  const auto it = settings.find(where);
  if (it == settings.end()) return "(none)";
  std::string out;
  for (const std::string& value : it->second) {
    if (!out.empty()) out += ", ";
    out += value;
  }
  return out.empty() ? "(empty)" : out;
}

void compare_poms(const std::string& path, const std::optional<std::string>& before,
                  const std::optional<std::string>& after, std::vector<TestConfigChange>& out) {
  MavenSettings in_before, in_after;
  try {
    if (before) in_before = maven_test_settings(*before, path);
    if (after) in_after = maven_test_settings(*after, path);
  } catch (const CollectError& e) {
    out.push_back({path, "unreadable", bounded_detail(presence_change(before.has_value(), after.has_value()) + ": " +
                                                      e.cause().detail)});
    return;
  }
  std::set<std::string> places;
  for (const auto& entry : in_before) places.insert(entry.first);
  for (const auto& entry : in_after) places.insert(entry.first);
  for (const std::string& where : places) {
    const auto was = in_before.find(where), now = in_after.find(where);
    if (was != in_before.end() && now != in_after.end() && was->second == now->second) continue;
    std::string detail = where + ": ";
    detail += values_text(in_before, where);
    detail += " -> ";
    detail += values_text(in_after, where);
    out.push_back({path, "maven_tests", bounded_detail(std::move(detail))});
  }
}

bool below_target(std::string_view path) {
  return path.starts_with("target/") || path.find("/target/") != std::string_view::npos;
}

// One side of a candidate: its bytes, nullopt when absent, or the reason it could not be read.
struct Side {
  std::optional<std::string> content;
  std::string problem;
};

Side read_side(int root_fd, const std::string& rel, std::uint64_t max_bytes) {
  Side side;
  try {
    side.content = read_beneath(root_fd, rel, max_bytes);
  } catch (const CollectError& e) {
    if (!e.cause().detail.starts_with("open: No such file")) side.problem = e.cause().detail;
  }
  return side;
}

}  // namespace

json TestConfigChange::to_json() const { return {{"path", path}, {"kind", kind}, {"detail", detail}}; }

json TestConfigScan::changes_json() const {
  json out = json::array();
  for (const TestConfigChange& change : changes) out.push_back(change.to_json());
  return out;
}

json TestConfigScan::violations_json() const {
  json out = json::array();
  for (const TestConfigChange& change : changes) {
    std::string reason = "protect_test_config: ";
    reason += change.kind;
    reason += ": ";
    reason += change.detail;
    out.push_back({{"path", change.path}, {"reason", std::move(reason)}});
  }
  if (truncated) {
    out.push_back({{"path", ""}, {"reason", "protect_test_config: the test configuration could not be checked in "
                                            "full (a limit of the scan was reached)"}});
  }
  return out;
}

std::vector<TestConfigChange> compare_test_config(const std::string& path, const std::optional<std::string>& before,
                                                  const std::optional<std::string>& after) {
  std::vector<TestConfigChange> out;
  if (before == after) return out;
  const std::string_view name = file_name(path);
  if (name == "conftest.py") {
    out.push_back({path, "pytest_conftest", presence_change(before.has_value(), after.has_value())});
  } else if (name == "pytest.ini" || name == ".pytest.ini") {
    out.push_back({path, "pytest_ini", presence_change(before.has_value(), after.has_value())});
  } else if (name == "tox.ini" || name == "setup.cfg" || name == "pyproject.toml") {
    compare_sections(path, name, before, after, out);
  } else if (name == "pom.xml" && !below_target(path)) {
    compare_poms(path, before, after, out);
  }
  if (out.size() > kMaxChangesPerFile) {
    out.resize(kMaxChangesPerFile);
    out.back() = {path, out.back().kind, "... more changes in this file, not listed"};
  }
  return out;
}

TestConfigScan scan_test_config(const std::string& upper_dir, const std::string& lower_dir, const WorkspaceDiff& diff,
                                const TestConfigLimits& limits) {
  const base::UniqueFd upper_fd = open_diff_root(upper_dir);
  const base::UniqueFd lower_fd = open_diff_root(lower_dir);
  // path -> "added", "modified", "deleted" as the diff lists it, or "" (found in the upper layer only).
  std::map<std::string, std::string> candidates;
  for (const auto& [list, change] : {std::pair{&diff.added, "added"}, std::pair{&diff.modified, "modified"},
                                     std::pair{&diff.deleted, "deleted"}}) {
    for (const DiffEntry& entry : *list) {
      if (is_candidate(entry.path)) candidates[entry.path] = change;
    }
  }
  SearchBudget budget;
  budget.deadline = limits.deadline;
  budget.visits_left = limits.max_visited;
  budget.max_found = limits.max_files;
  for (const std::string& rel : glob_within(upper_dir, kCandidateGlobs, budget)) candidates.emplace(rel, "");
  TestConfigScan scan;
  scan.truncated = budget.exhausted;
  std::size_t compared = 0;
  for (const auto& [rel, change] : candidates) {
    if (compared == limits.max_files || std::chrono::steady_clock::now() > limits.deadline) {
      scan.truncated = true;
      break;
    }
    ++compared;
    const Side before = change == "added" ? Side{} : read_side(lower_fd.get(), rel, limits.max_file_bytes);
    const Side after = change == "deleted" ? Side{} : read_side(upper_fd.get(), rel, limits.max_file_bytes);
    std::vector<TestConfigChange> found;
    if (!before.problem.empty() || !after.problem.empty()) {
      const std::string what = change.empty() ? "changed" : change;
      const std::string problem = before.problem.empty() ? after.problem : before.problem;
      if (!(rel.ends_with("pom.xml") && below_target(rel))) {
        found.push_back({rel, "unreadable", bounded_detail(what + "; not read: " + problem)});
      }
    } else {
      found = compare_test_config(rel, before.content, after.content);
    }
    for (TestConfigChange& entry : found) {
      if (scan.changes.size() < limits.max_listed) scan.changes.push_back(std::move(entry));
      else scan.truncated = true;
    }
  }
  return scan;
}

}  // namespace capsule::daemon
