// `capsule session cp`: files in and out of a session through PUT/GET /v1/sessions/{id}/files, never held in
// memory: capsuled reads uploads from the host path itself; downloads stream to disk (a directory as a tar).
#pragma once

#include <filesystem>
#include <optional>
#include <string>

#include "http/unix_client.h"

namespace capsule::client {

// One side of `session cp`: "ID:/path" names a path in session ID.
struct SessionPathArg {
  std::string id;
  std::string path;
};
// "ID:/path" -> {ID, /path}; nullopt for a local path (no ':' or a '/' before the first ':', so ./a:b is
// local). Throws std::invalid_argument for "ID:" without a path.
std::optional<SessionPathArg> parse_session_path(const std::string& arg);

// Unpacks the tar read from `tar_fd` into the existing directory `dir` as this user: regular files, directories,
// symlinks (never followed while unpacking) and hard links inside the tree, all owned by this user (the tar's
// owners are ignored, root's run too) with the tar's permission bits less setuid and setgid. Throws
// std::runtime_error naming the entry for an absolute path or a ".." component (an entry escaping `dir`) and for
// a path that goes through a symlink; device nodes, FIFOs and sockets are skipped with a warning on stderr.
// Returns the number of entries written.
std::uint64_t unpack_tar_into(int tar_fd, const std::filesystem::path& dir);

// Downloads GET `target` (a .../files?path= route; `remote_path` is its path) to `local`: a file is written to `local`
// (or into it, when it is a directory) via a temporary file renamed into place; a tar (a directory) is unpacked
// into `local` (created when missing) with unpack_tar_into. Throws on failure.
void download_files(const http::HttpClient& client, const std::string& target, const std::string& remote_path,
                    const std::filesystem::path& local);

// Copies `source` to `destination`, exactly one of them "ID:/path". Upload: capsuled opens the local file or
// directory (made absolute) with this user's rights and copies it to the path (a path ending in '/' gets the
// local name appended: into that directory). Download: a file is written to
// `destination` (or into it, when it is a directory) via a temporary file renamed into place; a directory's
// tar is unpacked into `destination` (created when missing). Prints nothing; throws on failure.
void cmd_session_cp(const std::string& socket, const std::string& source, const std::string& destination);

}  // namespace capsule::client
