// JUnit XML counting with pugixml, and glob matching with fnmatch(3) per path segment over lstat'ed
// directories (no regex, no symlink following).
#include "daemon/record/junit.h"

#include <dirent.h>
#include <fcntl.h>
#include <fnmatch.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <charconv>
#include <cstring>
#include <optional>
#include <pugixml.hpp>
#include <set>

namespace capsule::daemon {
namespace {

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

// What one collection may still spend, and what it could not do ("<rel>: <reason>").
struct SearchBudget {
  std::chrono::steady_clock::time_point deadline = std::chrono::steady_clock::time_point::max();
  std::uint64_t visits_left = UINT64_MAX;
  std::vector<std::string> problems;
  bool exhausted = false;

  bool spend(const std::string& rel) {
    if (exhausted) return false;
    if (visits_left == 0 || std::chrono::steady_clock::now() > deadline) {
      exhausted = true;
      problems.push_back((rel.empty() ? std::string(".") : rel) + ": search stopped here (" +
                         (visits_left == 0 ? "too many directory entries" : "out of time") + ")");
      return false;
    }
    --visits_left;
    return true;
  }
};

class GlobWalker {
 public:
  GlobWalker(const std::string& root, std::set<std::string>& out, SearchBudget& budget)
      : root_(root), out_(out), budget_(budget) {}

  // Matches segments[i..] against the directory `rel` (relative to the root, "" for the root itself).
  void match(const std::string& rel, const std::vector<std::string>& segments, std::size_t i) {
    if (budget_.exhausted) return;
    const std::string& segment = segments[i];
    const bool last = i + 1 == segments.size();
    if (segment == "**") {
      match(rel, segments, i + 1);
      for (const auto& name : list(rel)) {
        if (name.front() == '.') continue;
        const std::string child = join(rel, name);
        const auto st = lstat_quietly(child);
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

  // lstat; nullopt when absent or unreadable (a problem is noted: e.g. a path past PATH_MAX).
  std::optional<struct stat> lstat_quietly(const std::string& rel) {
    if (!budget_.spend(rel)) return std::nullopt;
    try {
      return lstat_if_exists(absolute(rel));
    } catch (const JunitError& e) {
      budget_.problems.push_back(rel + ": " + e.cause().detail);
      return std::nullopt;
    }
  }

  // A path that matched segment i: a report if it was the last segment, else a directory to search on.
  void visit(const std::string& rel, const std::vector<std::string>& segments, std::size_t i, bool last) {
    const auto st = lstat_quietly(rel);
    if (!st) return;
    if (last && S_ISREG(st->st_mode)) out_.insert(rel);
    if (!last && S_ISDIR(st->st_mode)) match(rel, segments, i + 1);
  }

  std::vector<std::string> list(const std::string& rel) {
    const std::string path = absolute(rel);
    std::vector<std::string> names;
    DIR* dir = ::opendir(path.c_str());
    if (dir == nullptr) {
      if (errno != ENOENT && errno != ENOTDIR) {
        budget_.problems.push_back((rel.empty() ? std::string(".") : rel) + ": opendir: " + std::strerror(errno));
      }
      return names;
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
  SearchBudget& budget_;
};

// Reads a regular file of at most `max_bytes` through one descriptor: no FIFO, device or symlink is opened
// for reading, and nothing past the size checked is read.
std::string read_report(const std::string& path, std::uint64_t max_bytes) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC | O_NOCTTY);
  if (fd < 0) throw JunitError(path, std::string("open: ") + std::strerror(errno));
  struct stat st {};
  if (::fstat(fd, &st) != 0) {
    const int error = errno;
    ::close(fd);
    throw JunitError(path, std::string("fstat: ") + std::strerror(error));
  }
  if (!S_ISREG(st.st_mode)) {
    ::close(fd);
    throw JunitError(path, "not a regular file");
  }
  if (static_cast<std::uint64_t>(st.st_size) > max_bytes) {
    ::close(fd);
    throw JunitError(path, "report of " + std::to_string(st.st_size) + " bytes is larger than the " +
                               std::to_string(max_bytes >> 20) + " MiB limit; not read");
  }
  std::string content(static_cast<std::size_t>(st.st_size), '\0');
  std::size_t got = 0;
  while (got < content.size()) {
    const ssize_t n = ::read(fd, content.data() + got, content.size() - got);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      const int error = errno;
      ::close(fd);
      throw JunitError(path, std::string("read: ") + std::strerror(error));
    }
    if (n == 0) break;
    got += static_cast<std::size_t>(n);
  }
  ::close(fd);
  content.resize(got);
  return content;
}

std::vector<std::string> glob_within(const std::string& root, const std::vector<std::string>& globs,
                                     SearchBudget& budget) {
  const auto st = lstat_if_exists(root);
  if (!st || !S_ISDIR(st->st_mode)) throw JunitError(root, "report root is not a directory");
  std::vector<std::vector<std::string>> split;
  for (const auto& glob : globs) split.push_back(split_glob(glob));  // every glob checked before any search
  std::set<std::string> found;
  GlobWalker walker(root, found, budget);
  for (const auto& segments : split) walker.match("", segments, 0);
  return {found.begin(), found.end()};
}

}  // namespace

nlohmann::json TestCounts::to_json() const {
  nlohmann::json j = {{"total", total},     {"failed", failed}, {"errors", errors},
                      {"skipped", skipped}, {"files", files},   {"unreadable", unreadable}};
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
  files.insert(files.end(), other.files.begin(), other.files.end());
  unreadable.insert(unreadable.end(), other.unreadable.begin(), other.unreadable.end());
  truncated = truncated || other.truncated;
  not_read += other.not_read;
  return *this;
}

TestCounts parse_junit_file(const std::string& path, std::uint64_t max_bytes) {
  std::string content = read_report(path, max_bytes);  // outlives doc, which parses it in place
  pugi::xml_document doc;
  const pugi::xml_parse_result parsed = doc.load_buffer_inplace(content.data(), content.size());
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
  SearchBudget unlimited;
  return glob_within(root, globs, unlimited);
}

TestCounts collect_junit(const std::string& root, const std::vector<std::string>& globs, const JunitLimits& limits) {
  SearchBudget budget;
  budget.deadline = std::chrono::steady_clock::now() + limits.time_budget;
  budget.visits_left = limits.max_visited;
  TestCounts total;
  const auto note = [&](std::string text) {
    if (total.unreadable.size() < limits.max_listed) total.unreadable.push_back(std::move(text));
    else ++total.not_read;
  };
  const std::vector<std::string> found = glob_within(root, globs, budget);
  for (auto& problem : budget.problems) note(std::move(problem));
  if (budget.exhausted) total.truncated = true;

  std::size_t parsed = 0;
  std::uint64_t bytes = 0;
  for (const auto& rel : found) {
    const std::string path = root + "/" + rel;
    std::string limit;
    struct stat st {};
    if (parsed >= limits.max_files) {
      limit = "not read: more than " + std::to_string(limits.max_files) + " reports";
    } else if (std::chrono::steady_clock::now() > budget.deadline) {
      limit = "not read: out of time (" + std::to_string(limits.time_budget.count()) + " ms for all reports)";
    } else if (::lstat(path.c_str(), &st) == 0 && S_ISREG(st.st_mode) &&
               bytes + static_cast<std::uint64_t>(st.st_size) > limits.max_total_bytes &&
               static_cast<std::uint64_t>(st.st_size) <= limits.max_file_bytes) {
      limit = "not read: the reports would pass " + std::to_string(limits.max_total_bytes >> 20) + " MiB in all";
    }
    if (!limit.empty()) {
      total.truncated = true;
      note(rel + ": " + limit);
      continue;
    }
    try {
      TestCounts counts = parse_junit_file(path, limits.max_file_bytes);
      ++parsed;
      bytes += static_cast<std::uint64_t>(st.st_size);
      counts.files = {rel};
      total += counts;
    } catch (const JunitError& e) {
      note(rel + ": " + e.cause().detail);
    }
  }
  return total;
}

}  // namespace capsule::daemon
