// User namespace set-up from the launcher's side: uid/gid maps for a cloned child and
// detached idmapped mounts that make host-owned files appear with their host owners inside.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <string>

namespace capsule::sandbox {

struct IdRange {
  std::uint32_t host_base = 0;  // sandbox id 0 is this host id
  std::uint32_t count = 0;
};

// Writes "0 base count" to /proc/<pid>/{uid_map,gid_map}. Throws SandboxError (step "userns").
void write_id_maps(pid_t pid, const IdRange& range);

// Opens /proc/<pid>/ns/user (close-on-exec). Throws SandboxError.
int open_user_namespace(pid_t pid);

// Creates a user namespace whose only mapping is host id `on_disk` <-> host id `sandbox_root`, for idmapping
// writable binds: files of `on_disk` appear owned by sandbox root, and sandbox root's writes land as `on_disk`.
// Returns its fd (close-on-exec); the helper process that carried it is gone. Throws SandboxError.
int make_owner_mapping_namespace(std::uint32_t on_disk_uid, std::uint32_t on_disk_gid, std::uint32_t sandbox_root);

// Clones the mount tree at `path` as a detached mount (open_tree), optionally idmapped through the
// user namespace `userns_fd` and read-only. Returns the mount fd. Throws SandboxError (step "idmap").
int make_detached_mount(const std::string& path, int userns_fd, bool idmap, bool read_only, bool recursive);

}  // namespace capsule::sandbox
