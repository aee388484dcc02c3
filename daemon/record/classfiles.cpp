// Class-file census: the header of each matched file read through one O_NOFOLLOW descriptor, the majors
// counted, and the files off the most common major listed (bounded), for collect.classfiles.
#include "daemon/record/classfiles.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "daemon/record/workspace_glob.h"

namespace capsule::daemon {

unsigned classfile_major(const std::string& path) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC | O_NOCTTY);
  if (fd < 0) throw CollectError(path, std::string("open: ") + std::strerror(errno));
  struct stat st {};
  if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    ::close(fd);
    throw CollectError(path, "not a regular file");
  }
  unsigned char header[8];
  std::size_t got = 0;
  while (got < sizeof header) {
    const ssize_t n = ::read(fd, header + got, sizeof header - got);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    got += static_cast<std::size_t>(n);
  }
  ::close(fd);
  if (got < sizeof header) throw CollectError(path, "shorter than a class-file header");
  if (header[0] != 0xCA || header[1] != 0xFE || header[2] != 0xBA || header[3] != 0xBE) {
    throw CollectError(path, "not a class file (no 0xCAFEBABE)");
  }
  return static_cast<unsigned>(header[6]) << 8 | header[7];
}

nlohmann::json ClassfileCensus::to_json() const {
  nlohmann::json by_major = nlohmann::json::object();
  for (const auto& [major, count] : majors) by_major[std::to_string(major)] = count;
  nlohmann::json listed = nlohmann::json::array();
  for (const auto& [path, major] : odd) listed.push_back({{"path", path}, {"major", major}});
  return {{"majors", std::move(by_major)},
          {"expected", expected == 0 ? nlohmann::json() : nlohmann::json(expected)},
          {"odd", std::move(listed)},
          {"files", files},
          {"unreadable", unreadable},
          {"truncated", truncated}};
}

ClassfileCensus collect_classfiles(const std::string& root, const std::vector<std::string>& globs,
                                   const ClassfileLimits& limits) {
  SearchBudget budget;
  budget.deadline = std::chrono::steady_clock::now() + limits.time_budget;
  budget.visits_left = limits.max_visited;
  ClassfileCensus census;
  const auto note = [&](std::string text) {
    if (census.unreadable.size() < limits.max_listed) census.unreadable.push_back(std::move(text));
    else census.truncated = true;
  };
  const std::vector<std::string> found = glob_within(root, globs, budget);
  for (auto& problem : budget.problems) note(std::move(problem));
  if (budget.exhausted) census.truncated = true;

  // The first max_listed paths of each major: enough to list the odd ones whichever major wins.
  std::map<unsigned, std::vector<std::string>> examples;
  for (const std::string& rel : found) {
    if (census.files >= limits.max_files || std::chrono::steady_clock::now() > budget.deadline) {
      census.truncated = true;
      note(rel + ": not read: more than " + std::to_string(limits.max_files) + " files or out of time");
      break;
    }
    try {
      const unsigned major = classfile_major(root + "/" + rel);
      ++census.files;
      ++census.majors[major];
      auto& paths = examples[major];
      if (paths.size() < limits.max_listed) paths.push_back(rel);
    } catch (const CollectError& e) {
      note(rel + ": " + e.cause().detail);
    }
  }
  std::uint64_t most = 0;
  for (const auto& [major, count] : census.majors) {
    if (count >= most) {  // ascending majors: a tie goes to the higher one
      most = count;
      census.expected = major;
    }
  }
  for (const auto& [major, count] : census.majors) {
    if (major == census.expected) continue;
    std::uint64_t listed = 0;
    for (const std::string& rel : examples[major]) {
      if (census.odd.size() >= limits.max_listed) break;
      census.odd.emplace_back(rel, major);
      ++listed;
    }
    if (listed < count) census.truncated = true;  // odd ones not listed
  }
  return census;
}

}  // namespace capsule::daemon
