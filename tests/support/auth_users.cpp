// Test users for the authorization tests: real accounts made with useradd/groupadd, and requests sent from
// a child process that took on a user's uid, gid and groups, exactly as a logged-in user's client would.
#include "tests/support/auth_users.h"

#include <fcntl.h>
#include <grp.h>
#include <pwd.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <iostream>
#include <random>
#include <stdexcept>

#include "http/unix_client.h"

namespace capsule::testing {
namespace {

// ctest runs test processes side by side, and shadow's tools give up at once ("cannot lock /etc/group; try
// again later") when another holds its lock: every account change of every test process takes this lock first.
// /run/lock where the machine has it (a minimal container may not), else /tmp; never through a planted symlink.
std::string accounts_lock_path() {
  struct stat st {};
  const bool run_lock = ::stat("/run/lock", &st) == 0 && S_ISDIR(st.st_mode);
  return std::string(run_lock ? "/run/lock" : "/tmp") + "/capsule-test-accounts.lock";
}

// Runs `command` under the accounts lock; "" on success, else its output (for the failure message).
std::string run(const std::string& command) {
  static const std::string lock_path = accounts_lock_path();
  const int lock = open(lock_path.c_str(), O_RDWR | O_CREAT | O_NOFOLLOW | O_CLOEXEC, 0600);
  if (lock < 0) return lock_path + ": " + std::strerror(errno);
  while (flock(lock, LOCK_EX) != 0 && errno == EINTR) {
  }
  std::string output;
  FILE* pipe = popen((command + " 2>&1").c_str(), "r");
  if (pipe == nullptr) {
    close(lock);
    return command + ": popen failed";
  }
  char buffer[512];
  while (fgets(buffer, sizeof buffer, pipe) != nullptr) output += buffer;
  const int status = pclose(pipe);
  close(lock);
  return status == 0 ? std::string() : command + ": " + (output.empty() ? "failed" : output);
}

// Teardown goes on past a failed removal, but says so: a leftover account is a leak.
void report(const std::string& error) {
  if (!error.empty()) std::cerr << "test account not removed: " << error << std::flush;
}

}  // namespace

std::string account_name(const std::string& base) {
  // pid alone repeats within one CI run (pid_max 32768), and a run killed before its teardown leaves its names.
  static const std::string suffix = [] {
    char token[8];
    std::snprintf(token, sizeof token, "%04x", static_cast<unsigned>(std::random_device()() & 0xffff));
    return "-" + std::to_string(::getpid()) + "-" + token;
  }();
  return base + suffix;
}

gid_t create_group(const std::string& name) {
  remove_group(name);
  if (const std::string error = run("groupadd " + name); !error.empty()) throw std::runtime_error(error);
  const group* entry = getgrnam(name.c_str());
  if (entry == nullptr) throw std::runtime_error("group " + name + " was not created");
  return entry->gr_gid;
}

TestUser create_user(const std::string& name, const std::string& primary, const std::vector<std::string>& extra) {
  remove_user(name);
  std::string command = "useradd --no-create-home --shell /usr/sbin/nologin --gid " + primary;
  std::string list;
  for (const auto& group : extra) list += (list.empty() ? "" : ",") + group;
  if (!list.empty()) command += " --groups " + list;
  if (const std::string error = run(command + " " + name); !error.empty()) throw std::runtime_error(error);
  const passwd* entry = getpwnam(name.c_str());
  if (entry == nullptr) throw std::runtime_error("user " + name + " was not created");
  TestUser user{name, entry->pw_uid, entry->pw_gid, {}};
  user.groups.push_back(entry->pw_gid);
  for (const auto& group : extra) user.groups.push_back(getgrnam(group.c_str())->gr_gid);
  return user;
}

void remove_user(const std::string& name) {
  if (getpwnam(name.c_str()) != nullptr) report(run("userdel " + name));
}

void remove_group(const std::string& name) {
  if (getgrnam(name.c_str()) != nullptr) report(run("groupdel " + name));
}

nlohmann::json UserCall::json() const {
  nlohmann::json parsed = nlohmann::json::parse(body, nullptr, false);
  return parsed.is_discarded() ? nlohmann::json() : parsed;
}

UserCall call_as(const TestUser& user, const std::string& socket_path, const std::string& method,
                 const std::string& target, const nlohmann::json& body) {
  int channel[2];
  if (pipe2(channel, O_CLOEXEC) != 0) throw std::runtime_error(std::string("pipe2: ") + std::strerror(errno));
  const pid_t pid = fork();
  if (pid < 0) throw std::runtime_error(std::string("fork: ") + std::strerror(errno));
  if (pid == 0) {
    close(channel[0]);
    nlohmann::json out;
    if (setgroups(user.groups.size(), user.groups.data()) != 0 || setgid(user.gid) != 0 || setuid(user.uid) != 0) {
      out["failure"] = std::string("taking on the ids of ") + user.name + ": " + std::strerror(errno);
    } else {
      try {
        const http::HttpResponse response = http::HttpClient(socket_path).request(method, target, body);
        out["status"] = response.status;
        out["body"] = response.body;
      } catch (const http::ConnectError& e) {
        out["connect_errno"] = e.error();
      } catch (const std::exception& e) {
        out["failure"] = e.what();
      }
    }
    const std::string text = out.dump();
    std::size_t done = 0;
    while (done < text.size()) {
      const ssize_t n = write(channel[1], text.data() + done, text.size() - done);
      if (n <= 0) break;
      done += static_cast<std::size_t>(n);
    }
    _exit(0);
  }
  close(channel[1]);
  std::string text;
  char buffer[65536];
  for (;;) {
    const ssize_t n = read(channel[0], buffer, sizeof buffer);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    text.append(buffer, static_cast<std::size_t>(n));
  }
  close(channel[0]);
  int status = 0;
  while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  UserCall call;
  const nlohmann::json out = nlohmann::json::parse(text, nullptr, false);
  if (out.is_discarded()) {
    call.failure = "the child sent no answer";
    return call;
  }
  call.connect_errno = out.value("connect_errno", 0);
  call.status = out.value("status", 0);
  call.body = out.value("body", "");
  call.failure = out.value("failure", "");
  return call;
}

}  // namespace capsule::testing
