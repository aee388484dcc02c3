// Reaching capsuled: the per-user default paths, the detached auto-start that `capsule run` relies on (spawn,
// then poll /v1/health, reporting the log's tail if capsuled dies first), `version` and `daemon`.
#include "client/cli_daemon.h"

#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <iterator>
#include <thread>
#include <vector>

#include "client/json_read.h"
#include "install_layout.h"

#ifndef CAPSULE_VERSION
#define CAPSULE_VERSION "unknown"
#endif

extern char** environ;

namespace capsule::client {
namespace {

using nlohmann::json;
namespace fs = std::filesystem;

std::string file_tail(const std::string& path, std::size_t bytes) {
  std::ifstream file(path, std::ios::binary);
  std::string content((std::istreambuf_iterator<char>(file)), std::istreambuf_iterator<char>());
  return content.size() > bytes ? content.substr(content.size() - bytes) : content;
}

void make_parent_dir(const std::string& path) {
  std::error_code ignored;  // the daemon reports a socket directory it cannot use
  fs::create_directories(fs::path(path).parent_path(), ignored);
}

// capsuled's argv for serving `socket` from `state_dir` in the foreground.
std::vector<std::string> capsuled_args(const std::string& binary, const std::string& socket,
                                       const std::string& state_dir) {
  return {binary, "--socket", socket, "--state-dir", state_dir, "--foreground"};
}

// Starts capsuled detached (own session, stdio to a log in its state dir) and waits until it answers.
void start_daemon(const http::HttpClient& client) {
  const std::string state_dir = state_dir_for(client.socket_path());
  if (state_dir.empty()) {
    throw std::runtime_error("no daemon answers at " + client.socket_path() + ", and " +
                             unknown_state_dir_message(client.socket_path()));
  }
  const std::string binary = capsuled_path();
  if (::access(binary.c_str(), X_OK) != 0) {
    throw std::runtime_error("no daemon answers at " + client.socket_path() + " and capsuled cannot be started: " +
                             binary + ": " + std::strerror(errno));
  }
  fs::create_directories(state_dir);
  make_parent_dir(client.socket_path());
  const std::string log = state_dir + "/capsuled.log";
  const int log_fd = ::open(log.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0640);
  if (log_fd < 0) throw std::runtime_error("cannot open " + log + ": " + std::strerror(errno));

  std::vector<std::string> args = capsuled_args(binary, client.socket_path(), state_dir);
  std::vector<char*> argv;
  for (auto& arg : args) argv.push_back(arg.data());
  argv.push_back(nullptr);
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_addopen(&actions, 0, "/dev/null", O_RDONLY, 0);
  posix_spawn_file_actions_adddup2(&actions, log_fd, 1);
  posix_spawn_file_actions_adddup2(&actions, log_fd, 2);
  posix_spawnattr_t attr;
  posix_spawnattr_init(&attr);
  sigset_t none, defaults;
  sigemptyset(&none);
  sigemptyset(&defaults);
  for (int sig : {SIGINT, SIGTERM, SIGPIPE, SIGHUP}) sigaddset(&defaults, sig);
  posix_spawnattr_setsigmask(&attr, &none);
  posix_spawnattr_setsigdefault(&attr, &defaults);
  posix_spawnattr_setflags(&attr, POSIX_SPAWN_SETSID | POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF);
  pid_t pid = 0;
  const int error = posix_spawn(&pid, binary.c_str(), &actions, &attr, argv.data(), environ);
  posix_spawn_file_actions_destroy(&actions);
  posix_spawnattr_destroy(&attr);
  ::close(log_fd);
  if (error != 0) throw std::runtime_error("cannot start " + binary + ": " + std::strerror(error));

  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  std::string last_error;
  for (;;) {
    int status = 0;
    if (::waitpid(pid, &status, WNOHANG) == pid) {
      throw std::runtime_error("capsuled exited (status " + std::to_string(status) + ") before answering on " +
                               client.socket_path() + "; the end of " + log + ":\n" + file_tail(log, 600));
    }
    try {
      if (client.request("GET", "/v1/health").status == 200) break;
      last_error = "/v1/health did not answer 200";
    } catch (const std::runtime_error& e) {
      last_error = e.what();
    }
    if (std::chrono::steady_clock::now() > deadline) {
      throw std::runtime_error("capsuled (pid " + std::to_string(pid) + ") did not answer within 10 s (" + last_error +
                               "); see " + log);
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  std::cerr << "capsule: started capsuled (pid " << pid << ", socket " << client.socket_path() << ", log " << log
            << ")\n";
}

}  // namespace

const char* client_version() { return CAPSULE_VERSION; }

std::string default_socket_path() {
  if (::geteuid() == 0) return "/run/capsule/capsule.sock";
  const char* runtime = std::getenv("XDG_RUNTIME_DIR");
  if (runtime && *runtime) return std::string(runtime) + "/capsule/capsule.sock";
  return "/tmp/capsule-" + std::to_string(::geteuid()) + "/capsule.sock";
}

std::string default_state_dir() {
  const char* configured = std::getenv("CAPSULE_STATE_DIR");
  if (configured && *configured) return configured;
  if (::geteuid() == 0) return "/var/lib/capsule";
  const char* state = std::getenv("XDG_STATE_HOME");
  if (state && *state) return std::string(state) + "/capsule";
  const char* home = std::getenv("HOME");
  if (home && *home) return std::string(home) + "/.local/state/capsule";
  return "/tmp/capsule-" + std::to_string(::geteuid()) + "/state";
}

std::string state_dir_for(const std::string& socket) {
  const auto same_path = [](const std::string& a, const std::string& b) {
    return fs::absolute(a).lexically_normal() == fs::absolute(b).lexically_normal();
  };
  const char* configured = std::getenv("CAPSULE_STATE_DIR");
  if ((configured && *configured) || same_path(socket, default_socket_path())) return default_state_dir();
  return {};
}

std::string unknown_state_dir_message(const std::string& socket) {
  return "the state directory of a capsuled on " + socket + " is not known: capsule uses " + default_state_dir() +
         " only with the default socket (" + default_socket_path() + ") or $CAPSULE_STATE_DIR set. Start one with "
         "`capsule --socket " + socket + " daemon --state-dir DIR`, or set CAPSULE_STATE_DIR=DIR";
}

std::string capsuled_path() {
  return install_layout::beside_this_executable(kCapsuledFromThisCli);
}

void ensure_daemon(const http::HttpClient& client) {
  try {
    client.probe();
    return;
  } catch (const http::ConnectError& e) {
    if (!e.nobody_listening()) throw;
  }
  start_daemon(client);
}

int cmd_version(const std::string& socket) {
  std::cout << "capsule " << client_version() << "\n";
  const json version = http::request_json(http::HttpClient(socket), "GET", "/v1/version");
  std::string features;
  const json listed = version.value("features", json::array());
  for (const auto& [key, value] : listed.items()) {
    std::string name = listed.is_object() ? key : value.is_string() ? value.get<std::string>() : value.dump();
    if (listed.is_object() && value != true) name += "=" + (value.is_string() ? value.get<std::string>() : value.dump());
    if (!listed.is_object() || value != false) features += (features.empty() ? "" : ", ") + name;
  }
  std::string cgroup = text(version, "cgroup_version");
  if (!cgroup.empty() && cgroup[0] != 'v') cgroup = "v" + cgroup;
  std::cout << "capsuled " << text(version, "version") << " (api " << text(version, "api") << ", kernel "
            << text(version, "kernel") << ", cgroup " << cgroup
            << (features.empty() ? "" : ", features: " + features) << ") at " << socket << "\n";
  return 0;
}

int cmd_daemon(const std::string& socket, const std::string& state_dir) {
  const std::string binary = capsuled_path();
  fs::create_directories(state_dir);
  make_parent_dir(socket);
  std::vector<std::string> args = capsuled_args(binary, socket, state_dir);
  std::vector<char*> argv;
  for (auto& arg : args) argv.push_back(arg.data());
  argv.push_back(nullptr);
  ::execv(binary.c_str(), argv.data());
  throw std::runtime_error("cannot run " + binary + ": " + std::strerror(errno));
}

}  // namespace capsule::client
