// The command line shared by capsule and capsule-full (cli_main.cpp); each executable's main calls it, and links
// its own side of full_commands.h.
#pragma once

namespace capsule::client {

// Parses argv, runs the command and returns the process's exit status.
int cli_main(int argc, char** argv);

}  // namespace capsule::client
