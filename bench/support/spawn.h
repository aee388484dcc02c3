// Running baseline programs (bwrap, unshare, tar) from the benchmarks: found on PATH once, then spawned with
// posix_spawn + waitpid, stdin/stdout on /dev/null and stderr inherited so failures stay visible.
#pragma once

#include <spawn.h>

#include <string>
#include <vector>

namespace capsule::bench {

// Absolute path of a program on this process's PATH (/usr/bin:/bin without one); dies if there is none.
std::string find_program(const std::string& name);

// This process's environment as NAME=value strings.
std::vector<std::string> current_environment();

// One command line, prepared once so each timed run is a single posix_spawn; safe to run from several threads.
class Spawner {
 public:
  Spawner(std::vector<std::string> argv, std::vector<std::string> env);
  ~Spawner();
  Spawner(const Spawner&) = delete;
  Spawner& operator=(const Spawner&) = delete;

  // Runs the command to completion; throws std::runtime_error unless it exited 0.
  void run() const;
  std::string describe() const;  // the command line, space-separated

 private:
  std::vector<std::string> argv_;
  std::vector<std::string> env_;
  std::vector<char*> argv_ptrs_;
  std::vector<char*> env_ptrs_;
  posix_spawn_file_actions_t actions_;
};

}  // namespace capsule::bench
