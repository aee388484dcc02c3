// The commands whose code needs large libraries: proxy serve (OpenSSL, SQLite, pugixml, spdlog), batch (OpenSSL),
// stack up (yaml-cpp), session cp and runs cp (libarchive). `capsule` execs capsule-full for them, as git execs
// git-remote-https, so that every other command starts without loading those libraries (docs/benchmarks.md).
#pragma once

#include <CLI/CLI.hpp>
#include <string>

#include "client/cli_batch.h"
#include "client/cli_proxy.h"
#include "client/cli_session.h"
#include "client/cli_stack.h"

namespace capsule::client {

// The parsed command line's parts these commands read (owned by cli_main).
struct FullCommands {
  CLI::App* proxy_serve = nullptr;
  const ProxyServeOptions* serve_options = nullptr;
  const BatchCommands* batch = nullptr;
  const StackCommands* stacks = nullptr;
  const SessionCommands* sessions = nullptr;
  CLI::App* runs_cp = nullptr;
  const std::string* cp_source = nullptr;
  const std::string* cp_destination = nullptr;

  bool parsed() const {
    return proxy_serve->parsed() || batch->group->parsed() || stacks->up->parsed() || sessions->cp->parsed() ||
           runs_cp->parsed();
  }
};

// In capsule (full_commands_exec.cpp): replaces this process with capsule-full and the same argv, or returns 1
// saying why it could not. In capsule-full (full_commands_run.cpp): runs the parsed command and returns its status.
int run_full_command(char** argv, const std::string& socket, bool socket_given, const FullCommands& commands);

}  // namespace capsule::client
