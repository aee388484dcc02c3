// Checkpoints of a session's copy-on-write workspace: its upper layer copied to a named point, and reset
// back to the start (O(1): a fresh upper) or to a point. Called by the session file routes (session_files_api.cpp).
#pragma once

#include <nlohmann/json.hpp>
#include <optional>
#include <string>

#include "daemon/sessions/session_manager.h"

namespace capsule::daemon {

inline constexpr std::size_t kMaxCheckpoints = 32;

// Throws ApiError 400 invalid_request unless `name` is 1-64 of [A-Za-z0-9._-], not starting with '.'.
void check_checkpoint_name(const std::string& name);

// Copies the workspace's upper layer (whiteouts and overlay xattrs kept) to <dir>/checkpoints/<name>, on the
// session thread, so no exec starts meanwhile. Returns {"name", "bytes"}. Throws ApiError: 409 conflict when
// the name exists, there are kMaxCheckpoints already, or the session has a disk limit (its layers live on the
// box's own disk), 400 invalid_request without a copy-on-write workspace.
nlohmann::json save_checkpoint(const SessionBox& box, const std::string& name);

// While the box is down (SessionManager::recreate): the workspace's upper and work dirs emptied, then filled
// with the checkpoint `to` when given. Throws ApiError 404 not_found for an unknown checkpoint.
void restore_checkpoint(const SessionBox& box, const std::optional<std::string>& to);

// Names of the session's checkpoints, oldest first.
std::vector<std::string> list_checkpoints(const std::string& session_dir);

}  // namespace capsule::daemon
