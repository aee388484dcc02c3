// The capsuled integration fixture: spawning and stopping the daemon, HTTP helpers, and reading /proc and
// /sys/fs/cgroup to check what the daemon leaves behind.
#include "tests/support/capsuled_fixture.h"

#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <cstring>
#include <fstream>
#include <iostream>
#include <cstdio>
#include <set>
#include <sstream>

#include "daemon/config.h"

extern char** environ;

namespace capsule::testing {
namespace {

pid_t spawn(const std::vector<std::string>& args, const fs::path& log) {
  std::vector<std::string> copy = args;
  std::vector<char*> argv;
  for (auto& arg : copy) argv.push_back(arg.data());
  argv.push_back(nullptr);
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_addopen(&actions, 0, "/dev/null", O_RDONLY, 0);
  posix_spawn_file_actions_addopen(&actions, 1, log.c_str(), O_WRONLY | O_CREAT | O_APPEND, 0644);
  posix_spawn_file_actions_adddup2(&actions, 1, 2);
  pid_t pid = -1;
  const int error = posix_spawn(&pid, argv[0], &actions, nullptr, argv.data(), environ);
  posix_spawn_file_actions_destroy(&actions);
  EXPECT_EQ(error, 0) << args[0] << ": " << std::strerror(error);
  return error == 0 ? pid : -1;
}

// The exit code (128 + signal when killed); -1 after killing a process that outlived `limit`.
int wait_exit(pid_t pid, std::chrono::milliseconds limit) {
  const auto deadline = std::chrono::steady_clock::now() + limit;
  int status = 0;
  while (::waitpid(pid, &status, WNOHANG) == 0) {
    if (std::chrono::steady_clock::now() > deadline) {
      ADD_FAILURE() << "pid " << pid << " did not exit within " << limit.count() << " ms; killing it";
      ::kill(pid, SIGKILL);
      ::waitpid(pid, &status, 0);
      return -1;
    }
    std::this_thread::sleep_for(10ms);
  }
  return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

}  // namespace

void write_file(const fs::path& path, const std::string& content) {
  std::ofstream file(path, std::ios::binary | std::ios::trunc);
  file << content;
  file.close();
  EXPECT_TRUE(file.good()) << "cannot write " << path;
}

std::map<std::string, std::string> snapshot_tree(const fs::path& root) {
  std::map<std::string, std::string> files;
  for (const auto& entry : fs::recursive_directory_iterator(root)) {
    struct stat st {};
    ::lstat(entry.path().c_str(), &st);
    const std::string meta =
        std::to_string(st.st_mode) + ":" + std::to_string(st.st_uid) + ":" + std::to_string(st.st_gid);
    files[fs::relative(entry.path(), root).string()] =
        meta + "\n" + (entry.is_regular_file() ? slurp(entry.path()) : std::string());
  }
  return files;
}

void sh_ok(const std::string& command) { ASSERT_EQ(std::system(command.c_str()), 0) << command; }

std::string shell_quoted(const std::string& arg) {
  std::string out = "'";
  for (const char c : arg) out += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return out + "'";
}

Cli run_capsule_cli(const fs::path& dir, const std::vector<std::string>& args, const std::vector<std::string>& env,
                    const std::string& stdin_file) {
  std::string command = "env";
  for (const std::string& item : env) command += " " + shell_quoted(item);
  command += " " + shell_quoted(std::string(CAPSULE_BIN_DIR) + "/capsule");
  for (const std::string& arg : args) command += " " + shell_quoted(arg);
  command += " <" + shell_quoted(stdin_file) + " >" + shell_quoted((dir / "cli.out").string()) + " 2>" +
             shell_quoted((dir / "cli.err").string());
  const int status = std::system(command.c_str());
  return {WIFEXITED(status) ? WEXITSTATUS(status) : -1, slurp(dir / "cli.out"), slurp(dir / "cli.err")};
}

bool cgroup_v1() { return fs::exists("/sys/fs/cgroup/memory/cgroup.procs"); }

std::vector<fs::path> cgroup_parent_dirs(const std::string& parent) {
  if (!cgroup_v1()) return {fs::path("/sys/fs/cgroup") / parent};
  std::vector<fs::path> dirs;
  for (const char* controller : {"memory", "pids", "cpu", "cpuacct", "freezer", "cpuset"}) {
    if (fs::exists(fs::path("/sys/fs/cgroup") / controller / "cgroup.procs"))
      dirs.push_back(fs::path("/sys/fs/cgroup") / controller / parent);
  }
  return dirs;
}

std::vector<std::string> subdirectories(const fs::path& dir) {
  std::vector<std::string> names;
  std::error_code ec;
  for (auto it = fs::directory_iterator(dir, ec); !ec && it != fs::directory_iterator(); it.increment(ec)) {
    if (it->is_directory()) names.push_back(it->path().filename().string());
  }
  return names;
}

std::optional<ProcessInfo> process_info(pid_t pid) {
  const std::string stat = slurp("/proc/" + std::to_string(pid) + "/stat");
  const auto open = stat.find('(');
  const auto close = stat.rfind(')');
  if (open == std::string::npos || close == std::string::npos || close + 2 >= stat.size()) return std::nullopt;
  ProcessInfo info;
  info.pid = pid;
  info.comm = stat.substr(open + 1, close - open - 1);
  info.state = stat[close + 2];
  std::istringstream fields(stat.substr(close + 2));  // from field 3 (state) on
  std::string field;
  for (int i = 3; i <= 22 && fields >> field; ++i) {
    if (i == 22) info.start_time = field;
  }
  return info;
}

bool still_running(const ProcessInfo& process) {
  const auto now = process_info(process.pid);
  return now && now->start_time == process.start_time && now->state != 'Z';
}

std::vector<ProcessInfo> processes_in_cgroups_of(const std::string& parent) {
  std::vector<ProcessInfo> found;
  for (const auto& entry : fs::directory_iterator("/proc")) {
    const std::string name = entry.path().filename().string();
    if (name.empty() || name.find_first_not_of("0123456789") != std::string::npos) continue;
    std::istringstream lines(slurp(entry.path() / "cgroup"));
    bool inside = false;
    for (std::string line; std::getline(lines, line);) {  // "<id>:<controllers>:<path>"
      const std::string path = line.substr(line.find(':', line.find(':') + 1) + 1);
      if (path == "/" + parent || path.starts_with("/" + parent + "/")) inside = true;
    }
    if (!inside) continue;
    if (auto info = process_info(std::stoi(name)); info && info->state != 'Z') found.push_back(*info);
  }
  return found;
}

std::vector<std::string> mounts_below(const fs::path& dir) {
  std::vector<std::string> found;
  std::istringstream lines(slurp("/proc/self/mountinfo"));
  for (std::string line; std::getline(lines, line);) {
    std::istringstream fields(line);
    std::string id, parent, devices, root, mount_point;
    fields >> id >> parent >> devices >> root >> mount_point;
    if (mount_point == dir.string() || mount_point.starts_with(dir.string() + "/")) found.push_back(mount_point);
  }
  return found;
}

json body_json(const HttpResponse& response) {
  json parsed = json::parse(response.body, nullptr, false);
  EXPECT_FALSE(parsed.is_discarded()) << "not JSON: " << response.body;
  return parsed;
}

void expect_error_body(const std::string& text, const std::string& code, const std::string& part) {
  const json body = json::parse(text, nullptr, false);
  ASSERT_TRUE(body.is_object() && body.size() == 1 && body.contains("error")) << text;
  const json& error = body["error"];
  ASSERT_TRUE(error.is_object() && error.size() == 2) << text;
  ASSERT_TRUE(error["code"].is_string() && error["message"].is_string()) << text;
  EXPECT_EQ(error["code"], code) << text;
  EXPECT_FALSE(error["message"].get<std::string>().empty()) << text;
  EXPECT_NE(error["message"].get<std::string>().find(part), std::string::npos)
      << "the message should mention '" << part << "': " << text;
}

void expect_error(const HttpResponse& response, int status, const std::string& code, const std::string& part) {
  EXPECT_EQ(response.status, status) << response.body;
  EXPECT_EQ(response.headers.count("content-type") ? response.headers.at("content-type") : "", "application/json");
  expect_error_body(response.body, code, part);
}

int connect_to(const std::string& socket_path, int timeout_s) {
  const int fd = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_un address{};
  address.sun_family = AF_UNIX;
  socket_path.copy(address.sun_path, sizeof address.sun_path - 1);
  timeval timeout{timeout_s, 0};
  ::setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &timeout, sizeof timeout);
  if (::connect(fd, reinterpret_cast<const sockaddr*>(&address), sizeof address) != 0) {
    ADD_FAILURE() << "connect " << socket_path << ": " << std::strerror(errno);
    ::close(fd);
    return -1;
  }
  return fd;
}

RawResponse raw_request(const std::string& socket_path, const std::string& bytes) {
  RawResponse out;
  const int fd = connect_to(socket_path, 30);
  if (fd < 0) return out;
  EXPECT_EQ(::send(fd, bytes.data(), bytes.size(), MSG_NOSIGNAL), static_cast<ssize_t>(bytes.size()));
  std::string text;
  char buffer[4096];
  for (ssize_t n; (n = ::recv(fd, buffer, sizeof buffer, 0)) > 0;) text.append(buffer, static_cast<std::size_t>(n));
  ::close(fd);
  const auto end = text.find("\r\n\r\n");
  if (end == std::string::npos || !text.starts_with("HTTP/1.1 ") || text.size() < 12) {
    ADD_FAILURE() << "no HTTP response: '" << text << "'";
    return out;
  }
  out.status = std::stoi(text.substr(9, 3));
  out.head = text.substr(0, end);
  out.body = text.substr(end + 4);
  return out;
}

bool is_finished(const std::string& state) { return state != "queued" && state != "running"; }

json sh(const std::string& script) { return json{{"argv", {"sh", "-c", script}}}; }

// ---------------------------------------------------------------------------------------------------------
// Capsuled

void Capsuled::SetUp() {
  capsuled_ = fs::path(CAPSULE_BIN_DIR) / "capsuled";
  ASSERT_TRUE(fs::exists(capsuled_)) << capsuled_ << " is not built";
  char pattern[] = "/tmp/capsuled-test-XXXXXX";
  ASSERT_NE(::mkdtemp(pattern), nullptr) << std::strerror(errno);
  dir_ = pattern;
  ASSERT_EQ(::chmod(dir_.c_str(), 0711), 0);  // sandboxes run as unprivileged ids and walk through it
  socket_ = (dir_ / "s.sock").string();
  state_ = dir_ / "state";
  parent_ = daemon::cgroup_parent_for(state_.string());
}

void Capsuled::TearDown() {
  if (dir_.empty()) return;
  if (daemon_ > 0) stop();
  for (const fs::path& dir : cgroup_parent_dirs(parent_)) EXPECT_FALSE(fs::exists(dir)) << dir << " is left behind";
  for (const auto& process : processes_in_cgroups_of(parent_)) {
    ADD_FAILURE() << "process " << process.pid << " (" << process.comm << ") of the daemon's sandboxes remains";
  }
  const std::vector<std::string> mounts = mounts_below(dir_);
  for (const auto& mount : mounts) ADD_FAILURE() << "mount left under the test dir: " << mount;
  if (HasFailure()) std::cerr << "---- capsuled log ----\n" << slurp(dir_ / "capsuled.log") << "----\n";
  std::error_code ignored;
  if (mounts.empty()) fs::remove_all(dir_, ignored);
}

void Capsuled::start(std::vector<std::string> flags) {
  flags_ = std::move(flags);
  std::vector<std::string> args = {capsuled_.string(), "--socket", socket_, "--state-dir", state_.string()};
  args.insert(args.end(), flags_.begin(), flags_.end());
  daemon_ = spawn(args, dir_ / "capsuled.log");
  ASSERT_GT(daemon_, 0);
  const bool up = eventually([&] {
    try {
      return client().request("GET", "/v1/health").status == 200;
    } catch (const std::exception&) {
      return false;
    }
  });
  ASSERT_TRUE(up) << "capsuled did not answer on " << socket_;
}

int Capsuled::wait_daemon_exit() {
  const int code = wait_exit(daemon_, 60s);
  daemon_ = -1;
  return code;
}

void Capsuled::stop() {
  ::kill(daemon_, SIGTERM);
  EXPECT_EQ(wait_daemon_exit(), 0) << "capsuled did not stop cleanly";
}

void Capsuled::kill9() {
  ::kill(daemon_, SIGKILL);
  EXPECT_EQ(wait_daemon_exit(), 128 + SIGKILL);
}

HttpResponse Capsuled::call(const std::string& method, const std::string& target, const json& body,
                            const http::Headers& headers) const {
  return client().request(method, target, body, headers);
}

std::string Capsuled::submit(const json& spec) const {
  const HttpResponse response = call("POST", "/v1/runs", spec);
  EXPECT_EQ(response.status, 202) << response.body;
  const json body = body_json(response);
  EXPECT_EQ(body["state"], "queued") << response.body;
  return body.value("id", std::string());
}

json Capsuled::run_and_wait(const json& spec) const {
  const HttpResponse response = call("POST", "/v1/runs?wait=true", spec);
  EXPECT_EQ(response.status, 200) << response.body;
  return body_json(response);
}

json Capsuled::get_run(const std::string& id) const {
  const HttpResponse response = call("GET", "/v1/runs/" + id);
  EXPECT_EQ(response.status, 200) << response.body;
  return body_json(response);
}

json Capsuled::list(const std::string& query) const {
  const HttpResponse response = call("GET", "/v1/runs" + query);
  EXPECT_EQ(response.status, 200) << response.body;
  return body_json(response)["runs"];
}

json Capsuled::health() const { return body_json(call("GET", "/v1/health")); }

json Capsuled::wait_for_run(const std::string& id, const std::function<bool(const json&)>& predicate,
                            std::chrono::milliseconds limit) const {
  json run;
  const bool reached = eventually([&] {
    run = get_run(id);
    return predicate(run);
  }, limit);
  EXPECT_TRUE(reached) << "run " << id << " did not get there; last seen: " << run.dump();
  return run;
}

json Capsuled::wait_finished(const std::string& id) const {
  return wait_for_run(id, [](const json& run) { return is_finished(run.value("state", "")); });
}

json Capsuled::wait_running(const std::string& id) const {
  return wait_for_run(id, [](const json& run) { return run.value("state", "") == "running"; });
}

std::vector<ProcessInfo> Capsuled::sandbox_processes(const std::string& comm) const {
  std::vector<ProcessInfo> found;
  for (const auto& process : processes_in_cgroups_of(parent_)) {
    if (process.comm == comm) found.push_back(process);
  }
  return found;
}

void copy_with_libraries(const std::string& binary, const fs::path& root) {
  std::set<std::string> files = {binary};
  FILE* ldd = popen(("ldd " + binary).c_str(), "r");
  ASSERT_NE(ldd, nullptr);
  char line[512];
  while (fgets(line, sizeof line, ldd) != nullptr) {
    std::istringstream words(line);
    for (std::string word; words >> word;) {
      if (word.front() == '/') files.insert(word);
    }
  }
  pclose(ldd);
  for (const std::string& file : files) {
    const fs::path real = fs::canonical(file);
    fs::create_directories(root / fs::path(file).relative_path().parent_path());
    fs::copy_file(real, root / fs::path(file).relative_path(), fs::copy_options::overwrite_existing);
  }
}

fs::path Capsuled::make_dir(const std::string& name) const {
  const fs::path path = dir_ / name;
  fs::create_directories(path);
  fs::permissions(path, fs::perms::owner_all | fs::perms::group_read | fs::perms::group_exec |
                            fs::perms::others_read | fs::perms::others_exec);
  return path;
}

}  // namespace capsule::testing
