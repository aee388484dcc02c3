// `capsule runs export RUN -o bundle.tar` (GET /v1/runs/{id}/bundle, written to a file) and `capsule runs import
// bundle.tar` (POST /v1/runs/import, the file read by the daemon with the caller's rights).
#pragma once

#include <CLI/CLI.hpp>
#include <string>

namespace capsule::client {

struct BundleCommands {
  CLI::App* export_run = nullptr;
  CLI::App* import_run = nullptr;
  std::string id;
  std::string out;
  std::string bundle;
  bool json = false;
};

// Adds `export` and `import` under `runs`.
void add_bundle_commands(CLI::App& runs, BundleCommands& commands);
bool bundle_command_parsed(const BundleCommands& commands);
int cmd_runs_bundle(const std::string& socket, const BundleCommands& commands);

}  // namespace capsule::client
