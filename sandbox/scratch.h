// ScratchDir: one sandbox's private directory under the launcher's scratch root, holding the overlay
// upper/work dirs and mount points. Owned by the sandbox's root id; removed with everything in it.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace capsule::sandbox {

class ScratchDir {
 public:
  // Creates <root>/<id>/{root,upper,work,lower/0..n-1}. A non-empty `upper` replaces the private upper
  // dir (it is created if missing and kept afterwards). Throws SandboxError (step "scratch").
  ScratchDir(const std::string& root, const std::string& id, std::size_t layers, const std::string& upper,
             std::uint32_t owner);
  ~ScratchDir();
  ScratchDir(const ScratchDir&) = delete;
  ScratchDir& operator=(const ScratchDir&) = delete;

  const std::string& path() const { return path_; }
  std::string new_root() const { return path_ + "/root"; }
  std::string work() const { return path_ + "/work"; }
  const std::string& upper() const { return upper_; }
  std::string lower(std::size_t i) const { return path_ + "/lower/" + std::to_string(i); }

 private:
  std::string path_;
  std::string upper_;
};

// Random 16-hex-digit id for a sandbox (its scratch dir and cgroup name).
std::string new_sandbox_id();

}  // namespace capsule::sandbox
