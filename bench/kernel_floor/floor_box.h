// FloorBox: one capsule-shaped sandbox made with raw syscalls by this small single-threaded process: the kernel
// work a capsule box costs (namespaces, overlay root, the same mounts, cgroups, a disk, capabilities, seccomp)
// without capsule's daemon, init binary, channels or records. kernel_floor times it against bwrap.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "base/unique_fd.h"

namespace capsule::bench::kernel_floor {

struct FloorSetup {
  std::string scratch;                     // a tmpfs: each box's dirs and mount points
  std::string disk_dir;                    // on a real disk: the per-box images and their template
  std::string lower;                       // the host image's root skeleton, the overlay's lower layer
  std::vector<std::string> cgroup_parents; // one made dir per v1 hierarchy (memory, pids, cpu, cpuacct, freezer)
  std::vector<std::string> view_hierarchies;  // what the box mounts read-only at /sys/fs/cgroup/<name>
  std::vector<std::uint8_t> seccomp;       // the compiled default policy (struct sock_filter bytes)
  int idmap_userns = -1;                   // maps host root to the box's root, for the idmapped /usr
  std::uint32_t host_root = 100000;        // the box's root on the host (uid and gid)
};

// Makes a box (with its writable layers on an ext4 disk of `disk_mib` MiB when non-zero), runs
// /usr/bin/true in it as capsule-init would, and removes everything. Throws std::runtime_error naming the
// step that failed.
void run_floor_box(const FloorSetup& setup, std::uint64_t disk_mib, int number);

// Only a box's disk: made and mounted as run_floor_box makes it, its dirs made, overlayfs's work dir made,
// unmounted (which releases it). What the disk alone costs, apart from the rest of the box.
void run_disk_only(const FloorSetup& setup, std::uint64_t disk_mib, int number);

// The user namespace for the idmapped /usr: host uid/gid 0 seen as `host_root`. Held open by the fd.
int make_idmap_userns(std::uint32_t host_root);

// An ext4 template of `mib` MiB formatted as capsule formats a box's disk (no journal, inline data, lazy tables,
// the upper and work dirs made), made once; open for reading.
base::UniqueFd disk_template(const FloorSetup& setup, std::uint64_t mib);

}  // namespace capsule::bench::kernel_floor
