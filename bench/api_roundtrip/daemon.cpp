// The capsuled under test (see daemon.h): forked with PR_SET_PDEATHSIG so it never outlives the benchmark, its
// output kept in a log whose tail is printed when it fails to start.
#include "api_roundtrip/daemon.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <stdexcept>
#include <thread>

#include "api_roundtrip/proc_readings.h"
#include "support/fail.h"
#include "support/stats.h"

namespace capsule::bench::api_roundtrip {

using nlohmann::json;

Daemon::Daemon(const std::string& binary, const std::string& dir, const std::vector<std::string>& extra)
    : socket_(dir + "/s.sock"), log_(dir + "/capsuled.log") {
  std::vector<std::string> args = {binary, "--socket", socket_, "--state-dir", dir + "/state",
                                   "--max-concurrent", "16", "--max-queue", "4096"};
  args.insert(args.end(), extra.begin(), extra.end());
  command_ = args;
  pid_ = fork();
  if (pid_ < 0) die(std::string("fork: ") + std::strerror(errno));
  if (pid_ == 0) {
    prctl(PR_SET_PDEATHSIG, SIGTERM);
    const int fd = open(log_.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (fd >= 0) {
      dup2(fd, 1);
      dup2(fd, 2);
    }
    std::vector<char*> argv;
    for (const auto& arg : args) argv.push_back(const_cast<char*>(arg.c_str()));
    argv.push_back(nullptr);
    execv(argv[0], argv.data());
    _exit(127);
  }
}

double Daemon::wait_healthy() {
  const auto start = Clock::now();
  http::HttpClient client(socket_);
  for (;;) {
    int status = 0;
    if (waitpid(pid_, &status, WNOHANG) == pid_) {
      pid_ = -1;
      die("capsuled exited during start-up; its log:\n" + log_tail());
    }
    try {
      if (client.request("GET", "/v1/health").status == 200) return ms_since(start);
    } catch (const std::exception&) {
      // not listening yet
    }
    if (ms_since(start) > 30000) die("capsuled did not answer /v1/health within 30 s; its log:\n" + log_tail());
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
}

std::string Daemon::stop() {
  if (pid_ <= 0) return "not running";
  kill(pid_, SIGTERM);
  const auto start = Clock::now();
  int status = 0;
  while (waitpid(pid_, &status, WNOHANG) == 0) {
    if (ms_since(start) > 60000) {
      kill(pid_, SIGKILL);
      waitpid(pid_, &status, 0);
      break;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  pid_ = -1;
  char text[96];
  if (WIFEXITED(status)) std::snprintf(text, sizeof text, "exited %d after %.0f ms", WEXITSTATUS(status), ms_since(start));
  else std::snprintf(text, sizeof text, "killed by signal %d", WTERMSIG(status));
  return text;
}

std::string Daemon::log_tail() const {
  const std::string text = read_text(log_);
  return text.size() > 4000 ? text.substr(text.size() - 4000) : text;
}

std::string Daemon::describe() const {
  std::string text;
  for (const auto& word : command_) text += (text.empty() ? "" : " ") + word;
  return text;
}

json capsule_true(const http::HttpClient& client) {
  static const json body = {{"argv", {"true"}}};
  const auto response = client.request("POST", "/v1/runs?wait=true", body);
  if (response.status != 200) {
    throw std::runtime_error("POST /v1/runs?wait=true: " + std::to_string(response.status) + " " + response.body);
  }
  json row = json::parse(response.body);
  if (row.value("state", "") != "succeeded" || row["result"].value("exit_code", -1) != 0) {
    throw std::runtime_error("run did not succeed: " + response.body.substr(0, 2000));
  }
  return row;
}

}  // namespace capsule::bench::api_roundtrip
