// cgroup v2 back end: one directory <mount_root>/<parent>/<name> on the unified hierarchy, limited through
// memory.max, memory.swap.max, pids.max and cpu.max, killed with cgroup.kill (freeze + SIGKILL before 5.14).
//
// Controllers: memory and pids are always required, cpu only when a cpu limit is asked for; they are enabled
// in cgroup.subtree_control from the root down to <parent>, and a controller that cgroup.controllers does not
// offer fails create() before anything is made. Kernels without swap accounting have no memory.swap.max; the
// memory limit is then enforced on RAM only. Kernels before 5.19 have no memory.peak; peak memory reads 0.
#include <signal.h>

#include <cerrno>
#include <cmath>

#include "sandbox/cgroup_fs.h"
#include "sandbox/error.h"

namespace capsule::sandbox {
namespace {

constexpr std::uint64_t kCpuMaxPeriodUs = 100'000;
constexpr const char* kInitLeaf = "init";

bool limited(const CgroupLimits& limits) { return limits.memory_bytes > 0 || limits.pids > 0 || limits.cpus > 0; }

// The controllers a group with these limits needs: memory and pids always, cpu for a cpu limit.
std::vector<std::string> controllers_for(const CgroupLimits& limits) {
  std::vector<std::string> controllers{"memory", "pids"};
  if (limits.cpus > 0) controllers.push_back("cpu");
  return controllers;
}

void write_limits(CgroupFs& fs, const std::string& dir, const CgroupLimits& limits) {
  if (limits.memory_bytes > 0) {
    fs.write(join_path(dir, "memory.max"), std::to_string(limits.memory_bytes));
    const std::string swap = join_path(dir, "memory.swap.max");
    if (fs.exists(swap)) fs.write(swap, "0");
  }
  if (limits.pids > 0) fs.write(join_path(dir, "pids.max"), std::to_string(limits.pids));
  if (limits.cpus > 0) {
    const auto quota = static_cast<std::uint64_t>(std::llround(limits.cpus * kCpuMaxPeriodUs));
    fs.write(join_path(dir, "cpu.max"), std::to_string(quota) + " " + std::to_string(kCpuMaxPeriodUs));
  }
}

class CgroupV2 final : public Cgroup {
 public:
  CgroupV2(std::shared_ptr<CgroupFs> fs, std::string name, std::string dir, std::chrono::milliseconds timeout,
           CgroupLimits limits = {})
      : fs_(std::move(fs)), name_(std::move(name)), dir_(std::move(dir)), timeout_(timeout), limits_(limits) {}
  // Also the rollback of a failed create(). Errors cannot leave a destructor; call remove() to see them.
  ~CgroupV2() override {
    try {
      remove();
    } catch (...) {  // NOLINT(bugprone-empty-catch): nowhere to report from here
    }
  }

  const std::string& name() const override { return name_; }

  void add_process(pid_t pid) override { fs_->write(file("cgroup.procs"), std::to_string(pid)); }

  std::vector<pid_t> processes() const override { return removed_ ? std::vector<pid_t>{} : subtree_pids(*fs_, dir_); }

  void signal_all(int signo) override {
    for (pid_t pid : processes()) fs_->signal(pid, signo);
  }

  void kill_all() override {
    if (removed_ || !fs_->exists(dir_)) return;
    const auto deadline = Clock::now() + timeout_;
    if (fs_->exists(file("cgroup.kill"))) {
      // The kernel kills the whole subtree, including children forked while it does so.
      fs_->write(file("cgroup.kill"), "1");
      wait_until_empty(*fs_, {dir_}, deadline, false);
      return;
    }
    // Before 5.14: freeze so nothing forks between listing and killing (frozen tasks still die of SIGKILL).
    const bool can_freeze = fs_->exists(file("cgroup.freeze"));
    if (can_freeze) freeze_until(Clock::now() + timeout_ / 4);
    for (pid_t pid : subtree_pids(*fs_, dir_)) fs_->signal(pid, SIGKILL);
    if (can_freeze) fs_->write(file("cgroup.freeze"), "0");
    wait_until_empty(*fs_, {dir_}, deadline, true);
  }

  CgroupUsage usage() const override {
    CgroupUsage usage;
    const std::string stat_file = file("cpu.stat");
    const std::string stat = fs_->read(stat_file);
    usage.cpu_user_ns = required(stat, "user_usec", stat_file) * 1000;
    usage.cpu_sys_ns = required(stat, "system_usec", stat_file) * 1000;
    const std::string peak = file("memory.peak");
    if (fs_->exists(peak)) usage.peak_memory_bytes = parse_number(fs_->read(peak), peak);
    usage.oom_kills = oom_kills();
    return usage;
  }

  // A child without the memory controller (an exec's leaf) has no memory.events: the sandbox's group tells.
  std::uint64_t oom_kills() const override {
    if (!fs_->exists(file("memory.events"))) return 0;
    return keyed_value(fs_->read(file("memory.events")), "oom_kill").value_or(0);
  }

  void remove() override {
    if (removed_) return;
    if (!remove_if_empty(*fs_, {dir_})) {
      kill_all();
      remove_tree(*fs_, dir_, Clock::now() + timeout_);
    }
    removed_ = true;
  }

  // Until hand_limits_to_children() no controllers are enabled below a sandbox's group, so it may hold
  // processes (its init) and children alike; a child still has cpu.stat, cgroup.kill and cgroup.freeze.
  std::unique_ptr<Cgroup> create_child(const std::string& name) override {
    check_cgroup_name(name, "child cgroup");
    const std::string dir = join_path(dir_, name);
    if (int err = fs_->make_dir(dir); err != 0) {
      errno = err;
      throw_errno("cgroup", dir, "creating a child cgroup");
    }
    auto child = std::make_unique<CgroupV2>(fs_, join_path(name_, name), dir, timeout_);
    if (children_limited_) write_limits(*fs_, dir, limits_);
    return child;
  }

  std::string init_leaf_procs_file() const override {
    return limited(limits_) ? join_path(file(kInitLeaf), "cgroup.procs") : std::string();
  }

  void hand_limits_to_children() override {
    if (children_limited_ || !limited(limits_)) return;
    std::string enable;
    for (const std::string& controller : controllers_for(limits_)) enable += (enable.empty() ? "+" : " +") + controller;
    fs_->write(file("cgroup.subtree_control"), enable);
    children_limited_ = true;
    for (const std::string& child : fs_->list_dirs(dir_))
      if (child != kInitLeaf) write_limits(*fs_, join_path(dir_, child), limits_);
  }

  std::vector<std::string> procs_files() const override { return {file("cgroup.procs")}; }

  void freeze(bool frozen) override {
    if (!frozen) {
      fs_->write(file("cgroup.freeze"), "0");
      return;
    }
    freeze_until(Clock::now() + timeout_);
    if (keyed_value(fs_->read(file("cgroup.events")), "frozen").value_or(0) != 1) {
      fs_->write(file("cgroup.freeze"), "0");
      throw_error("cgroup", file("cgroup.freeze"), "the group did not freeze in time");
    }
  }

 private:
  std::string file(const std::string& name) const { return join_path(dir_, name); }

  static std::uint64_t required(const std::string& text, const std::string& key, const std::string& path) {
    auto value = keyed_value(text, key);
    if (!value) throw_error("cgroup", path, "no '" + key + "' line");
    return *value;
  }

  // Best effort within the deadline: a cgroup that does not report frozen in time is killed anyway.
  void freeze_until(Clock::time_point deadline) {
    fs_->write(file("cgroup.freeze"), "1");
    for (int attempt = 0; Clock::now() < deadline; ++attempt) {
      if (keyed_value(fs_->read(file("cgroup.events")), "frozen").value_or(0) == 1) return;
      poll_pause(attempt);
    }
  }

  std::shared_ptr<CgroupFs> fs_;
  std::string name_;
  std::string dir_;
  std::chrono::milliseconds timeout_;
  CgroupLimits limits_;            // a box's own; its children's once handed down
  bool children_limited_ = false;
  bool removed_ = false;
};

class CgroupV2Manager final : public CgroupManager {
 public:
  CgroupV2Manager(const CgroupConfig& config, std::shared_ptr<CgroupFs> fs)
      : fs_(std::move(fs)), config_(config), parent_dir_(join_path(config.mount_root, config.parent)) {
    check_cgroup_parent(config.parent);
    if (!fs_->exists(join_path(config.mount_root, "cgroup.controllers")))
      throw_error("cgroup", config.mount_root, "not a cgroup v2 mount (no cgroup.controllers)");
  }

  int version() const override { return 2; }

  std::unique_ptr<Cgroup> create(const std::string& name, const CgroupLimits& limits) override {
    check_cgroup_name(name, "sandbox cgroup");
    check_cgroup_limits(limits);
    prepare_parent(controllers_for(limits));

    const std::string dir = join_path(parent_dir_, name);
    if (int err = fs_->make_dir(dir); err != 0) {
      errno = err;
      throw_errno("cgroup", dir, "creating the sandbox cgroup");
    }
    // From here on a throw destroys the group, which removes the directory again.
    auto group = std::make_unique<CgroupV2>(fs_, name, dir, config_.kill_timeout, limits);
    write_limits(*fs_, dir, limits);
    if (limited(limits)) ensure_dir(*fs_, join_path(dir, kInitLeaf));
    return group;
  }

  std::vector<std::string> list() const override { return fs_->list_dirs(parent_dir_); }

  std::vector<CgroupViewMount> view_mounts() const override { return {CgroupViewMount{"cgroup2", "", "", {}}}; }

  std::unique_ptr<Cgroup> open(const std::string& name) override {
    check_cgroup_name(name, "sandbox cgroup");
    const std::string dir = join_path(parent_dir_, name);
    if (!fs_->exists(dir)) {
      errno = ENOENT;
      throw_errno("cgroup", dir, "opening a sandbox cgroup");
    }
    return std::make_unique<CgroupV2>(fs_, name, dir, config_.kill_timeout);
  }

  void remove_parent() override { (void)fs_->remove_dir(parent_dir_); }

 private:
  // Makes the controllers available to <parent>'s children: enabled in the subtree_control of the root, of
  // each level down to <parent>, and of <parent> itself.
  // With a parent_cpu_weight the cpu controller is enabled too wherever it is offered on the way down, so that
  // the parent has a cpu.weight to write. That is best effort: where cpu is not offered or the kernel refuses it
  // (realtime processes in a child cgroup), the parent keeps the kernel's weight and boxes run as before.
  void prepare_parent(const std::vector<std::string>& controllers) {
    bool cpu_usable = config_.parent_cpu_weight > 0;
    const auto enable_here = [&](const std::string& dir) {
      enable(dir, controllers);
      if (!cpu_usable || contains(controllers, "cpu")) return;
      cpu_usable = contains(split_words(fs_->read(join_path(dir, "cgroup.controllers"))), "cpu");
      try {
        if (cpu_usable) enable(dir, {"cpu"});
      } catch (const SandboxError&) {
        cpu_usable = false;
      }
    };
    std::string dir = config_.mount_root;
    enable_here(dir);
    for (const std::string& part : split_path(config_.parent)) {
      dir = join_path(dir, part);
      ensure_dir(*fs_, dir);
      enable_here(dir);
    }
    const std::string weight_file = join_path(dir, "cpu.weight");
    if (config_.parent_cpu_weight > 0 && fs_->exists(weight_file))
      fs_->write(weight_file, std::to_string(cpu_weight_for(config_.parent_cpu_weight)));
  }

  // 100 per default process, within the kernel's 1..10000.
  static std::uint64_t cpu_weight_for(std::uint64_t processes) {
    constexpr std::uint64_t kDefault = 100, kMax = 10000;
    return processes > kMax / kDefault ? kMax : std::max<std::uint64_t>(processes * kDefault, 1);
  }

  void enable(const std::string& dir, const std::vector<std::string>& controllers) {
    const std::string control = join_path(dir, "cgroup.subtree_control");
    const std::vector<std::string> enabled = split_words(fs_->read(control));
    const std::string available_file = join_path(dir, "cgroup.controllers");
    const std::vector<std::string> available = split_words(fs_->read(available_file));
    std::string request;
    for (const std::string& controller : controllers) {
      if (contains(enabled, controller)) continue;
      if (!contains(available, controller)) {
        std::string offered;
        for (const std::string& word : available) offered += (offered.empty() ? "" : " ") + word;
        throw_error("cgroup", available_file,
                    "the " + controller + " controller is not available (offered: '" + offered +
                        "'); it may be bound to a cgroup v1 hierarchy or not delegated to this cgroup");
      }
      request += (request.empty() ? "+" : " +") + controller;
    }
    if (request.empty()) return;
    try {
      fs_->write(control, request);
    } catch (const SandboxError& error) {
      if (error.cause().errno_value != EBUSY) throw;
      base::Cause cause = error.cause();
      cause.detail += "; the cgroup has member processes and cgroup v2 only enables controllers for the children "
                      "of cgroups without processes: move them into a leaf cgroup or choose another parent";
      throw SandboxError(cause);
    }
  }

  std::shared_ptr<CgroupFs> fs_;
  CgroupConfig config_;
  std::string parent_dir_;
};

}  // namespace

std::unique_ptr<CgroupManager> make_cgroup_v2(const CgroupConfig& config, std::shared_ptr<CgroupFs> fs) {
  return std::make_unique<CgroupV2Manager>(config, std::move(fs));
}

std::unique_ptr<CgroupManager> make_cgroup_v2(const CgroupConfig& config) {
  return make_cgroup_v2(config, host_cgroup_fs());
}

}  // namespace capsule::sandbox
