// ScratchDir: one sandbox's private directory under the launcher's scratch root, holding the overlay
// upper/work dirs and mount points, and the sandbox's own disk when it has a disk limit. Removed whole.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "sandbox/quota.h"

namespace capsule::sandbox {

class ScratchDir {
 public:
  // Creates <root>/<id>/{root,upper,work,lower/0..n-1}. A non-empty `upper` replaces the private upper
  // dir (it is created if missing and kept afterwards). With `disk.bytes`, upper and work live on a disk
  // of the sandbox's own (SandboxDisk), which a kept `upper` cannot. <root> and <root>/<id> are searchable
  // only by root and the sandbox's ids (group `owner`). Throws SandboxError (step "scratch" or "disk").
  // `data_root` (non-empty when <root> is a tmpfs): where what the sandbox writes goes instead, on a disk: the
  // disk's image, or without one <data_root>/<id>/{upper,work}. `disk_overlays`: how many copy-on-write views
  // get an upper and a work dir on the disk (disk_overlays()); its template holds them.
  ScratchDir(const std::string& root, const std::string& id, std::size_t layers, const std::string& upper,
             std::uint32_t owner, DiskLimits disk = {}, const std::string& data_root = {},
             std::size_t disk_overlays = 0);
  ~ScratchDir();
  ScratchDir(const ScratchDir&) = delete;
  ScratchDir& operator=(const ScratchDir&) = delete;

  const std::string& path() const { return path_; }
  std::string new_root() const { return path_ + "/root"; }
  const std::string& work() const { return work_; }
  const std::string& upper() const { return upper_; }
  std::string lower(std::size_t i) const { return path_ + "/lower/" + std::to_string(i); }
  // The sandbox's disk, or null without a disk limit.
  SandboxDisk* disk() const { return disk_.get(); }
  // With a disk: the upper and work dirs on it of each copy-on-write view, owned by `owner`; else empty.
  struct UpperAndWork {
    std::string upper;
    std::string work;
  };
  const std::vector<UpperAndWork>& disk_overlays() const { return disk_overlays_; }

 private:
  // rmdir of each dir made here, deepest first: all that removal takes when they are empty, the usual end (the
  // disk detached, nothing left mounted or written outside it). False: something is left; remove_all does it.
  bool remove_if_as_made() const;

  std::string path_;
  std::size_t layers_;
  std::string data_path_;  // <data_root>/<id> when upper and work live there; removed with the rest
  std::string upper_;
  std::string work_;
  std::unique_ptr<SandboxDisk> disk_;  // destroyed (unmounted) before the directory is removed
  std::vector<UpperAndWork> disk_overlays_;
};

// Random 16-hex-digit id for a sandbox (its scratch dir and cgroup name).
std::string new_sandbox_id();

}  // namespace capsule::sandbox
