// Protected paths: files and directories matching EnvironmentSpec::protect become read-only for every process
// of the sandbox, also against rename, unlink, hard links and chmod. Done by capsule-init before pivot_root.
#pragma once

#include <string>
#include <vector>

namespace capsule::sandbox {

// Each match under `root` + `base` (relative globs) or `root` (absolute ones) gets a read-only bind of itself,
// so writes, chmod and hard links fail (EROFS/EXDEV) and rename or unlink of it fails (EBUSY); every directory
// between the base and a match is bound onto itself too, so it cannot be renamed away (EBUSY). A directory
// that matches is protected whole, including files created in it later. Symlinks are never followed nor
// protected. Throws SandboxError (step "protect") past kMaxProtectedMounts mounts or on a mount failure.
void protect_paths(const std::string& root, const std::string& base, const std::vector<std::string>& globs);

// "*" and "?" within one name (fnmatch, dot files included), "**" as a whole segment for any number of names.
// `path` is relative, "/"-separated; a trailing "/**" also matches the directory itself.
bool protect_glob_matches(const std::string& glob, const std::string& path);

inline constexpr std::size_t kMaxProtectedMounts = 4096;
inline constexpr std::size_t kMaxProtectWalkEntries = 200000;

}  // namespace capsule::sandbox
