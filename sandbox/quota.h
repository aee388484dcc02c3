// SandboxDisk: a sandbox's disk and inode limit, as a filesystem of its own (a sparse image file, ext4 with a
// fixed inode count, loop-mounted) that holds every writable layer; writes past it fail with ENOSPC inside.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "base/unique_fd.h"

namespace capsule::sandbox {

struct DiskLimits {
  std::uint64_t bytes = 0;   // usable space of the sandbox's writable layers; 0: no disk of its own
  std::uint64_t inodes = 0;  // files, dirs and links they may hold; 0: one per 16 KiB of `bytes`
};

// Accepted limits: below the floors ext4's own metadata dominates; the ceilings are ext4's (inodes) and far
// beyond any host (bytes), keeping the image size arithmetic from overflowing.
constexpr std::uint64_t kMinDiskBytes = 16ull << 20;
constexpr std::uint64_t kMinDiskInodes = 64;
constexpr std::uint64_t kMaxDiskBytes = 1ull << 50;
constexpr std::uint64_t kMaxDiskInodes = (1ull << 32) - 1;

// The image's size for `limits` (inodes given): the limit plus what ext4 keeps for itself, so the sandbox can use
// about `limits.bytes`. The tables are never written (lazy init), so they cost no host disk.
std::uint64_t disk_image_bytes(const DiskLimits& limits);
// `limits` with the inode count a disk of them gets (one per 16 KiB of bytes, at least 1024, when not given).
DiskLimits with_default_inodes(DiskLimits limits);

// The formatted template of `limits` (inodes given) for a disk whose root `owner` owns, with `dirs` (relative
// paths) already made on it, owned by `owner`, mode 0755. Made once in `templates_dir` (mkfs.ext4 without
// journal or resize inode, inline data, lazy tables) and reused, at most 32 of them there (the oldest made go
// first); open for reading. Throws SandboxError (step "disk").
// The dirs a sandbox always gets are in the template because a fresh ext4's first block allocation scans and
// initialises the block bitmaps of dozens of groups (0.7 ms of CPU per disk here).
base::UniqueFd disk_template(const std::string& templates_dir, const DiskLimits& limits, std::uint32_t owner,
                             const std::vector<std::string>& dirs = {});

// Attaches `image_fd` (an empty sparse file, as long as the template) to a free loop device that detaches itself
// once unmounted and no longer open, then writes the data of the template (`template_fd`, from disk_template)
// through the device; the device's path, with `held` keeping it open (closing it before the mount would detach
// it). Written after the attach, not into the file before it: the kernel's loop setup syncs the backing file,
// which would put every sandbox's copy of the template on the host disk and discard it again at release.
std::string attach_disk_image(int template_fd, int image_fd, const std::string& image, base::UniqueFd& held);

class SandboxDisk {
 public:
  // Creates the image, formats it and mounts it at <dir>/disk (nosuid, nodev), its root owned by `owner` (the
  // sandbox's root id), with `dirs` on it as make_dir makes them (from the template: see disk_template). The
  // image (unlinked once attached) and its template go to `images_dir`, which must be on a disk (the scratch dir
  // may be a tmpfs); empty: <dir>/disk.img, templates beside <dir>. Throws SandboxError (step "disk") naming
  // what failed.
  SandboxDisk(const std::string& dir, DiskLimits limits, std::uint32_t owner, const std::string& images_dir = {},
              const std::vector<std::string>& dirs = {});
  // Detaches the mount and any bind of it made with bind_to, and removes the mount point. The filesystem's
  // shutdown (the loop device and the image's space) follows on a thread, or before returning when the host
  // filesystem is short of space.
  ~SandboxDisk();
  SandboxDisk(const SandboxDisk&) = delete;
  SandboxDisk& operator=(const SandboxDisk&) = delete;

  const std::string& root() const { return root_; }
  // The (unlinked) image, open while the disk lives: what it holds of the host filesystem is its fstat's blocks.
  int image_fd() const { return image_fd_.get(); }
  // A directory on the disk, owned by `owner`, created if missing (mode 0755); one the template made is given
  // the current time, as if made now.
  std::string make_dir(const std::string& relative, std::uint32_t owner) const;
  // Bind-mounts `source` (on the disk) at host dir `target`, so the caller sees the layer where it asked
  // for it; undone by the destructor.
  void bind_to(const std::string& source, const std::string& target);

 private:
  std::string dir_;
  std::string image_;
  std::string root_;
  base::UniqueFd image_fd_;
  base::UniqueFd root_fd_;  // the filesystem's root, open while it is in use
  std::vector<std::string> binds_;
};

// Mount points at or below `dir` in this mount namespace (from /proc/self/mountinfo, escapes decoded).
std::vector<std::string> mount_points_below(const std::string& dir);

// Detaches (MNT_DETACH) every mount at or below `dir` in this mount namespace, deepest first; how many.
// For a restart after a crash: a disk or bind a dead capsuled left mounted.
std::size_t detach_mounts_below(const std::string& dir);

// Loop devices ("/dev/loopN") whose backing file is at or below `dir`, deleted images too (from
// /sys/block/loop*/loop/backing_file).
std::vector<std::string> loop_devices_below(const std::string& dir);
// For a restart after a crash: tells each of those to detach itself (LOOP_CLR_FD: at once when nothing holds it,
// else with its last user, returning its image's space then); how many were told.
std::size_t release_loop_devices_below(const std::string& dir);

}  // namespace capsule::sandbox
