// Who may use which image: a caller's view of the image store (RefViewer) and the owner and sharing a ref gets
// when a caller points it (RefWrite), from one place for imports, commits, bundles and runs.
#pragma once

#include <nlohmann/json.hpp>

#include "daemon/auth.h"
#include "images/ref_table.h"

namespace capsule::daemon {

// Root and the admin group see every ref; anyone else its own, public ones and those shared with its groups.
images::RefViewer ref_viewer(const Caller& caller, const AccessPolicy& policy);

// How a ref is pointed: by an import (root's are system images, public unless it says otherwise) or by a
// commit or a bundle (private to whoever made it unless it says otherwise).
enum class RefOrigin { kImport, kCommit, kBundle };

// The owner is the caller; `body`'s optional "public" (bool) and "group" (a group name or gid the caller is in)
// share it. Root and the admin group may replace another owner's ref. Throws ApiError 400 invalid_request for
// a bad field, 403 forbidden for a group the caller is not in.
images::RefWrite ref_write(const Caller& caller, const AccessPolicy& policy, RefOrigin origin,
                           const nlohmann::json& body = nlohmann::json::object());

// The "public"/"group" fields of `body` applied to `access` (absent ones leave it as it is): what
// PATCH /v1/images/{ref} changes. Same errors as ref_write.
images::RefAccess shared_access(const Caller& caller, images::RefAccess access, const nlohmann::json& body);

// {"owner", "public"[, "group"]} as GET /v1/images shows each ref.
nlohmann::json ref_access_json(const images::RefAccess& access);

}  // namespace capsule::daemon
