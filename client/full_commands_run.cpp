// capsule-full's side of full_commands.h: the commands whose code needs large libraries, run in this process.
// capsule-full is the whole CLI; capsule execs it for these commands only.
#include "client/cli_daemon.h"
#include "client/cli_run_outputs.h"
#include "client/full_commands.h"
#include "client/session_files.h"
#include "install_layout.h"

namespace capsule::client {

const char* const kCapsuledFromThisCli = install_layout::kCapsuledFromFullCli;

int run_full_command(char**, const std::string& socket, bool socket_given, const FullCommands& c) {
  if (c.proxy_serve->parsed()) return cmd_proxy_serve(*c.serve_options);
  if (c.batch->group->parsed()) return cmd_batch(socket, socket_given, *c.batch);
  if (c.stacks->up->parsed()) return cmd_stack_up(socket, *c.stacks);
  if (c.sessions->cp->parsed()) {
    return exit_125_on_error([&] {
      cmd_session_cp(socket, c.sessions->source, c.sessions->destination);
      return 0;
    });
  }
  return cmd_runs_cp(socket, *c.cp_source, *c.cp_destination);
}

}  // namespace capsule::client
