// JUnit XML counting and case listing with pugixml over reports found by the workspace glob; every limit of
// JunitLimits is applied here.
#include "daemon/record/junit.h"

#include <algorithm>
#include <charconv>
#include <pugixml.hpp>

namespace capsule::daemon {
namespace {

std::uint64_t count_attribute(const pugi::xml_node& suite, const char* name, const std::string& path) {
  const pugi::xml_attribute attribute = suite.attribute(name);
  if (!attribute) return 0;
  const std::string_view text = attribute.value();
  std::uint64_t value = 0;
  const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (ec != std::errc() || end != text.data() + text.size()) {
    throw JunitError(path, std::string("<testsuite ") + name + "=\"" + quote_excerpt(text) + "\"> is not a count");
  }
  return value;
}

void count_children(const pugi::xml_node& node, TestCounts& counts, const std::string& path);

void count_suite(const pugi::xml_node& suite, TestCounts& counts, const std::string& path) {
  if (!suite.attribute("tests")) {
    count_children(suite, counts, path);
    return;
  }
  counts.total += count_attribute(suite, "tests", path);
  counts.failed += count_attribute(suite, "failures", path);
  counts.errors += count_attribute(suite, "errors", path);
  counts.skipped += count_attribute(suite, "skipped", path);
}

void count_case(const pugi::xml_node& test, TestCounts& counts) {
  ++counts.total;
  const bool failed = test.child("failure");
  const bool error = test.child("error");
  if (failed) ++counts.failed;
  if (error) ++counts.errors;
  if (!failed && !error && test.child("skipped")) ++counts.skipped;
}

void count_children(const pugi::xml_node& node, TestCounts& counts, const std::string& path) {
  for (const pugi::xml_node& child : node.children()) {
    const std::string_view name = child.name();
    if (name == "testsuite") {
      count_suite(child, counts, path);
    } else if (name == "testcase") {
      count_case(child, counts);
    }
  }
}

std::optional<double> seconds_attribute(const pugi::xml_node& test) {
  std::string text = test.attribute("time").value();
  std::erase(text, ',');  // older Surefire writes "1,234.5"
  double value = 0;
  const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (text.empty() || ec != std::errc() || end != text.data() + text.size() || !(value >= 0)) return std::nullopt;
  return value;
}

// The message attribute of the <failure>, <error> or <skipped> child, else its text; at most max_bytes,
// never cut inside a UTF-8 character.
std::string case_message(const pugi::xml_node& outcome, std::size_t max_bytes) {
  std::string text(std::string_view(outcome.attribute("message").value()).substr(0, max_bytes + 1));
  if (text.empty()) text = outcome.text().get();
  cut_utf8(text, max_bytes);
  return text;
}

TestCase read_case(const pugi::xml_node& test, std::size_t max_message_bytes) {
  TestCase out;
  out.class_name = std::string_view(test.attribute("classname").value()).substr(0, max_message_bytes + 1);
  cut_utf8(out.class_name, max_message_bytes);
  out.name = std::string_view(test.attribute("name").value()).substr(0, max_message_bytes + 1);
  cut_utf8(out.name, max_message_bytes);
  out.time = seconds_attribute(test);
  pugi::xml_node outcome;
  if ((outcome = test.child("failure"))) out.outcome = "failed";
  else if ((outcome = test.child("error"))) out.outcome = "error";
  else if ((outcome = test.child("skipped"))) out.outcome = "skipped";
  else out.outcome = "passed";
  if (outcome) out.message = case_message(outcome, max_message_bytes);
  return out;
}

// Throws unless every element of the document is at most kMaxNesting levels deep. pugixml parses and walks
// (traverse) without recursion, so this check is safe on any depth; the recursive counting and listing below
// then never go deeper than kMaxNesting frames, whatever a sandbox nested.
constexpr int kMaxNesting = 64;

void check_nesting(pugi::xml_document& doc, const std::string& path) {
  struct DepthCheck : pugi::xml_tree_walker {
    bool too_deep = false;
    bool for_each(pugi::xml_node&) override {
      too_deep = depth() > kMaxNesting;
      return !too_deep;  // stops the walk at the first element that is too deep
    }
  } check;
  doc.traverse(check);
  if (check.too_deep) {
    throw JunitError(path, "nested too deep (more than " + std::to_string(kMaxNesting) + " levels); not read");
  }
}

// Every <testcase> below `node`, in document order, up to max_cases; cases_truncated when there were more.
void list_cases(const pugi::xml_node& node, TestCounts& counts, std::size_t max_cases, std::size_t max_message_bytes) {
  for (const pugi::xml_node& child : node.children()) {
    const std::string_view name = child.name();
    if (name == "testcase") {
      if (counts.cases.size() < max_cases) counts.cases.push_back(read_case(child, max_message_bytes));
      else counts.cases_truncated = true;
    } else if (name == "testsuite" || name == "testsuites") {
      list_cases(child, counts, max_cases, max_message_bytes);
    }
  }
}

// One report's bytes, parsed in place (pugixml changes `content`); `path` names it in errors. Throws JunitError.
TestCounts parse_junit_text(std::string& content, const std::string& path, std::size_t max_cases,
                            std::size_t max_message_bytes) {
  pugi::xml_document doc;
  const pugi::xml_parse_result parsed = doc.load_buffer_inplace(content.data(), content.size());
  if (!parsed) {
    throw JunitError(path, std::string("malformed XML: ") + parsed.description() + " at offset " +
                               std::to_string(parsed.offset));
  }
  check_nesting(doc, path);
  const pugi::xml_node root = doc.document_element();
  const std::string_view name = root.name();
  if (name != "testsuite" && name != "testsuites") {
    throw JunitError(path, "not a JUnit report (root element <" + quote_excerpt(name) + ">)");
  }
  TestCounts counts;
  if (name == "testsuite") {
    count_suite(root, counts, path);
  } else {
    count_children(root, counts, path);
  }
  list_cases(doc, counts, max_cases, max_message_bytes);
  return counts;
}

}  // namespace

nlohmann::json TestCase::to_json() const {
  nlohmann::json j = {{"class", class_name},
                      {"name", name},
                      {"outcome", outcome},
                      {"time", time ? nlohmann::json(*time) : nlohmann::json()}};
  if (!message.empty()) j["message"] = message;
  return j;
}

nlohmann::json TestCounts::to_json() const {
  nlohmann::json listed = nlohmann::json::array();
  for (const TestCase& test : cases) listed.push_back(test.to_json());
  nlohmann::json j = {{"total", total},
                      {"failed", failed},
                      {"errors", errors},
                      {"skipped", skipped},
                      {"cases", std::move(listed)},
                      {"cases_truncated", cases_truncated},
                      {"files", files},
                      {"unreadable", unreadable}};
  if (truncated || not_read > 0) {
    j["truncated"] = true;
    j["not_read"] = not_read;
  }
  return j;
}

TestCounts& TestCounts::operator+=(const TestCounts& other) {
  total += other.total;
  failed += other.failed;
  errors += other.errors;
  skipped += other.skipped;
  cases.insert(cases.end(), other.cases.begin(), other.cases.end());
  cases_truncated = cases_truncated || other.cases_truncated;
  files.insert(files.end(), other.files.begin(), other.files.end());
  unreadable.insert(unreadable.end(), other.unreadable.begin(), other.unreadable.end());
  truncated = truncated || other.truncated;
  not_read += other.not_read;
  reports_not_read += other.reports_not_read;
  return *this;
}

TestCounts parse_junit_file(const std::string& path, std::uint64_t max_bytes, std::size_t max_cases,
                            std::size_t max_message_bytes) {
  std::string content = read_bounded_file(path, max_bytes);
  TestCounts counts = parse_junit_text(content, path, max_cases, max_message_bytes);
  counts.files.push_back(path);
  return counts;
}

TestCounts collect_junit(const std::string& root, const std::vector<std::string>& globs, const JunitLimits& limits) {
  TestCounts total;
  const auto note = [&](std::string text) {
    if (total.unreadable.size() < limits.max_listed) total.unreadable.push_back(std::move(text));
    else ++total.not_read;
  };
  CollectLimits collect = collect_limits_of(limits);
  collect.max_file_bytes = limits.max_file_bytes;
  collect.max_total_bytes = limits.max_total_bytes;
  const auto use = [&](const std::string& rel, std::string& content) {
    const std::size_t room = limits.max_cases - std::min(limits.max_cases, total.cases.size());
    TestCounts counts = parse_junit_text(content, rel, room, limits.max_message_bytes);
    counts.files = {rel};
    total += counts;
  };
  const CollectOutcome outcome = collect_files(root, globs, collect, note, use);
  total.truncated = outcome.truncated;
  total.reports_not_read = outcome.files_not_read;
  return total;
}

}  // namespace capsule::daemon
