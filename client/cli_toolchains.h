// `capsule toolchains ls|resolve`: what is installed per toolchain, and a dry run of a run's toolchains (which
// image and version `python=auto` would get for a date), over capsuled's /v1/toolchains routes.
#pragma once

#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

namespace capsule::client {

struct ToolchainCommands {
  CLI::App* group = nullptr;  // `capsule toolchains`: parsed when one of its subcommands was given
  CLI::App* ls = nullptr;
  CLI::App* resolve = nullptr;
  std::vector<std::string> toolchains;  // resolve: NAME=VERSION items, as `capsule run --toolchain` takes them
  std::string as_of;
  bool json = false;
};

// Registers `capsule toolchains` and its subcommands on `app`, bound to `commands`.
void add_toolchain_commands(CLI::App& app, ToolchainCommands& commands);
// The GET /v1/toolchains/resolve target for NAME=VERSION items and a date. Throws std::invalid_argument for a
// malformed item.
std::string resolve_target(const std::vector<std::string>& toolchains, const std::string& as_of);
// TOOLCHAIN  VERSION  REF  DIGEST  NOTE, newest first per toolchain.
std::string format_toolchains_table(const nlohmann::json& listing);
// The image, each toolchain's version and why, as lines "name  value".
std::string format_resolution(const nlohmann::json& answer);

int cmd_toolchains(const std::string& socket, const ToolchainCommands& commands);

}  // namespace capsule::client
