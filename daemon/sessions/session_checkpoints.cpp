// Checkpoint storage: <session dir>/checkpoints/<name>/ holds a copy of the workspace's upper layer made with
// sandbox::copy_tree_contents (whiteouts, opaque-dir xattrs, owners and modes kept; symlinks never followed).
#include "daemon/sessions/session_checkpoints.h"

#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstring>
#include <thread>
#include <filesystem>

#include "http/response.h"
#include "sandbox/copy_tree.h"

namespace capsule::daemon {
namespace {

namespace fs = std::filesystem;

void require_cow_workspace(const SessionBox& box) {
  if (box.workspace_upper.empty()) {
    throw http::ApiError("invalid_request", "the session has no copy-on-write workspace to checkpoint");
  }
}

// O(1) for the caller: the directory is renamed away under <session dir>/trash and made anew (empty, same
// owner and mode); the old tree is removed by a thread of its own (the session dir goes with the session).
void replace_with_empty_dir(const std::string& dir, const std::string& session_dir) {
  struct stat st;
  if (::stat(dir.c_str(), &st) != 0) return;
  static std::atomic<std::uint64_t> counter{0};
  const std::string trash = session_dir + "/trash";
  std::error_code ec;
  fs::create_directories(trash, ec);
  const std::string away = trash + "/" + std::to_string(::getpid()) + "-" + std::to_string(counter++);
  if (::rename(dir.c_str(), away.c_str()) != 0 || ::mkdir(dir.c_str(), st.st_mode & 07777) != 0 ||
      ::chown(dir.c_str(), st.st_uid, st.st_gid) != 0) {
    throw http::ApiError("internal_error", "reset: replacing " + dir + ": " + std::strerror(errno));
  }
  std::thread([away] {
    std::error_code ignored;
    fs::remove_all(away, ignored);
  }).detach();
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
  std::uint64_t bytes = 0;
  try {
    sandbox::copy_tree_contents(box.workspace_upper, dest);
    bytes = tree_bytes(dest);
    std::uint64_t kept = 0;
    for (const std::string& other : list_checkpoints(box.dir)) kept += tree_bytes(checkpoints_dir(box.dir) + "/" + other);
    const std::uint64_t disk = box.sandbox.environment().limits.disk_bytes;
    const std::uint64_t budget = disk != 0 ? disk : kDefaultCheckpointBudget;
    if (kept > budget) {
      throw http::ApiError("insufficient_storage", "checkpoints of this session would take " + std::to_string(kept) +
                                                       " bytes, more than its " + std::to_string(budget) +
                                                       " (its disk limit); delete the session or reset first");
    }
  } catch (const sandbox::SandboxError& e) {
    std::error_code ignored;
    fs::remove_all(dest, ignored);
    // The copy goes to the state filesystem: full, that is 507 (as for any write of a caller's request).
    throw http::ApiError(base::is_out_of_space(e.cause().errno_value) ? "insufficient_storage" : "internal_error",
                         std::string("checkpoint: ") + e.what());
  } catch (...) {
    std::error_code ignored;
    fs::remove_all(dest, ignored);
    throw;
  }
  return {{"name", name}, {"bytes", bytes}};
}

void require_checkpoint(const SessionBox& box, const std::string& name) {
  check_checkpoint_name(name);
  require_cow_workspace(box);
  if (!fs::is_directory(checkpoints_dir(box.dir) + "/" + name)) {
    throw http::ApiError("not_found", "no checkpoint named '" + name + "'");
  }
}

void clear_workspace_layers(const SessionBox& box) {
  if (box.workspace_upper.empty()) return;  // nothing kept outside the box: a fresh box is the start
  replace_with_empty_dir(box.workspace_upper, box.dir);
  replace_with_empty_dir(box.workspace_work, box.dir);
}

std::string checkpoint_path(const SessionBox& box, const std::string& name) {
  require_checkpoint(box, name);
  return checkpoints_dir(box.dir) + "/" + name;
}

}  // namespace capsule::daemon
