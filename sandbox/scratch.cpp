// Per-sandbox scratch directories: created with the ownership overlayfs needs inside the user
// namespace, private to root and the sandbox's ids, removed afterwards (nothing survives but a kept upper).
#include "sandbox/scratch.h"

#include <sys/random.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <filesystem>

#include "sandbox/error.h"

namespace capsule::sandbox {
namespace {

void make_dir(const std::string& path, mode_t mode, std::uint32_t owner, bool chown_it) {
  if (mkdir(path.c_str(), mode) != 0 && errno != EEXIST) throw_errno("scratch", path, "mkdir");
  if (chmod(path.c_str(), mode) != 0) throw_errno("scratch", path, "chmod");
  if (chown_it && chown(path.c_str(), owner, owner) != 0) throw_errno("scratch", path, "chown");
}

// The dir on a sandbox's disk that holds the upper and work dirs of its copy-on-write view `index`.
std::string overlay_dir_on_disk(std::size_t index) { return "overlay-" + std::to_string(index); }

}  // namespace

std::string new_sandbox_id() {
  unsigned char bytes[8];
  if (getrandom(bytes, sizeof bytes, 0) != sizeof bytes) throw_errno("scratch", "", "getrandom");
  char hex[17];
  for (int i = 0; i < 8; ++i) std::snprintf(hex + 2 * i, 3, "%02x", bytes[i]);
  return std::string(hex, 16);
}

ScratchDir::ScratchDir(const std::string& root, const std::string& id, std::size_t layers,
                       const std::string& upper, std::uint32_t owner, DiskLimits disk, const std::string& data_root,
                       std::size_t disk_overlays)
    : path_(root + "/" + id),
      layers_(layers),
      data_path_(data_root.empty() || disk.bytes != 0 ? std::string() : data_root + "/" + id),
      upper_(upper.empty() ? (data_path_.empty() ? path_ : data_path_) + "/upper" : upper),
      work_((data_path_.empty() ? path_ : data_path_) + "/work") {
  if (disk.bytes != 0 && !upper.empty()) {
    throw_error("scratch", upper, "a kept upper dir cannot be combined with a disk limit");
  }
  std::error_code ec;
  std::filesystem::create_directories(root, ec);
  if (ec) throw SandboxError(base::Cause{"scratch", root, ec.value(), "create scratch root"});
  // Other host users must not list or read what sandboxes write: root and the sandbox's ids (group) search.
  if (chown(root.c_str(), 0, owner) != 0 || chmod(root.c_str(), 0710) != 0) throw_errno("scratch", root, "chmod");
  if (mkdir(path_.c_str(), 0710) != 0) throw_errno("scratch", path_, "mkdir");
  try {
    if (chown(path_.c_str(), 0, owner) != 0) throw_errno("scratch", path_, "chown");
    make_dir(path_ + "/root", 0755, owner, true);
    make_dir(path_ + "/lower", 0711, owner, false);
    for (std::size_t i = 0; i < layers; ++i) make_dir(lower(i), 0755, owner, false);
    if (!data_path_.empty() && (mkdir(data_path_.c_str(), 0710) != 0 || chown(data_path_.c_str(), 0, owner) != 0)) {
      throw_errno("scratch", data_path_, "mkdir");
    }
    if (disk.bytes != 0) {
      std::vector<std::string> dirs = {"upper", "work"};
      for (std::size_t i = 0; i < disk_overlays; ++i) {
        dirs.push_back(overlay_dir_on_disk(i) + "/upper");
        dirs.push_back(overlay_dir_on_disk(i) + "/work");
      }
      disk_ = std::make_unique<SandboxDisk>(path_, disk, owner, data_root, dirs);
      upper_ = disk_->make_dir("upper", owner);
      work_ = disk_->make_dir("work", owner);
      for (std::size_t i = 0; i < disk_overlays; ++i) {
        disk_overlays_.push_back({disk_->make_dir(overlay_dir_on_disk(i) + "/upper", owner),
                                  disk_->make_dir(overlay_dir_on_disk(i) + "/work", owner)});
      }
    } else {
      make_dir(work_, 0700, owner, true);
      make_dir(upper_, 0755, owner, true);
    }
  } catch (...) {
    disk_.reset();
    std::filesystem::remove_all(path_, ec);
    if (!data_path_.empty()) std::filesystem::remove_all(data_path_, ec);
    throw;
  }
}

ScratchDir::~ScratchDir() {
  disk_.reset();
  if (remove_if_as_made()) return;
  std::error_code ec;
  std::filesystem::remove_all(path_, ec);
  if (!data_path_.empty()) std::filesystem::remove_all(data_path_, ec);
}

bool ScratchDir::remove_if_as_made() const {
  if (!data_path_.empty()) return false;
  std::vector<std::string> dirs = {new_root()};
  for (std::size_t i = 0; i < layers_; ++i) dirs.push_back(lower(i));
  dirs.push_back(path_ + "/lower");
  // Upper and work: in the scratch dir, or on the disk, which took them and its mount point with it (ENOENT); a
  // kept upper is elsewhere, and stays.
  for (const std::string& dir : {work_, upper_}) {
    if (dir.starts_with(path_ + "/")) dirs.push_back(dir);
  }
  dirs.push_back(path_);
  for (const std::string& dir : dirs) {
    if (rmdir(dir.c_str()) != 0 && errno != ENOENT) return false;
  }
  return true;
}

}  // namespace capsule::sandbox
