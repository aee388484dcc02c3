// `capsule batch submit --baseline-batch ID | --baseline RUN [--allow-removed]`: which earlier run each spec's
// test cases are compared with (spec.baseline), chosen here at submit so the pinned specs carry it.
#pragma once

#include <string>
#include <vector>

#include "client/batch/batch_dir.h"
#include "client/batch/batch_input.h"

namespace capsule::client::batch {

// What the flags ask for: at most one of run and batch.
struct BaselineFlags {
  std::string run;            // --baseline RUN: the same run for every spec
  std::string batch;          // --baseline-batch ID: each spec's own run of the same key in batch ID
  bool allow_removed = false;  // --allow-removed
};

// Gives every input without a "baseline" of its own {"run", "allow_removed"} as the flags choose (a stored run's
// {"spec", "pinned"} form gets it in "spec"); a spec's own baseline is kept as it is. With a batch, `inputs` must
// hold as many specs as that batch under `root`, and each key must have a result there that names a run.
// Throws std::runtime_error naming the spec's file and line (a spec without collect.junit), the key (no result,
// or a result without a run) or the batch (unknown; a different count); nothing when no flag is given.
void apply_baselines(std::vector<InputSpec>& inputs, const BaselineFlags& flags, const fs::path& root);

}  // namespace capsule::client::batch
