// Checkpoint storage: <session dir>/checkpoints/<name>/ holds a copy of the workspace's upper layer made with
// cp -a (whiteouts, opaque-dir xattrs, owners and modes kept; symlinks copied, never followed).
#include "daemon/sessions/session_checkpoints.h"

#include <spawn.h>
#include <sys/stat.h>
#include <sys/wait.h>

#include <algorithm>
#include <filesystem>

#include "http/response.h"

extern char** environ;

namespace capsule::daemon {
namespace {

namespace fs = std::filesystem;

void require_cow_workspace(const SessionBox& box) {
  if (box.workspace_upper.empty()) {
    throw http::ApiError("invalid_request", "the session has no copy-on-write workspace to checkpoint");
  }
  if (box.sandbox.environment().limits.disk_bytes != 0) {
    throw http::ApiError("conflict", "checkpoints are not available for a session with limits.disk: its layers "
                                     "live on the box's own disk, which a reset replaces");
  }
}

// cp -a SOURCE/. DEST: the tree's contents as they are, by coreutils, which knows every file type and xattr.
void copy_tree(const std::string& source, const std::string& dest) {
  std::error_code ec;
  fs::create_directories(dest, ec);
  if (ec) throw http::ApiError("internal_error", "checkpoint: creating " + dest + ": " + ec.message());
  const std::string from = source + "/.";
  const char* argv[] = {"cp", "-a", "--reflink=auto", "--", from.c_str(), dest.c_str(), nullptr};
  pid_t pid = 0;
  if (posix_spawn(&pid, "/bin/cp", nullptr, nullptr, const_cast<char* const*>(argv), environ) != 0) {
    throw http::ApiError("internal_error", "checkpoint: cannot start /bin/cp");
  }
  int status = 0;
  while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
    throw http::ApiError("internal_error", "checkpoint: copying " + source + " to " + dest + " failed");
  }
}

void empty_dir(const std::string& dir) {
  std::error_code ec;
  for (auto it = fs::directory_iterator(dir, ec); !ec && it != fs::directory_iterator(); it.increment(ec)) {
    std::error_code ignored;
    fs::remove_all(it->path(), ignored);
  }
}

std::uint64_t tree_bytes(const std::string& dir) {
  std::uint64_t total = 0;
  std::error_code ec;
  for (auto it = fs::recursive_directory_iterator(dir, fs::directory_options::skip_permission_denied, ec);
       !ec && it != fs::recursive_directory_iterator(); it.increment(ec)) {
    std::error_code size_error;
    if (it->is_regular_file(size_error) && !it->is_symlink(size_error)) total += it->file_size(size_error);
  }
  return total;
}

std::string checkpoints_dir(const std::string& session_dir) { return session_dir + "/checkpoints"; }

}  // namespace

void check_checkpoint_name(const std::string& name) {
  const bool ok = !name.empty() && name.size() <= 64 && name[0] != '.' &&
                  std::all_of(name.begin(), name.end(), [](char c) {
                    return std::isalnum(static_cast<unsigned char>(c)) || c == '.' || c == '_' || c == '-';
                  });
  if (!ok) throw http::ApiError("invalid_request", "name: '" + name + "' is not 1-64 of [A-Za-z0-9._-]");
}

std::vector<std::string> list_checkpoints(const std::string& session_dir) {
  std::vector<std::pair<fs::file_time_type, std::string>> found;
  std::error_code ec;
  for (auto it = fs::directory_iterator(checkpoints_dir(session_dir), ec); !ec && it != fs::directory_iterator();
       it.increment(ec)) {
    std::error_code time_error;
    found.emplace_back(fs::last_write_time(it->path(), time_error), it->path().filename().string());
  }
  std::sort(found.begin(), found.end());
  std::vector<std::string> names;
  for (auto& [time, name] : found) names.push_back(std::move(name));
  return names;
}

nlohmann::json save_checkpoint(const SessionBox& box, const std::string& name) {
  check_checkpoint_name(name);
  require_cow_workspace(box);
  const std::string dest = checkpoints_dir(box.dir) + "/" + name;
  if (fs::exists(dest)) throw http::ApiError("conflict", "checkpoint '" + name + "' exists");
  if (list_checkpoints(box.dir).size() >= kMaxCheckpoints) {
    throw http::ApiError("conflict", "a session keeps at most " + std::to_string(kMaxCheckpoints) + " checkpoints");
  }
  try {
    copy_tree(box.workspace_upper, dest);
  } catch (...) {
    std::error_code ignored;
    fs::remove_all(dest, ignored);
    throw;
  }
  return {{"name", name}, {"bytes", tree_bytes(dest)}};
}

void restore_checkpoint(const SessionBox& box, const std::optional<std::string>& to) {
  if (box.workspace_upper.empty()) return;  // nothing kept outside the box: a fresh box is the start
  std::string source;
  if (to) {
    require_cow_workspace(box);
    source = checkpoints_dir(box.dir) + "/" + *to;
    if (!fs::is_directory(source)) throw http::ApiError("not_found", "no checkpoint named '" + *to + "'");
  }
  empty_dir(box.workspace_upper);
  empty_dir(box.workspace_work);
  if (to) copy_tree(source, box.workspace_upper);
}

}  // namespace capsule::daemon
