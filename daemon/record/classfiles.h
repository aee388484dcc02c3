// collect.classfiles: a census of the class-file major versions a run left (52 = Java 8, 61 = 17, 65 = 21), so a
// migration verdict needs no second pass; only each file's 8-byte header is read, within a bounded walk.
#pragma once

#include <chrono>
#include <cstdint>
#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

namespace capsule::daemon {

struct ClassfileLimits {
  std::size_t max_files = 200000;               // class files read
  std::uint64_t max_visited = 1000000;          // directory entries looked at while matching globs
  std::chrono::milliseconds time_budget{20000}; // for matching and reading together
  std::chrono::steady_clock::time_point deadline = std::chrono::steady_clock::time_point::max();  // if earlier
  std::size_t max_listed = 100;                 // entries in odd and unreadable
};

struct ClassfileCensus {
  std::map<unsigned, std::uint64_t> majors;  // major version -> files
  unsigned expected = 0;                     // the most common major (the higher one on a tie); 0: none
  std::vector<std::pair<std::string, unsigned>> odd;  // files at another major: relative path, major
  std::uint64_t files = 0;                   // class files counted
  std::vector<std::string> unreadable;       // "<rel>: <reason>": not a class file, unreadable, limits
  bool truncated = false;                    // a limit stopped the census, or a list was cut

  // {"majors": {"52": 3, "61": 120}, "expected": 61, "odd": [{"path", "major"}], "files", "unreadable",
  //  "truncated"}; "expected" is null when no class file was found.
  nlohmann::json to_json() const;
};

// The major version of the class file at `path`, from its first 8 bytes (0xCAFEBABE, minor, major). Opens only
// a regular file, never through a symlink. Throws CollectError for anything else (short, wrong magic, errors).
unsigned classfile_major(const std::string& path);

// The majors of the regular files below `root` matching `globs`, whose headers collect_files (workspace_glob.h)
// reads within `limits` (every file opened counts against max_files, a class file or not).
// Throws CollectError for a bad glob or a root that is not a directory.
ClassfileCensus collect_classfiles(const std::string& root, const std::vector<std::string>& globs,
                                   const ClassfileLimits& limits = {});

}  // namespace capsule::daemon
