// capsule's side of full_commands.h: the commands that need large libraries are run by capsule-full, exec'd with
// the same argv (it parses it again), so this executable loads none of those libraries.
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <iostream>

#include "client/cli_daemon.h"
#include "client/full_commands.h"
#include "install_layout.h"

namespace capsule::client {

const char* const kCapsuledFromThisCli = install_layout::kCapsuledFromCli;

int run_full_command(char** argv, const std::string&, bool, const FullCommands&) {
  const std::string full = install_layout::beside_this_executable(install_layout::kFullCliFromCli);
  ::execv(full.c_str(), argv);
  std::cerr << "capsule: cannot run " << full << " (which runs this command): " << std::strerror(errno) << "\n";
  return 1;
}

}  // namespace capsule::client
