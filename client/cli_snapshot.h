// `capsule snapshot create|ls|export|rm|gc`: snapshots of a directory, a tar file or a git repository at a commit,
// over capsuled's /v1/snapshots routes.
#pragma once

#include <CLI/CLI.hpp>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <string>

#include "http/unix_client.h"

namespace capsule::client {

struct SnapshotCommands {
  CLI::App* group = nullptr;  // `capsule snapshot`: parsed when one of its subcommands was given
  CLI::App* create = nullptr;
  CLI::App* ls = nullptr;
  CLI::App* export_tar = nullptr;
  CLI::App* rm = nullptr;
  CLI::App* gc = nullptr;
  std::string source;  // create: DIR, TAR or REPO@REV
  std::string git;     // create --git REPO (with --rev): a repository whatever its name holds
  std::string rev;
  std::string digest;  // export, rm
  std::string out;     // export -o FILE
  std::string unused_for;  // gc --unused-for DURATION
  bool dry_run = false;    // gc --dry-run
  bool json = false;
};

// Registers `capsule snapshot` and its subcommands on `app`, bound to `commands`.
void add_snapshot_commands(CLI::App& app, SnapshotCommands& commands);

// The POST /v1/snapshots body: --git/--rev as given; else SOURCE as an existing directory ({"dir"}), an existing
// file ({"tar"}), or REPO@REV split at its last '@' when REPO is a directory ({"git", "rev"}), so a directory
// whose name holds '@' is still taken as a directory. Paths are made absolute. Throws std::invalid_argument.
nlohmann::json snapshot_create_body(const SnapshotCommands& commands);
// DIGEST(19)  SIZE  FILES  CREATED  SOURCE, one snapshot per line.
std::string format_snapshots_table(const nlohmann::json& snapshots);

// Streams a snapshot's canonical tar into `out` through a temporary sibling renamed once whole.
void export_snapshot(const http::HttpClient& client, const std::string& digest, const std::filesystem::path& out);

int cmd_snapshot(const std::string& socket, const SnapshotCommands& commands);

}  // namespace capsule::client
