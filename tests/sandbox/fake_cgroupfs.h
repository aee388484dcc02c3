// An in-memory cgroup v2 file system that follows the kernel's rules, so the v2 back end can be tested on hosts
// without v2 controllers. cgroup_v2_test.cpp replays the same operations on the real cgroup2 mount to check it.
#pragma once

#include <sys/types.h>

#include <map>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "sandbox/cgroup_fs.h"

namespace capsule::testing {

// What the emulated kernel offers.
struct FakeKernel {
  std::vector<std::string> controllers{"cpuset", "cpu", "io", "memory", "hugetlb", "pids", "rdma", "misc"};
  std::vector<std::string> root_subtree_control;  // enabled at the root when the tree is made
  std::set<std::string> missing_files;  // interface files this kernel lacks: cgroup.kill (< 5.14), memory.peak (< 5.19)
  std::string mountinfo;                // served as /proc/self/mountinfo
};

// Emulated semantics (errnos as the kernel returns them):
// - mkdir creates the core interface files, plus those of each controller enabled in the parent's
//   cgroup.subtree_control; enabling/disabling a controller there adds/removes the children's files.
// - cgroup.subtree_control: "+name"/"-name" tokens; unknown name or no sign EINVAL, not in cgroup.controllers
//   ENOENT, enabling in a non-root cgroup that has processes EBUSY, disabling one a child still uses EBUSY.
// - cgroup.procs: moves a process (ESRCH unknown, EBUSY into a non-root cgroup with controllers enabled).
// - cgroup.kill "1" kills the subtree (not unkillable processes), other numbers ERANGE; cgroup.freeze 0/1.
// - memory.{max,high,low,min,swap.max} take "max" or bytes with K/M/G/T suffixes, read back rounded down to
//   pages; pids.max "max" or 0..4194304; cpu.max "quota [period]" with 1 ms <= quota, 1 ms <= period <= 1 s.
// - cgroup.events and pids.current follow the processes; rmdir is EBUSY while populated or with children.
// - writing a read-only file is EINVAL; signals kill a process unless it is unkillable or the signal is
//   harmless by default (SIGCHLD, SIGCONT, ...).
class FakeCgroupFs final : public sandbox::CgroupFs {
 public:
  explicit FakeCgroupFs(std::string root, FakeKernel kernel = {});

  std::string read(const std::string& path) const override;
  void write(const std::string& path, const std::string& value) override;
  bool exists(const std::string& path) const override;
  int make_dir(const std::string& path) override;
  int remove_dir(const std::string& path) override;
  std::vector<std::string> list_dirs(const std::string& path) const override;
  void signal(pid_t pid, int signo) override;

  // The kernel side, for tests.
  void spawn(pid_t pid, const std::string& dir);  // a process appears in the cgroup at dir
  void make_unkillable(pid_t pid);                // e.g. stuck in uninterruptible sleep
  bool alive(pid_t pid) const { return where_.count(pid) != 0; }
  // Overwrites a file the kernel maintains (memory.peak, memory.events, cpu.stat, ...).
  void set_file(const std::string& path, const std::string& content);
  const std::vector<std::pair<pid_t, int>>& signals() const { return signals_; }
  // Accepted writes and all signals in order: "write <path> <value>", "signal <pid> <signo>".
  const std::vector<std::string>& journal() const { return journal_; }

 private:
  struct Dir {
    std::set<std::string> subtree_control;
    std::map<std::string, std::string> files;  // name -> stored contents ("" for generated ones)
    bool freeze = false;
  };

  Dir* dir_at(const std::string& path);
  const Dir* dir_at(const std::string& path) const;
  std::vector<std::string> available(const std::string& dir) const;
  std::vector<std::string> child_dirs(const std::string& dir) const;
  bool populated(const std::string& dir) const;
  bool frozen(const std::string& dir) const;
  void add_controller_files(Dir& dir, const std::string& controller);
  void remove_controller_files(Dir& dir, const std::string& controller);
  void write_subtree_control(const std::string& path, Dir& dir, const std::string& value);
  void move_process(const std::string& path, const std::string& value);
  void kill_subtree(const std::string& dir);
  std::string ordered(const std::set<std::string>& controllers) const;

  std::string root_;
  FakeKernel kernel_;
  std::map<std::string, Dir> dirs_;      // by absolute path
  std::map<pid_t, std::string> where_;   // process -> its cgroup
  std::set<pid_t> unkillable_;
  std::vector<std::pair<pid_t, int>> signals_;
  std::vector<std::string> journal_;
};

}  // namespace capsule::testing
