// Whole-file reads for the benchmarks' inputs (see files.h); failures go through the shared die() so the
// message names the benchmark and its clean-up runs.
#include "support/files.h"

#include <fstream>
#include <sstream>

#include "support/fail.h"

namespace capsule::bench {

std::string default_policy_path() { return CAPSULE_DEFAULT_POLICY; }

std::string read_file(const std::filesystem::path& path) {
  std::ifstream file(path, std::ios::binary);
  if (!file) die("cannot read " + path.string());
  std::stringstream text;
  text << file.rdbuf();
  return text.str();
}

void remove_tree(const std::filesystem::path& path) {
  std::error_code ignored;
  std::filesystem::remove_all(path, ignored);
}

}  // namespace capsule::bench
