// How a batch's workers are started, watched and stopped: `local` forks one detached `capsule batch work`
// on this machine; `slurm` submits one job array (sbatch) whose task N runs `capsule batch work --chunk N`.
#pragma once

#include <string>
#include <vector>

#include "client/batch/batch_dir.h"

namespace capsule::client::batch {

// Starts workers for the chunks of `batch` that still lack results (all of them for a new batch) and records
// the launch in the batch. `socket` is the capsuled socket the workers use (empty: each node's default).
// Throws std::runtime_error when the engine cannot start them (sbatch's message).
Launch launch_workers(const BatchDir& batch, const std::string& socket);

// True while a worker of the batch may still run: a recorded local process that is still the same process, a
// Slurm job that squeue still lists, or a chunk lock some process holds.
bool workers_alive(const BatchDir& batch);

// Marks the batch cancelled and stops its workers: SIGTERM to the local workers, scancel of the Slurm jobs
// (whose tasks get SIGTERM too); each worker then cancels its runs in flight through its capsuled.
void cancel_workers(const BatchDir& batch);

// The chunks of `batch` whose specs do not all have results.
std::vector<std::size_t> unfinished_chunks(const BatchDir& batch);

}  // namespace capsule::client::batch
