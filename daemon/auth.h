// Authorization in capsuled: who the caller is (its peer credentials), which runs it may see, and host paths
// it names opened with its own credentials, so the socket grants a caller exactly its own host rights.
#pragma once

#include <sys/stat.h>
#include <sys/types.h>

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "base/unique_fd.h"

namespace capsule::http {
struct PeerCredentials;
}

namespace capsule::daemon {

// The process on the other end of the socket, as the kernel recorded it at connect().
struct Caller {
  bool known = false;  // false on connections without peer credentials (loopback TCP): no rights at all
  uid_t uid = 0;
  gid_t gid = 0;
  std::vector<gid_t> groups;  // supplementary

  bool is_root() const { return known && uid == 0; }
  bool in_group(gid_t group) const;
  // "uid 1001", or "an unidentified caller", for error messages.
  std::string describe() const;
};

// The daemon itself (specs built internally, tests): root, today's behaviour.
Caller root_caller();
Caller caller_of(const http::PeerCredentials& peer);

// Daemon-wide authorization settings (config key "admin_group").
struct AccessPolicy {
  std::optional<gid_t> admin_gid;  // members see and cancel every run, as root does
};

// Root and members of the admin group see every run; everyone else only the runs they submitted.
bool sees_all_runs(const Caller& caller, const AccessPolicy& policy);
bool may_see_run(const Caller& caller, const AccessPolicy& policy, uid_t owner_uid);
// Throws ApiError 404 not_found ("no run with id <id>", the same answer as for an unknown id, so other
// users' run ids are not revealed) unless the caller may see the run.
void require_run_visible(const Caller& caller, const AccessPolicy& policy, uid_t owner_uid, const std::string& id);

// What a caller wants to do with a host path it names.
enum class HostAccess {
  kReadDir,     // a directory it can search and read (workspaces cow/ro, import sources)
  kWriteDir,    // the same, writable too (rw workspaces)
  kReadFile,    // a regular file it can read (archive imports)
  kCreateFile,  // a regular file it may create or overwrite, never through a final symlink (save targets)
};

// A host object opened for a caller: the daemon uses this exact object through the descriptor, never the
// path again, so nothing swapped in after the check is used.
struct OpenedHostPath {
  base::UniqueFd fd;
  struct stat st {};
  bool created = false;  // kCreateFile: the file did not exist before
  std::string path;      // as the caller named it, for messages
  // "/proc/self/fd/N": a path to the opened object for APIs that take paths (open_tree, the image store).
  std::string proc_path() const;
};

// Opens `path` for `caller`. Root callers: by the daemon itself, as before. Anyone else: in a short-lived
// helper process that takes on exactly the caller's uid, gid and supplementary groups, which passes the
// descriptor back; the kernel makes every access decision with the caller's credentials. Throws ApiError:
// 403 forbidden naming the path and the caller's uid when the caller may not (EACCES, EPERM, EROFS, or an
// unidentified caller), 400 `bad_field` for a missing path or the wrong kind of file.
OpenedHostPath open_as_caller(const Caller& caller, const std::string& path, HostAccess access,
                              const std::string& field, const std::string& bad_field_code);

}  // namespace capsule::daemon
