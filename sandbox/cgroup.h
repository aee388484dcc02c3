// cgroup back ends behind one interface: v2 (unified) and v1 (memory, pids, cpu, cpuacct, freezer).
// detect_cgroups() picks the one this host supports; a limit that cannot be applied fails the launch.
#pragma once

#include <sys/types.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace capsule::sandbox {

struct CgroupLimits {
  std::uint64_t memory_bytes = 0;  // 0: unlimited; swap is disabled whenever memory is limited
  std::uint64_t pids = 0;          // 0: unlimited
  double cpus = 0;                 // bandwidth in cores; 0: unlimited
};

struct CgroupUsage {
  std::uint64_t cpu_user_ns = 0;
  std::uint64_t cpu_sys_ns = 0;
  std::uint64_t peak_memory_bytes = 0;
  std::uint64_t oom_kills = 0;
};

// One sandbox's cgroup (one directory per hierarchy on v1). Destroying it kills what is left and removes it.
class Cgroup {
 public:
  virtual ~Cgroup() = default;
  virtual const std::string& name() const = 0;
  virtual void add_process(pid_t pid) = 0;          // throws SandboxError
  virtual std::vector<pid_t> processes() const = 0;
  virtual void signal_all(int signo) = 0;           // best effort, e.g. SIGTERM before the kill
  virtual void kill_all() = 0;                      // SIGKILL everything, returns once the group is empty
  virtual CgroupUsage usage() const = 0;
  virtual std::uint64_t oom_kills() const = 0;      // usage().oom_kills alone (one file read)
  virtual void remove() = 0;                        // kill_all + rmdir; idempotent
  // A cgroup below this one (one exec's process tree), without limits of its own; removed with it.
  virtual std::unique_ptr<Cgroup> create_child(const std::string& name) = 0;
  // The cgroup.procs file of each hierarchy: a process joins by writing "0" to descriptors opened here
  // (the kernel checks the opener's rights, so a sandboxed process can join through a passed descriptor).
  virtual std::vector<std::string> procs_files() const = 0;
  // Stops (true) or resumes (false) every process in the group; returns once the kernel reports it.
  virtual void freeze(bool frozen) = 0;
  // v2: the cgroup.procs of the leaf "init" that the box's init moves itself into once it has entered its
  // cgroup namespace, so that the box can hand its limits down to its children; empty on v1 (init stays).
  virtual std::string init_leaf_procs_file() const = 0;
  // v2, after init has left the box's own directory: enables the box's controllers for its children and gives
  // every exec leaf (made so far and later) the box's limits, so a runtime that reads only its own cgroup (the
  // JVM before JDK-8322420) sees them. A no-op on v1 (the JVM falls back to hierarchical_memory_limit there)
  // and without limits. Throws SandboxError naming the file that refused.
  virtual void hand_limits_to_children() = 0;
};

// One cgroup filesystem to mount read-only inside a box at /sys/fs/cgroup/<name> (the box's cgroup namespace
// makes its own cgroup the root), so runtimes such as the JVM read their limits there as in a container.
struct CgroupViewMount {
  std::string fstype;                // "cgroup" (v1 hierarchy) or "cgroup2"
  std::string options;               // v1: the hierarchy's controllers, e.g. "cpu,cpuacct"; v2: empty
  std::string name;                  // directory under /sys/fs/cgroup; empty: /sys/fs/cgroup itself (v2)
  std::vector<std::string> aliases;  // symlinks to name, one per co-mounted controller ("cpu" -> "cpu,cpuacct")
  bool operator==(const CgroupViewMount&) const = default;
};

class CgroupManager {
 public:
  virtual ~CgroupManager() = default;
  virtual int version() const = 0;  // 1 or 2
  // Creates <parent>/<name> with the limits applied; throws SandboxError naming the file that refused.
  virtual std::unique_ptr<Cgroup> create(const std::string& name, const CgroupLimits& limits) = 0;
  // Names of sandbox cgroups under the parent (e.g. left by a crashed daemon).
  virtual std::vector<std::string> list() const = 0;
  // Opens an existing sandbox cgroup by name, for cleanup after a restart.
  virtual std::unique_ptr<Cgroup> open(const std::string& name) = 0;
  // Removes the parent directory in every hierarchy when no sandbox cgroup is left in it (a daemon's clean
  // shutdown); levels above the last one of `parent` are shared and stay.
  virtual void remove_parent() = 0;
  // What a box's cgroup view mounts: the hierarchies its cgroup has a directory in.
  virtual std::vector<CgroupViewMount> view_mounts() const = 0;
};

// OOM kills of one exec: v1 counts a kill in the victim's own group (the exec's leaf) only; v2 in the group
// that hit its limit and every one above it, so a limited v2 box's exec leaf (it has the box's limits, see
// hand_limits_to_children) and the box both count the same kill. The larger of the leaf's count and the box's
// growth since the exec started, never their sum.
inline std::uint64_t exec_oom_kills(std::uint64_t leaf, std::uint64_t box_now, std::uint64_t box_at_start) {
  return std::max(leaf, box_now - std::min(box_now, box_at_start));
}

struct CgroupConfig {
  std::string mount_root = "/sys/fs/cgroup";  // a fake tree in tests
  std::string parent = "capsule";             // relative to each hierarchy's root
  std::chrono::milliseconds kill_timeout{10'000};  // kill_all()/remove() give up (SandboxError) after this
  // The parent's CPU weight against the host's other cgroups, in default processes' worth: v1 cpu.shares
  // 1024 x this (2..262144), v2 cpu.weight 100 x this (1..10000), written when the parent is prepared. The
  // daemon gives max_concurrent, so its boxes together weigh as that many host processes, not as one; 0 leaves
  // the parent's weight as the kernel made it.
  std::uint64_t parent_cpu_weight = 0;
};

// v2 when <root>/cgroup.controllers exists and lists memory and pids; v1 when <root>/memory etc. are mounted.
// Throws SandboxError when neither is usable.
std::unique_ptr<CgroupManager> detect_cgroups(const CgroupConfig& config);
std::unique_ptr<CgroupManager> make_cgroup_v1(const CgroupConfig& config);
std::unique_ptr<CgroupManager> make_cgroup_v2(const CgroupConfig& config);

}  // namespace capsule::sandbox
