// The in-memory cgroup v2 tree used by the v2 back-end tests: interface files, controller delegation,
// process membership, cgroup.kill/freeze and the kernel's validation of limit values.
#include "tests/sandbox/fake_cgroupfs.h"

#include <signal.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <charconv>
#include <climits>
#include <stdexcept>

#include "sandbox/error.h"

namespace capsule::testing {
namespace {

constexpr std::uint64_t kPageSize = 4096;
constexpr long long kPidsMax = 4'194'304;  // PID_MAX_LIMIT on 64-bit
constexpr std::uint64_t kMinCfsUs = 1'000, kMaxCfsPeriodUs = 1'000'000, kMaxCfsQuotaUs = (1ULL << 44) - 1;
const std::set<std::string> kKnownControllers{"cpuset", "cpu", "io", "memory", "hugetlb", "pids", "rdma", "misc"};
const std::string kEvents = "low 0\nhigh 0\nmax 0\noom 0\noom_kill 0\noom_group_kill 0\n";

[[noreturn]] void fail(int err, const std::string& path, const std::string& value) {
  errno = err;
  sandbox::throw_errno("cgroup", path, "writing '" + value + "'");
}

std::string strip(const std::string& text) {
  const auto first = text.find_first_not_of(" \t\n");
  if (first == std::string::npos) return "";
  return text.substr(first, text.find_last_not_of(" \t\n") - first + 1);
}

bool parse_u64(const std::string& text, std::uint64_t& value) {
  auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
  return !text.empty() && ec == std::errc() && end == text.data() + text.size();
}

// kstrtoint/kstrtoll: 0 or the errno (EINVAL for junk, ERANGE for overflow).
int parse_int(const std::string& text, long long limit, long long& value) {
  auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (text.empty() || end != text.data() + text.size() || ec == std::errc::invalid_argument) return EINVAL;
  if (ec == std::errc::result_out_of_range || value > limit || value < -limit - 1) return ERANGE;
  return 0;
}

// page_counter_memparse(): "max" or a byte count with an optional K/M/G/T suffix, stored in pages.
bool memparse(const std::string& text, std::string& stored) {
  if (text == "max") return (stored = "max\n"), true;
  std::size_t digits = 0;
  while (digits < text.size() && text[digits] >= '0' && text[digits] <= '9') ++digits;
  std::uint64_t bytes = 0;
  if (!parse_u64(text.substr(0, digits), bytes) || text.size() > digits + 1) return false;
  if (text.size() == digits + 1) {
    const std::string units = "kmgt";
    const auto unit = units.find(static_cast<char>(std::tolower(static_cast<unsigned char>(text.back()))));
    if (unit == std::string::npos) return false;
    bytes <<= 10 * (unit + 1);
  }
  stored = std::to_string(bytes / kPageSize * kPageSize) + "\n";
  return true;
}

std::pair<std::string, std::string> split_last(const std::string& path) {
  const auto slash = path.rfind('/');
  if (slash == std::string::npos) return {"", path};
  return {path.substr(0, slash), path.substr(slash + 1)};
}

bool harmless(int signo) {
  return signo == 0 || signo == SIGCHLD || signo == SIGCONT || signo == SIGURG || signo == SIGWINCH ||
         signo == SIGSTOP || signo == SIGTSTP || signo == SIGTTIN || signo == SIGTTOU;
}

}  // namespace

FakeCgroupFs::FakeCgroupFs(std::string root, FakeKernel kernel) : root_(std::move(root)), kernel_(std::move(kernel)) {
  Dir& top = dirs_[root_];
  for (const char* name : {"cgroup.controllers", "cgroup.max.depth", "cgroup.max.descendants", "cgroup.procs",
                           "cgroup.stat", "cgroup.subtree_control", "cgroup.threads", "cpu.stat"})
    top.files[name] = "";
  top.files["cgroup.max.depth"] = top.files["cgroup.max.descendants"] = "max\n";
  top.files["cgroup.stat"] = "nr_descendants 0\nnr_dying_descendants 0\n";
  top.files["cpu.stat"] = "usage_usec 0\nuser_usec 0\nsystem_usec 0\n";
  for (const std::string& controller : kernel_.root_subtree_control) top.subtree_control.insert(controller);
}

FakeCgroupFs::Dir* FakeCgroupFs::dir_at(const std::string& path) {
  auto it = dirs_.find(path);
  return it == dirs_.end() ? nullptr : &it->second;
}

const FakeCgroupFs::Dir* FakeCgroupFs::dir_at(const std::string& path) const {
  auto it = dirs_.find(path);
  return it == dirs_.end() ? nullptr : &it->second;
}

std::vector<std::string> FakeCgroupFs::available(const std::string& dir) const {
  if (dir == root_) return kernel_.controllers;
  const Dir* parent = dir_at(split_last(dir).first);
  return {parent->subtree_control.begin(), parent->subtree_control.end()};
}

std::vector<std::string> FakeCgroupFs::child_dirs(const std::string& dir) const {
  std::vector<std::string> children;
  const std::string prefix = dir + "/";
  for (auto it = dirs_.lower_bound(prefix); it != dirs_.end() && it->first.rfind(prefix, 0) == 0; ++it)
    if (it->first.find('/', prefix.size()) == std::string::npos) children.push_back(it->first);
  return children;
}

bool FakeCgroupFs::populated(const std::string& dir) const {
  return std::any_of(where_.begin(), where_.end(), [&](const auto& entry) {
    return entry.second == dir || entry.second.rfind(dir + "/", 0) == 0;
  });
}

bool FakeCgroupFs::frozen(const std::string& dir) const {
  for (std::string at = dir; at.size() >= root_.size(); at = split_last(at).first) {
    if (dir_at(at)->freeze) return true;
    if (at == root_) break;
  }
  return false;
}

std::string FakeCgroupFs::ordered(const std::set<std::string>& controllers) const {
  std::string text;
  for (const std::string& controller : kernel_.controllers)
    if (controllers.count(controller)) text += (text.empty() ? "" : " ") + controller;
  return text.empty() ? text : text + "\n";
}

void FakeCgroupFs::add_controller_files(Dir& dir, const std::string& controller) {
  std::map<std::string, std::string> files;
  if (controller == "memory") {
    files = {{"memory.current", "0\n"},  {"memory.min", "0\n"},        {"memory.low", "0\n"},
             {"memory.high", "max\n"},   {"memory.max", "max\n"},      {"memory.peak", "0\n"},
             {"memory.events", kEvents}, {"memory.events.local", kEvents}, {"memory.oom.group", "0\n"},
             {"memory.stat", "anon 0\nfile 0\n"}, {"memory.swap.current", "0\n"}, {"memory.swap.max", "max\n"},
             {"memory.swap.events", "high 0\nmax 0\nfail 0\n"}};
  } else if (controller == "pids") {
    files = {{"pids.max", "max\n"}, {"pids.current", ""}, {"pids.events", "max 0\n"}};
  } else if (controller == "cpu") {
    files = {{"cpu.max", "max 100000\n"}, {"cpu.weight", "100\n"}, {"cpu.weight.nice", "0\n"}, {"cpu.idle", "0\n"}};
  } else if (controller == "cpuset") {
    files = {{"cpuset.cpus", "\n"}, {"cpuset.mems", "\n"}, {"cpuset.cpus.effective", "0\n"}};
  } else {
    files = {{controller + ".max", "max\n"}};
  }
  for (auto& [name, contents] : files)
    if (!kernel_.missing_files.count(name)) dir.files[name] = contents;
}

void FakeCgroupFs::remove_controller_files(Dir& dir, const std::string& controller) {
  std::erase_if(dir.files, [&](const auto& entry) { return entry.first.rfind(controller + ".", 0) == 0; });
}

std::string FakeCgroupFs::read(const std::string& path) const {
  if (path == sandbox::kMountInfoPath) return kernel_.mountinfo;
  if (dir_at(path) != nullptr) {
    errno = EISDIR;
    sandbox::throw_errno("cgroup", path, "reading");
  }
  const auto [dir, name] = split_last(path);
  const Dir* at = dir_at(dir);
  if (at == nullptr || !at->files.count(name)) {
    errno = ENOENT;
    sandbox::throw_errno("cgroup", path, "reading");
  }
  if (name == "cgroup.controllers") {
    const std::vector<std::string> offered = available(dir);
    return ordered({offered.begin(), offered.end()});
  }
  if (name == "cgroup.subtree_control") return ordered(at->subtree_control);
  if (name == "cgroup.procs" || name == "cgroup.threads") {
    std::string text;
    for (const auto& [pid, cgroup] : where_)
      if (cgroup == dir) text += std::to_string(pid) + "\n";
    return text;
  }
  if (name == "cgroup.events")
    return "populated " + std::to_string(populated(dir)) + "\nfrozen " + std::to_string(frozen(dir)) + "\n";
  if (name == "pids.current") {
    const auto count = std::count_if(where_.begin(), where_.end(), [&, d = dir](const auto& entry) {
      return entry.second == d || entry.second.rfind(d + "/", 0) == 0;
    });
    return std::to_string(count) + "\n";
  }
  return at->files.at(name);
}

void FakeCgroupFs::write(const std::string& path, const std::string& value) {
  const auto [dir, name] = split_last(path);
  Dir* at = dir_at(dir);
  if (dir_at(path) != nullptr) fail(EISDIR, path, value);
  if (at == nullptr || !at->files.count(name)) fail(ENOENT, path, value);
  const std::string text = strip(value);
  long long number = 0;
  if (name == "cgroup.subtree_control") {
    write_subtree_control(path, *at, text);
  } else if (name == "cgroup.procs" || name == "cgroup.threads") {
    move_process(path, text);
  } else if (name == "cgroup.kill") {
    if (int err = parse_int(text, INT_MAX, number)) fail(err, path, value);
    if (number != 1) fail(ERANGE, path, value);
    kill_subtree(dir);
  } else if (name == "cgroup.freeze") {
    if (int err = parse_int(text, INT_MAX, number)) fail(err, path, value);
    if (number != 0 && number != 1) fail(ERANGE, path, value);
    at->freeze = number == 1;
    at->files[name] = std::to_string(number) + "\n";
  } else if (name == "memory.max" || name == "memory.high" || name == "memory.low" || name == "memory.min" ||
             name == "memory.swap.max") {
    if (!memparse(text, at->files[name])) fail(EINVAL, path, value);
  } else if (name == "memory.oom.group") {
    if (parse_int(text, INT_MAX, number) != 0 || (number != 0 && number != 1)) fail(EINVAL, path, value);
    at->files[name] = std::to_string(number) + "\n";
  } else if (name == "pids.max") {
    if (text != "max") {
      if (int err = parse_int(text, LLONG_MAX, number)) fail(err, path, value);
      if (number < 0 || number > kPidsMax) fail(EINVAL, path, value);
    }
    at->files[name] = text + "\n";
  } else if (name == "cpu.max") {
    const std::vector<std::string> words = sandbox::split_words(text);
    std::uint64_t quota = 0, period = 0;
    if (words.empty()) fail(EINVAL, path, value);
    if (!parse_u64(sandbox::split_words(at->files[name])[1], period)) fail(EIO, path, value);
    if (words.size() > 1 && !parse_u64(words[1], period)) fail(EINVAL, path, value);
    if (words[0] != "max" && !parse_u64(words[0], quota)) fail(EINVAL, path, value);
    if (period < kMinCfsUs || period > kMaxCfsPeriodUs) fail(EINVAL, path, value);
    if (words[0] != "max" && (quota < kMinCfsUs || quota > kMaxCfsQuotaUs)) fail(EINVAL, path, value);
    at->files[name] = (words[0] == "max" ? "max" : std::to_string(quota)) + " " + std::to_string(period) + "\n";
  } else if (name == "cpu.weight") {
    if (int err = parse_int(text, LLONG_MAX, number)) fail(err, path, value);
    if (number < 1 || number > 10'000) fail(ERANGE, path, value);
    at->files[name] = text + "\n";
  } else if (name == "cgroup.max.depth" || name == "cgroup.max.descendants") {
    if (text != "max" && (parse_int(text, INT_MAX, number) != 0 || number < 0)) fail(EINVAL, path, value);
    at->files[name] = text + "\n";
  } else if (name == "cpuset.cpus" || name == "cpuset.mems" || name == "cpu.idle" || name == "io.max") {
    at->files[name] = text + "\n";
  } else {
    fail(EINVAL, path, value);  // read-only interface file
  }
  journal_.push_back("write " + path + " " + value);
}

void FakeCgroupFs::write_subtree_control(const std::string& path, Dir& dir, const std::string& text) {
  const std::string cgroup = split_last(path).first;
  std::set<std::string> enable, disable;
  for (const std::string& token : sandbox::split_words(text)) {
    const std::string name = token.substr(1);
    if ((token[0] != '+' && token[0] != '-') || !kKnownControllers.count(name)) fail(EINVAL, path, text);
    (token[0] == '+' ? enable : disable).insert(name);
    (token[0] == '+' ? disable : enable).erase(name);
  }
  const std::vector<std::string> offered = available(cgroup);
  for (const std::string& name : enable)
    if (!dir.subtree_control.count(name) && std::find(offered.begin(), offered.end(), name) == offered.end())
      fail(ENOENT, path, text);
  for (const std::string& name : disable)
    for (const std::string& child : child_dirs(cgroup))
      if (dirs_.at(child).subtree_control.count(name)) fail(EBUSY, path, text);
  const bool has_processes =
      std::any_of(where_.begin(), where_.end(), [&](const auto& entry) { return entry.second == cgroup; });
  if (!enable.empty() && cgroup != root_ && has_processes) fail(EBUSY, path, text);
  for (const std::string& name : enable) {
    if (!dir.subtree_control.insert(name).second) continue;
    for (const std::string& child : child_dirs(cgroup)) add_controller_files(dirs_.at(child), name);
  }
  for (const std::string& name : disable) {
    if (dir.subtree_control.erase(name) == 0) continue;
    for (const std::string& child : child_dirs(cgroup)) remove_controller_files(dirs_.at(child), name);
  }
}

void FakeCgroupFs::move_process(const std::string& path, const std::string& text) {
  const std::string cgroup = split_last(path).first;
  long long pid = 0;
  if (parse_int(text, INT_MAX, pid) != 0 || pid < 0) fail(EINVAL, path, text);
  if (!where_.count(static_cast<pid_t>(pid))) fail(ESRCH, path, text);
  if (cgroup != root_ && !dirs_.at(cgroup).subtree_control.empty()) fail(EBUSY, path, text);
  where_[static_cast<pid_t>(pid)] = cgroup;
}

void FakeCgroupFs::kill_subtree(const std::string& dir) {
  std::erase_if(where_, [&](const auto& entry) {
    return !unkillable_.count(entry.first) && (entry.second == dir || entry.second.rfind(dir + "/", 0) == 0);
  });
}

bool FakeCgroupFs::exists(const std::string& path) const {
  if (path == sandbox::kMountInfoPath || dir_at(path) != nullptr) return true;
  const auto [dir, name] = split_last(path);
  const Dir* at = dir_at(dir);
  return at != nullptr && at->files.count(name) != 0;
}

int FakeCgroupFs::make_dir(const std::string& path) {
  const auto [parent, name] = split_last(path);
  if (exists(path)) return EEXIST;
  if (dir_at(parent) == nullptr) return exists(parent) ? ENOTDIR : ENOENT;
  if (name.empty() || name.find('\n') != std::string::npos) return EINVAL;
  Dir& dir = dirs_[path];
  for (const char* file : {"cgroup.controllers", "cgroup.events", "cgroup.kill", "cgroup.procs",
                           "cgroup.subtree_control", "cgroup.threads"})
    dir.files[file] = "";
  dir.files["cgroup.freeze"] = "0\n";
  dir.files["cgroup.max.depth"] = dir.files["cgroup.max.descendants"] = "max\n";
  dir.files["cgroup.stat"] = "nr_descendants 0\nnr_dying_descendants 0\n";
  dir.files["cgroup.type"] = "domain\n";
  dir.files["cpu.stat"] = "usage_usec 0\nuser_usec 0\nsystem_usec 0\n";
  for (const std::string& missing : kernel_.missing_files) dir.files.erase(missing);
  for (const std::string& controller : dirs_.at(parent).subtree_control) add_controller_files(dir, controller);
  return 0;
}

int FakeCgroupFs::remove_dir(const std::string& path) {
  if (dir_at(path) == nullptr) return exists(path) ? ENOTDIR : ENOENT;
  if (path == root_ || populated(path) || !child_dirs(path).empty()) return EBUSY;
  dirs_.erase(path);
  return 0;
}

std::vector<std::string> FakeCgroupFs::list_dirs(const std::string& path) const {
  std::vector<std::string> names;
  for (const std::string& child : child_dirs(path)) names.push_back(split_last(child).second);
  return names;
}

void FakeCgroupFs::signal(pid_t pid, int signo) {
  signals_.emplace_back(pid, signo);
  journal_.push_back("signal " + std::to_string(pid) + " " + std::to_string(signo));
  auto it = where_.find(pid);
  if (it == where_.end() || harmless(signo) || unkillable_.count(pid)) return;
  where_.erase(it);
}

void FakeCgroupFs::spawn(pid_t pid, const std::string& dir) {
  if (dir_at(dir) == nullptr) throw std::invalid_argument("spawn: no cgroup " + dir);
  where_[pid] = dir;
}

void FakeCgroupFs::make_unkillable(pid_t pid) { unkillable_.insert(pid); }

void FakeCgroupFs::set_file(const std::string& path, const std::string& content) {
  const auto [dir, name] = split_last(path);
  Dir* at = dir_at(dir);
  if (at == nullptr || !at->files.count(name)) throw std::invalid_argument("set_file: no file " + path);
  at->files[name] = content;
}

}  // namespace capsule::testing
