// The fixture of the capsuled integration tests: a real capsuled process on a temp dir, talked to over its Unix
// socket, and the host inspection (cgroups, processes, mounts) that checks it leaves nothing behind.
#pragma once

#include <gtest/gtest.h>
#include <sys/types.h>

#include <chrono>
#include <filesystem>
#include <functional>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "http/unix_client.h"
#include "tests/support/test_support.h"

namespace capsule::testing {

namespace fs = std::filesystem;
using namespace std::chrono_literals;
using http::HttpClient;
using http::HttpResponse;
using nlohmann::json;

// ---- Files.
void write_file(const fs::path& path, const std::string& content);
// Relative path -> mode, owner and content of everything below `root`: equal snapshots, untouched tree.
std::map<std::string, std::string> snapshot_tree(const fs::path& root);

// ---- The host: cgroups, processes, mounts.
// The capsule CLI as a test runs it: exit status and captured output.
struct Cli {
  int code = -1;
  std::string out, err;
};
// Runs `command` with sh; a test failure unless it exits 0.
void sh_ok(const std::string& command);
// arg in single quotes for sh.
std::string shell_quoted(const std::string& arg);
// Runs `env ENV... <build>/bin/capsule ARGS...` through sh, stdin from stdin_file, stdout and stderr captured in
// files under dir (cli.out, cli.err).
Cli run_capsule_cli(const fs::path& dir, const std::vector<std::string>& args, const std::vector<std::string>& env = {},
                    const std::string& stdin_file = "/dev/null");

bool cgroup_v1();
// The cgroup parent's directory in each hierarchy the daemon uses.
std::vector<fs::path> cgroup_parent_dirs(const std::string& parent);
std::vector<std::string> subdirectories(const fs::path& dir);

struct ProcessInfo {
  pid_t pid = 0;
  std::string comm;
  char state = '?';
  std::string start_time;  // field 22 of /proc/<pid>/stat: tells a reused pid apart
};
std::optional<ProcessInfo> process_info(pid_t pid);
// True when `process` still runs (the same process, not a zombie).
bool still_running(const ProcessInfo& process);
// Live (not zombie) processes in any cgroup below `parent`, in any hierarchy.
std::vector<ProcessInfo> processes_in_cgroups_of(const std::string& parent);
// Mount points at or below `dir` in this mount namespace.
std::vector<std::string> mounts_below(const fs::path& dir);

// ---- HTTP.
json body_json(const HttpResponse& response);
// An error body: {"error": {"code", "message"}} and nothing else, with `code`, the message containing `part`.
void expect_error_body(const std::string& text, const std::string& code, const std::string& part);
// expect_error_body() of a JSON answer with `status`.
void expect_error(const HttpResponse& response, int status, const std::string& code, const std::string& part);

struct RawResponse {
  int status = 0;
  std::string head;  // status line and headers
  std::string body;
};
// Sends exact bytes (what HttpClient cannot send, e.g. a body that is not JSON) and reads until the daemon
// closes the connection (so send "Connection: close").
RawResponse raw_request(const std::string& socket_path, const std::string& bytes);
// A connection of its own to the daemon's socket, reads timing out after `timeout_s`; -1 (and a test failure)
// when it cannot connect. The caller closes it.
int connect_to(const std::string& socket_path, int timeout_s);

// Polls `predicate` every 20 ms until it holds or `limit` passes; its last value.
template <typename Predicate>
bool eventually(Predicate predicate, std::chrono::milliseconds limit = 30s) {
  const auto deadline = std::chrono::steady_clock::now() + limit;
  while (std::chrono::steady_clock::now() < deadline) {
    if (predicate()) return true;
    std::this_thread::sleep_for(20ms);
  }
  return predicate();
}

bool is_finished(const std::string& state);
// A RunSpec body running `script` with sh -c.
json sh(const std::string& script);
// Copies `binary` and the shared libraries ldd lists for it into `root`, at the same paths (a rootfs to import).
void copy_with_libraries(const std::string& binary, const fs::path& root);

// One temp dir (0711) per test; capsuled is started on it by the test, with the flags it needs. TearDown stops
// it and checks that its cgroups, sandbox processes and mounts are gone.
class Capsuled : public ::testing::Test {
 protected:
  void SetUp() override;
  void TearDown() override;

  // Starts capsuled with `flags` (kept for restart()) and waits until it answers.
  void start(std::vector<std::string> flags = {});
  void restart() { start(flags_); }
  // SIGTERM; expects a clean exit.
  void stop();
  // SIGKILL, as in a crash.
  void kill9();
  // Waits for the daemon (already signalled) to exit; its exit code.
  int wait_daemon_exit();

  HttpClient client() const { return HttpClient(socket_); }
  HttpResponse call(const std::string& method, const std::string& target, const json& body = nullptr,
                    const http::Headers& headers = {}) const;
  // POST /v1/runs expecting 202 {"id", "state": "queued"}; the id.
  std::string submit(const json& spec) const;
  // POST /v1/runs?wait=true expecting 200; the finished run object.
  json run_and_wait(const json& spec) const;
  json get_run(const std::string& id) const;
  // The runs GET /v1/runs`query` lists (first page).
  json list(const std::string& query = "") const;
  json health() const;
  // Polls GET /v1/runs/{id} until `predicate(run)` holds (a failure after `limit`); the last run object seen.
  json wait_for_run(const std::string& id, const std::function<bool(const json&)>& predicate,
                    std::chrono::milliseconds limit = 60s) const;
  json wait_finished(const std::string& id) const;
  json wait_running(const std::string& id) const;

  // Live processes named `comm` in this daemon's sandboxes.
  std::vector<ProcessInfo> sandbox_processes(const std::string& comm) const;
  // A new host directory below the test dir, mode 0755.
  fs::path make_dir(const std::string& name) const;

  fs::path dir_;
  std::string socket_;
  fs::path state_;
  std::string parent_;  // the daemon's cgroup parent
  pid_t daemon_ = -1;

 private:
  fs::path capsuled_;
  std::vector<std::string> flags_;
};

}  // namespace capsule::testing
