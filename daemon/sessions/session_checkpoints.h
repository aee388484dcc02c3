// Checkpoints of a session's copy-on-write workspace: its upper layer copied to a named point, and reset
// back to the start (O(1): a fresh box, emptied layers) or to a point. Called by the session file routes (session_files_api.cpp).
#pragma once

#include <nlohmann/json.hpp>
#include <optional>
#include <string>

#include "daemon/sessions/session_manager.h"

namespace capsule::daemon {

inline constexpr std::size_t kMaxCheckpoints = 32;
// Bytes all of a session's checkpoints may take without a disk limit (with one: that limit).
inline constexpr std::uint64_t kDefaultCheckpointBudget = 10ull << 30;

// Throws ApiError 400 invalid_request unless `name` is 1-64 of [A-Za-z0-9._-], not starting with '.'.
void check_checkpoint_name(const std::string& name);

// Copies the workspace's upper layer (whiteouts and overlay xattrs kept) to <dir>/checkpoints/<name>. Call it in
// SessionManager::with_frozen_box: nothing in the box can change (or swap for a link) what is being copied, and
// other sessions go on meanwhile. Returns {"name", "bytes"}. Throws ApiError:
// 409 conflict when the name exists or there are kMaxCheckpoints already, 507 insufficient_storage past the
// session's budget (its disk limit, else kDefaultCheckpointBudget), 400 without a copy-on-write workspace.
nlohmann::json save_checkpoint(const SessionBox& box, const std::string& name);

// Throws ApiError 404 not_found unless the session has the checkpoint `name` (400 for a malformed name).
void require_checkpoint(const SessionBox& box, const std::string& name);

// While the box is down (SessionManager::recreate): the workspace's upper and work dirs emptied.
void clear_workspace_layers(const SessionBox& box);

// Where the checkpoint `name` is kept: SessionManager::recreate's workspace seed.
std::string checkpoint_path(const SessionBox& box, const std::string& name);

// Names of the session's checkpoints, oldest first.
std::vector<std::string> list_checkpoints(const std::string& session_dir);

}  // namespace capsule::daemon
