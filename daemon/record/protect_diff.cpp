// Protect globs against a workspace diff: each listed change below a protected path is one violation, named by
// the glob and what happened to it; an incomplete diff is one violation of its own (fail closed).
#include "daemon/record/protect_diff.h"

#include "sandbox/protect.h"

namespace capsule::daemon {
namespace {

using nlohmann::json;

// The glob and the path as protect_glob_matches takes them: an absolute glob against the path from the root.
bool glob_matches_workspace_path(const std::string& glob, const std::string& path) {
  if (glob.starts_with("/")) return sandbox::protect_glob_matches(glob.substr(1), "workspace/" + path);
  return sandbox::protect_glob_matches(glob, path);
}

const std::string* covering_glob(const std::vector<std::string>& globs, const std::string& path) {
  for (const std::string& glob : globs) {
    if (protect_covers(glob, path)) return &glob;
  }
  return nullptr;
}

}  // namespace

bool protect_covers(const std::string& glob, const std::string& path) {
  std::string relative = path;
  while (!relative.empty() && relative.back() == '/') relative.pop_back();
  if (relative.empty()) return false;
  if (glob.starts_with("/") && glob_matches_workspace_path(glob, "")) return true;  // "/workspace", "/**"
  for (std::size_t slash = relative.find('/'); slash != std::string::npos; slash = relative.find('/', slash + 1)) {
    if (glob_matches_workspace_path(glob, relative.substr(0, slash))) return true;
  }
  return glob_matches_workspace_path(glob, relative);
}

bool diff_complete(const WorkspaceDiff& diff) { return !diff.truncated && diff.error_count == 0 && diff.errors.empty(); }

DiffLimits protect_walk_limits() {
  DiffLimits limits;
  limits.max_entries *= 10;
  limits.max_listed_bytes *= 10;
  return limits;
}

json protect_diff_violations(const std::vector<std::string>& globs, const WorkspaceDiff& diff, std::size_t max_listed) {
  json out = json::array();
  std::size_t unlisted = 0;
  for (const auto& [what, list] : {std::pair{"added", &diff.added}, std::pair{"modified", &diff.modified},
                                   std::pair{"deleted", &diff.deleted}}) {
    for (const DiffEntry& entry : *list) {
      const std::string* glob = covering_glob(globs, entry.path);
      if (glob == nullptr) continue;
      if (out.size() >= max_listed) {
        ++unlisted;
        continue;
      }
      std::string reason = "protect: ";
      reason += what;
      reason += ", matches '" + *glob + "'";
      out.push_back({{"path", entry.path}, {"reason", std::move(reason)}});
    }
  }
  if (unlisted > 0) {
    out.push_back({{"path", ""}, {"reason", "protect: " + std::to_string(unlisted) +
                                                " more changes of protected paths, not listed"}});
  }
  if (!diff_complete(diff)) {
    out.push_back({{"path", ""}, {"reason", "protect: the workspace diff was not complete (" +
                                                std::to_string(diff.error_count) + " entries unreadable, " +
                                                (diff.truncated ? "listing cut" : "listing whole") +
                                                "): what it did not list cannot be checked"}});
  }
  return out;
}

}  // namespace capsule::daemon
