// Files for the benchmarks: whole-file reads of their inputs (seccomp profiles, host binaries for test images),
// where a failure stops the run since every number after it would be meaningless, and temp-tree removal.
#pragma once

#include <filesystem>
#include <string>

namespace capsule::bench {

// policies/default.json of the source tree (the build names it, in this file's object alone).
std::string default_policy_path();

// The bytes of a file; dies if it cannot be opened.
std::string read_file(const std::filesystem::path& path);

// Removes a temp tree if it is there; errors are ignored (a left-over tree only costs disk space).
void remove_tree(const std::filesystem::path& path);

}  // namespace capsule::bench
