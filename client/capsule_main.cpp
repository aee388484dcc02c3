// main of capsule and of capsule-full: the same command line (cli_main); which commands run in this process is
// decided by the side of full_commands.h the executable links.
#include "client/cli_main.h"

int main(int argc, char** argv) { return capsule::client::cli_main(argc, argv); }
