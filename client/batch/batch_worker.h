// `capsule batch work`: what a local worker process or one Slurm array task runs. It takes the chunks it can
// lock, and runs their specs that have no result yet through this node's capsuled, `concurrency` at a time.
#pragma once

#include <optional>
#include <string>

#include "client/batch/batch_dir.h"

namespace capsule::client::batch {

struct WorkOptions {
  std::string socket;                // this node's capsuled (started on demand when it is the user's default)
  std::optional<std::size_t> chunk;  // one chunk (a Slurm array task); none: every chunk it can lock
};

// Runs until every locked chunk's specs have results, the batch is cancelled, or SIGTERM/SIGINT (then the runs
// in flight are cancelled through the daemon and left without a result, so that resuming runs them again).
// Each result is appended to its chunk's file as it lands, and cached by manifest. A spec whose manifest the
// cache holds is not run (unless the batch was submitted with --rerun): its result is copied with
// "cached_from". A spec capsuled refuses (400/404/409) gets a result in state "rejected" with the reason.
// Returns 0 when nothing was left undone, 1 otherwise (interrupted, capsuled unreachable, chunks held by
// another worker).
int work(const BatchDir& batch, const WorkOptions& options);

// `socket` with every "{node}" replaced by this node's name ($SLURMD_NODENAME in a Slurm task, else the host
// name), so that one batch reaches a capsuled per node.
std::string node_socket_path(std::string socket);

// Where a batch keeps what nodes may lack, shared by the batches of a root: the canonical tars of workspace
// snapshots (<root>/objects/snapshots/<hex>.tar) and images as oci-archives (<root>/objects/images/<hex>.tar,
// which import with the same manifest digest). Throws std::runtime_error for text that is not a sha256 digest.
fs::path snapshot_object(const fs::path& root, const std::string& digest);
fs::path image_object(const fs::path& root, const std::string& digest);

}  // namespace capsule::client::batch
