// Class-file census: the header of each matched file read through one O_NOFOLLOW descriptor, the majors
// counted, and the files off the most common major listed (bounded), for collect.classfiles.
#include "daemon/record/classfiles.h"

#include <algorithm>

#include "daemon/record/workspace_glob.h"

namespace capsule::daemon {

namespace {

constexpr std::size_t kHeaderBytes = 8;  // 0xCAFEBABE, minor, major

unsigned major_of(std::string_view header, const std::string& path) {
  if (header.size() < kHeaderBytes) throw CollectError(path, "shorter than a class-file header");
  const auto byte = [&](std::size_t i) { return static_cast<unsigned char>(header[i]); };
  if (byte(0) != 0xCA || byte(1) != 0xFE || byte(2) != 0xBA || byte(3) != 0xBE) {
    throw CollectError(path, "not a class file (no 0xCAFEBABE)");
  }
  return static_cast<unsigned>(byte(6)) << 8 | byte(7);
}

}  // namespace

unsigned classfile_major(const std::string& path) {
  return major_of(read_bounded_file(path, kHeaderBytes, /*prefix=*/true), path);
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
  ClassfileCensus census;
  const auto note = [&](std::string text) {
    if (census.unreadable.size() < limits.max_listed) census.unreadable.push_back(std::move(text));
    else census.truncated = true;
  };
  CollectLimits collect = collect_limits_of(limits);
  collect.max_file_bytes = kHeaderBytes;
  collect.max_total_bytes = UINT64_MAX;
  collect.prefix = true;
  collect.what = "files";
  // The first max_listed paths of each major: enough to list the odd ones whichever major wins.
  std::map<unsigned, std::vector<std::string>> examples;
  const auto use = [&](const std::string& rel, std::string& header) {
    const unsigned major = major_of(header, rel);
    ++census.files;
    ++census.majors[major];
    auto& paths = examples[major];
    if (paths.size() < limits.max_listed) paths.push_back(rel);
  };
  const CollectOutcome outcome = collect_files(root, globs, collect, note, use);
  census.truncated = census.truncated || outcome.truncated;
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
