// image_bench's command-line options with their defaults (docs/benchmarks.md quotes them), shared by its
// start-up and import parts so each reads the counts it needs.
#pragma once

#include <string>

#include "support/files.h"

namespace capsule::bench::image_bench {

struct Options {
  int rounds = 200;
  int warmup = 10;
  int cold_rounds = 5;        // fresh store: import + first run
  int import_rounds = 5;      // throughput rounds per method
  int import_layers = 5;
  int layer_mb = 40;          // file bytes per throughput layer (MB, uncompressed)
  std::string policy = default_policy_path();
  std::string tmp_parent = "/tmp";
  bool keep_tmp = false;
  bool skip_startup = false;
  bool skip_import = false;
};

}  // namespace capsule::bench::image_bench
