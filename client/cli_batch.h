// `capsule batch submit|status|wait|results|summary|cancel|resume|ls|work`: many run specs through local
// workers or a Slurm job array, results gathered by key in the batch's directory (client/batch/).
#pragma once

#include <CLI/CLI.hpp>
#include <cstddef>
#include <optional>
#include <string>

namespace capsule::client {

struct BatchCommands {
  CLI::App* group = nullptr;
  CLI::App *submit = nullptr, *status = nullptr, *wait = nullptr, *results = nullptr, *summary = nullptr,
           *cancel = nullptr, *resume = nullptr, *ls = nullptr, *work = nullptr;
  std::string root;     // --root: where batches live
  std::string input;    // submit FILE|DIR
  std::string id;
  std::string engine = "local";
  std::string partition;
  std::string node_socket;  // submit --node-socket: the workers' capsuled ("{node}": the node's name)
  int concurrency = 2;
  std::size_t chunk_size = 0;  // 0: 100 for local, 20 for slurm
  bool rerun = false;
  bool wait_after = false;     // submit --wait
  std::string baseline;        // submit --baseline RUN: every spec without a baseline of its own is compared with it
  std::string baseline_batch;  // submit --baseline-batch ID: ... with the run of its key in batch ID
  bool allow_removed = false;  // submit --allow-removed: those baselines list lost cases without failing for them
  std::optional<std::size_t> chunk;  // work --chunk
  std::string format = "text";       // summary --format
  std::string out;                   // summary -o
  int timeout_s = 0;                 // wait --timeout (seconds; 0: none)
  bool json = false;
};

void add_batch_commands(CLI::App& app, BatchCommands& commands);

// Exit status: 0 done (submit: accepted; wait: every spec has a result), 1 incomplete or cancelled, 124 wait's
// timeout, 2 bad input (a message names the spec's file and line).
int cmd_batch(const std::string& socket, bool socket_given, const BatchCommands& commands);

}  // namespace capsule::client
