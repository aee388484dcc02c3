// Baseline programs for the benchmarks (see spawn.h): PATH lookup and a reusable posix_spawn command whose
// failures (spawn error, non-zero exit, signal) come back as exceptions the caller turns into die() or a count.
#include "support/spawn.h"

#include <fcntl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <sstream>
#include <stdexcept>

#include "support/fail.h"

extern char** environ;

namespace capsule::bench {

std::string find_program(const std::string& name) {
  const char* path = std::getenv("PATH");
  std::stringstream dirs(path ? path : "/usr/bin:/bin");
  for (std::string dir; std::getline(dirs, dir, ':');) {
    if (dir.empty()) continue;
    const std::string candidate = dir + "/" + name;
    if (access(candidate.c_str(), X_OK) == 0) return candidate;
  }
  die(name + " not found on PATH");
}

std::vector<std::string> current_environment() {
  std::vector<std::string> env;
  for (char** var = environ; *var != nullptr; ++var) env.emplace_back(*var);
  return env;
}

Spawner::Spawner(std::vector<std::string> argv, std::vector<std::string> env)
    : argv_(std::move(argv)), env_(std::move(env)) {
  for (auto& arg : argv_) argv_ptrs_.push_back(arg.data());
  argv_ptrs_.push_back(nullptr);
  for (auto& var : env_) env_ptrs_.push_back(var.data());
  env_ptrs_.push_back(nullptr);
  posix_spawn_file_actions_init(&actions_);
  posix_spawn_file_actions_addopen(&actions_, 0, "/dev/null", O_RDONLY, 0);
  posix_spawn_file_actions_addopen(&actions_, 1, "/dev/null", O_WRONLY, 0);
}

Spawner::~Spawner() { posix_spawn_file_actions_destroy(&actions_); }

void Spawner::run() const {
  pid_t pid = -1;
  const int rc = posix_spawn(&pid, argv_ptrs_[0], &actions_, nullptr, argv_ptrs_.data(), env_ptrs_.data());
  if (rc != 0) throw std::runtime_error(describe() + ": posix_spawn: " + std::strerror(rc));
  int status = 0;
  while (waitpid(pid, &status, 0) < 0) {
    if (errno != EINTR) throw std::runtime_error(describe() + ": waitpid: " + std::strerror(errno));
  }
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
    throw std::runtime_error(describe() + (WIFEXITED(status) ? ": exited with " + std::to_string(WEXITSTATUS(status))
                                                             : ": killed by signal " + std::to_string(WTERMSIG(status))));
  }
}

std::string Spawner::describe() const {
  std::string text;
  for (const auto& arg : argv_) text += (text.empty() ? "" : " ") + arg;
  return text;
}

}  // namespace capsule::bench
