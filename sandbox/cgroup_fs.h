// The file-system seam under both cgroup back ends (the host's cgroupfs, or a fake tree in tests),
// plus the small parsing and polling helpers that cgroup_v1.cpp and cgroup_v2.cpp share.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "sandbox/cgroup.h"

namespace capsule::sandbox {

// Everything the back ends do to the system goes through this: cgroupfs files and directories, and signals
// to member processes. Paths are absolute.
class CgroupFs {
 public:
  virtual ~CgroupFs() = default;
  // Whole contents of a file; throws SandboxError{"cgroup", path, errno}.
  virtual std::string read(const std::string& path) const = 0;
  // One write(2) of value to an existing file (cgroupfs parses each write); throws SandboxError.
  virtual void write(const std::string& path, const std::string& value) = 0;
  virtual bool exists(const std::string& path) const = 0;
  // mkdir/rmdir return 0 or the errno, so callers can act on EEXIST, EBUSY and ENOENT.
  [[nodiscard]] virtual int make_dir(const std::string& path) = 0;
  [[nodiscard]] virtual int remove_dir(const std::string& path) = 0;
  // Names of the subdirectories (child cgroups), sorted; empty when path does not exist.
  virtual std::vector<std::string> list_dirs(const std::string& path) const = 0;
  // kill(2). Not checked: a member may exit at any time, and callers verify the cgroup empties.
  virtual void signal(pid_t pid, int signo) = 0;
};

// The real file system.
std::shared_ptr<CgroupFs> host_cgroup_fs();

// The public factories (cgroup.h) call these with host_cgroup_fs().
std::unique_ptr<CgroupManager> make_cgroup_v1(const CgroupConfig& config, std::shared_ptr<CgroupFs> fs);
std::unique_ptr<CgroupManager> make_cgroup_v2(const CgroupConfig& config, std::shared_ptr<CgroupFs> fs);
std::unique_ptr<CgroupManager> detect_cgroups(const CgroupConfig& config, std::shared_ptr<CgroupFs> fs);

inline constexpr const char* kMountInfoPath = "/proc/self/mountinfo";

// cgroup v1 mounts under mount_root found in /proc/self/mountinfo text: controller -> mount point. Co-mounted
// controllers ("cpu,cpuacct") map to the same mount point; the first mount of a hierarchy wins.
std::map<std::string, std::string> parse_v1_mounts(const std::string& mountinfo, const std::string& mount_root);

// --- helpers shared by the back ends ---
using Clock = std::chrono::steady_clock;

std::string join_path(const std::string& dir, const std::string& name);
std::vector<std::string> split_words(const std::string& text);  // on whitespace
bool contains(const std::vector<std::string>& words, const std::string& word);
// Value of a "key value" line (cpu.stat, memory.events, cpuacct.stat, memory.oom_control).
std::optional<std::uint64_t> keyed_value(const std::string& text, const std::string& key);
// A file holding one unsigned number; throws SandboxError naming path otherwise.
std::uint64_t parse_number(const std::string& text, const std::string& path);

// Throws unless name is one plain directory name ([A-Za-z0-9_.-], not starting with '.').
void check_cgroup_name(const std::string& name, const std::string& what);
// Throws unless parent is empty or '/'-separated plain names.
void check_cgroup_parent(const std::string& parent);
// Throws on a negative or non-finite cpu limit.
void check_cgroup_limits(const CgroupLimits& limits);
// "a/b/c" -> {"a", "b", "c"}; "" -> {}.
std::vector<std::string> split_path(const std::string& relative);
// mkdir that accepts an existing directory; throws SandboxError.
void ensure_dir(CgroupFs& fs, const std::string& dir);

// Pids in cgroup.procs of dir and of every cgroup below it.
std::vector<pid_t> subtree_pids(const CgroupFs& fs, const std::string& dir);
// Polls until no process is left below any of dirs, re-sending SIGKILL to what is left when resend is set;
// throws SandboxError naming the survivors at the deadline.
void wait_until_empty(CgroupFs& fs, const std::vector<std::string>& dirs, Clock::time_point deadline, bool resend);
// rmdir of dir and of any child cgroups below it, retrying EBUSY until the deadline; a missing dir is fine.
void remove_tree(CgroupFs& fs, const std::string& dir, Clock::time_point deadline);
// One rmdir of each of dirs, in order (a missing one is fine); whether all are gone. The kernel refuses a group
// that holds a process or a child group (EBUSY), so a group found empty the usual way, at the end of a run,
// goes in one call per directory; whatever refused is left for kill_all and remove_tree.
bool remove_if_empty(CgroupFs& fs, const std::vector<std::string>& dirs);
// Sleeps a little, longer as attempts grow (1 ms .. 20 ms).
void poll_pause(int attempt);

}  // namespace capsule::sandbox
