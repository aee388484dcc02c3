// JUnit XML counting with pugixml, and glob matching with fnmatch(3) per path segment over lstat'ed
// directories (no regex, no symlink following).
#include "daemon/junit.h"

#include <dirent.h>
#include <fnmatch.h>
#include <sys/stat.h>

#include <cerrno>
#include <charconv>
#include <cstring>
#include <optional>
#include <pugixml.hpp>
#include <set>

namespace capsule::daemon {
namespace {

constexpr std::uint64_t kMaxReportBytes = 64ull << 20;

std::uint64_t count_attribute(const pugi::xml_node& suite, const char* name, const std::string& path) {
  const pugi::xml_attribute attribute = suite.attribute(name);
  if (!attribute) return 0;
  const std::string_view text = attribute.value();
  std::uint64_t value = 0;
  const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (ec != std::errc() || end != text.data() + text.size()) {
    throw JunitError(path, std::string("<testsuite ") + name + "=\"" + std::string(text) + "\"> is not a count");
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

std::optional<struct stat> lstat_if_exists(const std::string& path) {
  struct stat st {};
  if (::lstat(path.c_str(), &st) == 0) return st;
  if (errno == ENOENT || errno == ENOTDIR) return std::nullopt;
  throw JunitError(path, std::string("lstat: ") + std::strerror(errno));
}

std::vector<std::string> split_glob(const std::string& glob) {
  if (glob.empty() || glob.front() == '/') throw JunitError(glob, "a report glob must be a non-empty relative path");
  std::vector<std::string> segments;
  std::size_t start = 0;
  while (start <= glob.size()) {
    const std::size_t slash = std::min(glob.find('/', start), glob.size());
    const std::string segment = glob.substr(start, slash - start);
    if (segment == "..") throw JunitError(glob, "a report glob must stay inside the workspace (no '..')");
    const bool repeated_any_depth = segment == "**" && !segments.empty() && segments.back() == "**";
    if (!segment.empty() && segment != "." && !repeated_any_depth) segments.push_back(segment);
    start = slash + 1;
  }
  if (segments.empty()) throw JunitError(glob, "a report glob must name files");
  if (segments.back() == "**") segments.push_back("*");  // "dir/**": every file below dir
  return segments;
}

class GlobWalker {
 public:
  GlobWalker(const std::string& root, std::set<std::string>& out) : root_(root), out_(out) {}

  // Matches segments[i..] against the directory `rel` (relative to the root, "" for the root itself).
  void match(const std::string& rel, const std::vector<std::string>& segments, std::size_t i) {
    const std::string& segment = segments[i];
    const bool last = i + 1 == segments.size();
    if (segment == "**") {
      match(rel, segments, i + 1);
      for (const auto& name : list(rel)) {
        if (name.front() == '.') continue;
        const std::string child = join(rel, name);
        const auto st = lstat_if_exists(absolute(child));
        if (st && S_ISDIR(st->st_mode)) match(child, segments, i);
      }
      return;
    }
    if (segment.find_first_of("*?[") == std::string::npos) {
      visit(join(rel, segment), segments, i, last);
      return;
    }
    for (const auto& name : list(rel)) {
      if (::fnmatch(segment.c_str(), name.c_str(), FNM_PERIOD) == 0) visit(join(rel, name), segments, i, last);
    }
  }

 private:
  static std::string join(const std::string& rel, const std::string& name) {
    return rel.empty() ? name : rel + "/" + name;
  }
  std::string absolute(const std::string& rel) const { return rel.empty() ? root_ : root_ + "/" + rel; }

  // A path that matched segment i: a report if it was the last segment, else a directory to search on.
  void visit(const std::string& rel, const std::vector<std::string>& segments, std::size_t i, bool last) {
    const auto st = lstat_if_exists(absolute(rel));
    if (!st) return;
    if (last && S_ISREG(st->st_mode)) out_.insert(rel);
    if (!last && S_ISDIR(st->st_mode)) match(rel, segments, i + 1);
  }

  std::vector<std::string> list(const std::string& rel) const {
    const std::string path = absolute(rel);
    std::vector<std::string> names;
    DIR* dir = ::opendir(path.c_str());
    if (dir == nullptr) {
      if (errno == ENOENT || errno == ENOTDIR) return names;
      throw JunitError(path, std::string("opendir: ") + std::strerror(errno));
    }
    while (const dirent* entry = ::readdir(dir)) {
      const std::string name = entry->d_name;
      if (name != "." && name != "..") names.push_back(name);
    }
    ::closedir(dir);
    return names;
  }

  const std::string& root_;
  std::set<std::string>& out_;
};

}  // namespace

nlohmann::json TestCounts::to_json() const {
  return {{"total", total},   {"failed", failed}, {"errors", errors},
          {"skipped", skipped}, {"files", files},   {"unreadable", unreadable}};
}

TestCounts& TestCounts::operator+=(const TestCounts& other) {
  total += other.total;
  failed += other.failed;
  errors += other.errors;
  skipped += other.skipped;
  files.insert(files.end(), other.files.begin(), other.files.end());
  unreadable.insert(unreadable.end(), other.unreadable.begin(), other.unreadable.end());
  return *this;
}

TestCounts parse_junit_file(const std::string& path) {
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) throw JunitError(path, std::string("stat: ") + std::strerror(errno));
  if (!S_ISREG(st.st_mode)) throw JunitError(path, "not a regular file");
  if (static_cast<std::uint64_t>(st.st_size) > kMaxReportBytes) {
    throw JunitError(path, "report of " + std::to_string(st.st_size) + " bytes is larger than the 64 MiB limit");
  }
  pugi::xml_document doc;
  const pugi::xml_parse_result parsed = doc.load_file(path.c_str());
  if (!parsed) {
    throw JunitError(path, std::string("malformed XML: ") + parsed.description() + " at offset " +
                               std::to_string(parsed.offset));
  }
  const pugi::xml_node root = doc.document_element();
  const std::string_view name = root.name();
  if (name != "testsuite" && name != "testsuites") {
    throw JunitError(path, "not a JUnit report (root element <" + std::string(name) + ">)");
  }
  TestCounts counts;
  if (name == "testsuite") {
    count_suite(root, counts, path);
  } else {
    count_children(root, counts, path);
  }
  counts.files.push_back(path);
  return counts;
}

std::vector<std::string> glob_files(const std::string& root, const std::vector<std::string>& globs) {
  const auto st = lstat_if_exists(root);
  if (!st || !S_ISDIR(st->st_mode)) throw JunitError(root, "report root is not a directory");
  std::set<std::string> found;
  GlobWalker walker(root, found);
  for (const auto& glob : globs) walker.match("", split_glob(glob), 0);
  return {found.begin(), found.end()};
}

TestCounts collect_junit(const std::string& root, const std::vector<std::string>& globs) {
  TestCounts total;
  for (const auto& rel : glob_files(root, globs)) {
    try {
      TestCounts counts = parse_junit_file(root + "/" + rel);
      counts.files = {rel};
      total += counts;
    } catch (const JunitError& e) {
      total.unreadable.push_back(rel + ": " + e.reason());
    }
  }
  return total;
}

}  // namespace capsule::daemon
