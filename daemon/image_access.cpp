// Image ownership at the daemon's edge: callers to RefViewer/RefWrite, and the sharing fields of import,
// commit and PATCH bodies (a group by name or gid, one the caller is in).
#include "daemon/image_access.h"

#include <grp.h>

#include <vector>

#include "http/response.h"

namespace capsule::daemon {

images::RefViewer ref_viewer(const Caller& caller, const AccessPolicy& policy) {
  images::RefViewer viewer;
  viewer.sees_all = sees_all_runs(caller, policy);
  viewer.uid = caller.uid;
  viewer.groups = caller.groups;
  viewer.groups.push_back(caller.gid);
  if (!caller.known) {  // no credentials: only what is public
    viewer.sees_all = false;
    viewer.uid = static_cast<uid_t>(-1);
    viewer.groups.clear();
  }
  return viewer;
}

namespace {

gid_t group_named(const nlohmann::json& value) {
  if (value.is_number_unsigned() && value.get<std::uint64_t>() < 0xffffffffULL) return static_cast<gid_t>(value.get<std::uint64_t>());
  if (!value.is_string() || value.get<std::string>().empty()) {
    throw http::ApiError("invalid_request", "group: must be a group name or gid");
  }
  const std::string name = value.get<std::string>();
  group entry{};
  group* found = nullptr;
  std::vector<char> buffer(16384);
  if (getgrnam_r(name.c_str(), &entry, buffer.data(), buffer.size(), &found) != 0 || found == nullptr) {
    throw http::ApiError("invalid_request", "group: no group named '" + name + "' on this host");
  }
  return found->gr_gid;
}

}  // namespace

images::RefAccess shared_access(const Caller& caller, images::RefAccess access, const nlohmann::json& body) {
  if (!body.is_object()) throw http::ApiError("invalid_request", "body: must be a JSON object");
  if (body.contains("public")) {
    if (!body["public"].is_boolean()) throw http::ApiError("invalid_request", "public: must be true or false");
    access.is_public = body["public"].get<bool>();
  }
  if (body.contains("group")) {
    if (body["group"].is_null()) {
      access.group.reset();
    } else {
      const gid_t gid = group_named(body["group"]);
      if (!caller.is_root() && !caller.in_group(gid)) {
        throw http::ApiError("forbidden", "group: " + caller.describe() + " is not in group " + std::to_string(gid) +
                                              " and may not share with it");
      }
      access.group = gid;
    }
  }
  return access;
}

images::RefWrite ref_write(const Caller& caller, const AccessPolicy& policy, RefOrigin origin, const nlohmann::json& body) {
  images::RefWrite write;
  write.access.owner = caller.uid;
  write.access.is_public = origin == RefOrigin::kImport && caller.is_root();
  write.replaces_others = sees_all_runs(caller, policy);
  if (!caller.known) throw http::ApiError("forbidden", caller.describe() + " may not point image refs");
  write.access = shared_access(caller, write.access, body);
  return write;
}

nlohmann::json ref_access_json(const images::RefAccess& access) {
  nlohmann::json out = {{"owner", access.owner}, {"public", access.is_public}};
  if (access.group) out["group"] = *access.group;
  return out;
}

}  // namespace capsule::daemon
