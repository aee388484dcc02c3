// Pinning, workspace authorization and resolution of an accepted run into the launcher's SandboxSpec.
// Every refusal names the request field it concerns.
#include "daemon/resolve.h"

#include <sys/stat.h>
#include <sys/utsname.h>

#include <fstream>
#include <sstream>

#include "daemon/image_access.h"
#include "daemon/runs/replay_vary.h"
#include "http/response.h"
#include "images/host_image.h"
#include "images/image_stack.h"
#include "images/image_user.h"
#include "sandbox/userns.h"
#include "spec/capsule_version.h"
#include "spec/json_fields.h"
#include "store/digest.h"

namespace capsule::daemon {
namespace {

using nlohmann::json;
using spec::invalid;
using spec::WorkspaceMode;

std::string read_text(const std::string& path) {
  std::ifstream file(path);
  std::stringstream text;
  text << file.rdbuf();
  return text.str();
}

// Names resolved now, from the store and the release table.
void pin_from_names(Submission& run, const ImageCatalog& catalog) {
  spec::RunSpec& spec = run.spec;
  spec::Pinned& pinned = run.pinned;
  pinned.image_digests.clear();
  pinned.image_choice = json::object();
  pinned.toolchains.clear();
  if (spec.toolchains.empty() && spec.image == "host") return;  // parse_run_spec refuses layers on host
  if (catalog.store == nullptr) throw http::ApiError("image_not_found", "image: this capsuled has no image store");
  const images::RefViewer viewer = ref_viewer(run.caller, catalog.access);
  try {
    if (!spec.toolchains.empty()) {
      images::ToolchainRequest request;
      request.toolchains = spec.toolchains;
      if (spec.as_of) request.as_of = base::parse_date(*spec.as_of);
      const images::ToolchainChoice choice = images::select_toolchain_image(
          images::toolchain_candidates(catalog.store->list(viewer)), request, catalog.python_releases);
      const images::ImageCandidate& picked = choice.image;
      json stacked = json::array();
      if (!picked.base_digest.empty()) {
        pinned.image_digests.push_back(picked.base_digest);
        stacked.push_back({{"ref", picked.base_ref}, {"digest", picked.base_digest}});
      }
      pinned.image_digests.push_back(picked.digest);
      stacked.push_back({{"ref", picked.ref}, {"digest", picked.digest}});
      pinned.toolchains = choice.provided;
      pinned.image_choice = {{"wanted", choice.wanted}, {"provided", choice.provided}, {"reason", choice.reason},
                             {"matching_images", choice.matching_images}, {"images", stacked}};
      if (choice.python_auto) {
        pinned.image_choice["python_auto"] = {{"version", choice.python_auto->version},
                                              {"reason", choice.python_auto->reason}};
      }
    } else {
      pinned.image_digests.push_back(catalog.store->resolve(spec.image, viewer).str());
    }
  } catch (const images::ToolchainError& e) {
    if (e.code() == "no_matching_image") throw http::ApiError("no_matching_image", std::string("toolchains: ") + e.what());
    if (e.code() == "invalid_release_data") throw http::ApiError("invalid_release_data", e.what());
    if (e.code() == "release_data_outdated") throw http::ApiError("release_data_outdated", std::string("as_of: ") + e.what());
    invalid("toolchains", e.what());
  } catch (const base::Error& e) {
    throw http::ApiError("image_not_found", "image: '" + spec.image + "' is not installed (" + e.what() + ")");
  }
  for (std::size_t i = 0; i < spec.layers.size(); ++i) {
    try {
      pinned.image_digests.push_back(catalog.store->resolve(spec.layers[i], viewer).str());
    } catch (const base::Error& e) {
      throw http::ApiError("image_not_found", "layers[" + std::to_string(i) + "]: '" + spec.layers[i] +
                                                 "' is not installed (" + e.what() + ")");
    }
  }
}

// Pins from a stored run must fit its spec; whether each image is still installed, by digest (refs are not
// looked at), resolve_run finds when it inspects them.
void check_given_pins(const Submission& run) {
  const bool host = run.spec.toolchains.empty() && run.spec.image == "host";
  if (host != run.pinned.image_digests.empty()) {
    invalid("pinned.image_digests", host ? "must be empty for the host image" : "must list the run's images");
  }
}

// An rw workspace is written as sandbox root, which the launcher maps to the directory's owner but never to host
// root: a directory owned by uid 0 or group 0 would be silently read-only inside, so it is refused here.
void require_rw_owner(const std::string& path, const struct stat& st) {
  if (st.st_uid != 0 && st.st_gid != 0) return;
  throw http::ApiError("invalid_spec", "workspace.path: '" + path + "' is owned by uid " + std::to_string(st.st_uid) +
                                           " gid " + std::to_string(st.st_gid) + "; an rw workspace is written as "
                                           "sandbox root, which maps to the directory's owner and never to host root "
                                           "(uid or gid 0), so it would be read-only inside: use mode cow (and fetch "
                                           "or commit the run's outputs), or chown it to a non-root owner, e.g. "
                                           "chown -R 1000:1000 '" + path + "'");
}

}  // namespace

Submission parse_submission(const json& body, const spec::LimitPolicy& policy) {
  Submission run;
  if (body.is_object() && body.contains("spec")) {
    spec::reject_unknown(body, "", {"spec", "pinned"});
    run.spec = spec::parse_run_spec(body["spec"], policy);
    if (body.contains("pinned")) {
      run.pinned = spec::parse_pinned(body["pinned"]);
      run.pins_given = true;
    }
  } else {
    run.spec = spec::parse_run_spec(body, policy);
  }
  return run;
}

void pin_images(Submission& run, const ImageCatalog& catalog) {
  const std::optional<std::string> cutoff = run.spec.network == "proxy" ? run.spec.as_of : std::nullopt;
  if (!run.pins_given) {
    pin_from_names(run, catalog);
    run.pinned.cutoff = cutoff;
    return;
  }
  check_given_pins(run);
  if (run.pinned.cutoff != cutoff) {
    invalid("pinned.cutoff", "must be the spec's as_of for a network \"proxy\" run, and absent otherwise");
  }
  if (catalog.store == nullptr) return;  // resolve_run says the images are not installed
  const images::RefViewer viewer = ref_viewer(run.caller, catalog.access);
  for (std::size_t i = 0; i < run.pinned.image_digests.size(); ++i) {
    try {
      catalog.store->resolve(run.pinned.image_digests[i], viewer);
    } catch (const base::Error& e) {
      throw http::ApiError("image_not_found", "pinned.image_digests[" + std::to_string(i) + "]: " +
                                                  run.pinned.image_digests[i] + " is not installed (" + e.what() + ")");
    }
  }
}

void authorize_workspace(Submission& run, const Caller& caller) {
  run.caller = caller;
  run.workspace_dir.reset();
  if (caller.is_root() && run.spec.workspace && run.spec.workspace->mode == WorkspaceMode::kReadWrite) {
    struct stat st;
    if (stat(run.spec.workspace->path.c_str(), &st) == 0 && S_ISDIR(st.st_mode)) require_rw_owner(run.spec.workspace->path, st);
  }
  if (caller.is_root() || !run.spec.workspace || !run.spec.workspace->snapshot.empty()) return;
  // A reproducible run given its pins mounts its pinned snapshot (attach_snapshot_workspace checks who may use
  // it), not the directory, which may have changed or gone since.
  if (run.spec.reproducible && run.pins_given && run.pinned.workspace_digest) return;
  const spec::Workspace& workspace = *run.spec.workspace;
  const bool writable = workspace.mode == WorkspaceMode::kReadWrite;
  auto opened = std::make_shared<OpenedHostPath>(open_as_caller(
      caller, workspace.path, writable ? HostAccess::kWriteDir : HostAccess::kReadDir, "workspace.path",
      "invalid_spec"));
  const std::string& path = workspace.path;
  if (opened->st.st_uid != caller.uid) {
    throw http::ApiError("forbidden", "workspace.path: '" + path + "' is owned by uid " + std::to_string(opened->st.st_uid) +
                                         "; " + caller.describe() + " may only use a directory it owns as a workspace "
                                         "(the sandbox sees the tree with its owners' ids)");
  }
  // ro and rw show the tree with sandbox root standing for the directory's owner and group (the launcher's
  // owner mapping): both must be the caller's, or the run would get a group's rights the caller lacks.
  if (workspace.mode != WorkspaceMode::kCow && !caller.in_group(opened->st.st_gid)) {
    throw http::ApiError("forbidden", "workspace.path: '" + path + "' has group " + std::to_string(opened->st.st_gid) +
                                         ", which " + caller.describe() + " is not in; an ro or rw workspace acts with "
                                         "the directory's group (use cow, or chgrp it)");
  }
  if (writable) require_rw_owner(path, opened->st);
  if (workspace.mode == WorkspaceMode::kReadOnly) {
    // A read-only copy of the mount tree at the opened directory: the launcher binds it as it binds an rw
    // workspace (sandbox root mapped to the caller), and the copy keeps it read-only.
    try {
      opened->fd.reset(sandbox::make_detached_mount(opened->proc_path(), -1, false, true, true));
    } catch (const std::exception& e) {
      throw http::ApiError("internal_error", "workspace.path: a read-only view of '" + path + "': " + e.what());
    }
  }
  run.workspace_dir = std::move(opened);
}

sandbox::SandboxSpec resolve_run(Submission& run, const ResolveContext& context) {
  const spec::RunSpec& spec = run.spec;
  sandbox::SandboxSpec out;
  std::vector<std::string> image_env;
  std::string image_cwd = "/";
  std::optional<std::string> image_home;  // the host image's env sets HOME itself
  if (run.pinned.image_digests.empty()) {
    if (spec.image != "host" || !spec.toolchains.empty()) {
      throw http::ApiError("image_not_found", "image: '" + spec.image + "' is not installed");
    }
    images::HostImage image = images::prepare_host_image(context.images_dir);
    out.rootfs_layers = image.layers;
    out.mounts = image.mounts;
    image_env = image.env;
  } else {
    if (context.store == nullptr) throw http::ApiError("image_not_found", "image: this capsuled has no image store");
    std::vector<images::ImageInfo> stacked;
    for (std::size_t i = 0; i < run.pinned.image_digests.size(); ++i) {
      const std::string& digest = run.pinned.image_digests[i];
      try {
        stacked.push_back(context.store->inspect(digest));
      } catch (const base::Error& e) {
        // A stored run's pins name the field they came in; names pinned just now, the image.
        throw http::ApiError("image_not_found", (run.pins_given ? "pinned.image_digests[" + std::to_string(i) + "]: "
                                                                : std::string("image: ")) +
                                                    digest + " is not installed (" + e.what() + ")");
      }
    }
    images::ImageStack stack;
    try {
      stack = images::stack_images(stacked);
    } catch (const base::Error& e) {
      throw http::ApiError("too_many_layers", std::string("image: ") + e.what());
    }
    out.rootfs_layers = stack.layer_dirs;
    image_env = stack.config.env;
    if (!stack.config.working_dir.empty()) image_cwd = stack.config.working_dir;
    try {
      const images::ImageUser user = images::resolve_image_user(stack.config.user, stack.layer_dirs);
      out.uid = user.uid;
      out.gid = user.gid;
      image_home = user.home;
    } catch (const base::Error& e) {
      throw http::ApiError("invalid_image", std::string("image: ") + e.what());
    }
  }
  out.argv = spec.argv;
  std::map<std::string, std::string> env;
  for (const auto& entry : image_env) env[entry.substr(0, entry.find('='))] = entry.substr(entry.find('=') + 1);
  for (const auto& [key, value] : spec.env) env[key] = value;
  if (image_home && !env.count("HOME")) env["HOME"] = *image_home;  // as Docker: the user's passwd entry
  for (const auto& [key, value] : env) out.env.push_back(key + "=" + value);
  if (run.workspace_snapshot) {
    // The snapshot's tree (root-owned, shown as sandbox root's) under the run's own upper: nothing is copied.
    out.overlays.push_back(sandbox::OverlayMount{
        {run.workspace_snapshot->tree()}, context.run_dir + "/upper", context.run_dir + "/work", "/workspace"});
  } else if (spec.workspace && !spec.workspace->snapshot.empty()) {
    throw http::ApiError("snapshot_not_found", "workspace.snapshot: " + spec.workspace->snapshot + " was not attached");
  } else if (spec.workspace) {
    // Root: the path, as always. Anyone else: the directory authorize_workspace opened as the caller.
    std::string source = spec.workspace->path;
    if (!run.caller.is_root()) {
      if (!run.workspace_dir) {
        throw http::ApiError("forbidden", "workspace.path: '" + source + "' was not opened as " + run.caller.describe());
      }
      source = run.workspace_dir->proc_path();
    }
    struct stat st;
    if (stat(source.c_str(), &st) != 0 || !S_ISDIR(st.st_mode)) {
      invalid("workspace.path", "'" + spec.workspace->path + "' is not a directory on the host");
    }
    switch (spec.workspace->mode) {
      case WorkspaceMode::kCow:
      {
        // A non-root caller's tree is read with the caller's rights (sandbox root as the caller, other ids
        // unmapped), as its ro and rw workspaces are; root's shows host owners as they are.
        sandbox::OverlayMount view{{source}, context.run_dir + "/upper", context.run_dir + "/work", "/workspace"};
        if (!run.caller.is_root()) view.layers_owner = std::make_pair(run.caller.uid, run.caller.gid);
        out.overlays.push_back(std::move(view));
      }
        break;
      case WorkspaceMode::kReadOnly:
        // A non-root caller's source is already a read-only mount: bound like an rw one, it is shown with
        // sandbox root as the caller, not with host ids as they are (host root's files as sandbox root's).
        out.mounts.push_back(sandbox::BindMount{source, "/workspace", run.caller.is_root(), true});
        break;
      case WorkspaceMode::kReadWrite:
        // The launcher maps sandbox root to the directory's owner: for a non-root caller, the caller itself
        // (authorize_workspace made sure), so what the run creates is the caller's on the host.
        out.mounts.push_back(sandbox::BindMount{source, "/workspace", false, true});
        break;
    }
  }
  // A replay varied with "order" (runs/replay_vary.h) loads this plugin by name: it is there, read-only.
  if (uses_test_order_plugin(spec)) out.mounts.push_back(test_order_plugin_mount(context.images_dir));
  out.cwd = spec.cwd.value_or(spec.workspace ? "/workspace" : image_cwd);
  out.protect = spec.protect;  // a session sets its own (SessionSpec::protect) after this
  out.protect_base = spec.workspace ? "/workspace" : "/";
  const std::string policy_path = context.policies_dir + "/" + spec.policy + ".json";
  struct stat st;
  if (stat(policy_path.c_str(), &st) != 0) throw http::ApiError("policy_not_found", "policy: '" + spec.policy + "' does not exist");
  out.seccomp_profile = read_text(policy_path);
  const std::string policy_sha256 = store::sha256_of(out.seccomp_profile).str();
  if (run.pins_given && !run.pinned.policy_sha256.empty() && run.pinned.policy_sha256 != policy_sha256) {
    throw http::ApiError("pin_mismatch", "pinned.policy_sha256: policy '" + spec.policy + "' is now " + policy_sha256 +
                                            ", not the pinned " + run.pinned.policy_sha256);
  }
  run.pinned.policy_sha256 = policy_sha256;
  out.limits = spec.limits;
  if (out.limits.disk_bytes == 0) out.limits.disk_inodes = 0;  // inodes count only on a disk of the run's own
  out.stdin_data = spec.stdin_data;
  pin_run_facts(run);
  return out;
}

void pin_run_facts(Submission& run) {
  spec::Pinned& pinned = run.pinned;
  struct utsname names{};
  pinned.kernel = uname(&names) == 0 ? std::optional<std::string>(names.release) : std::nullopt;
  pinned.capsule = spec::kCapsuleVersion;
  std::vector<std::string> reasons;
  if (run.pinned.image_digests.empty()) {
    pinned.host_image = images::host_image_digest();
    reasons.push_back(images::kHostImageNotReplayable);
  } else {
    pinned.host_image.reset();
  }
  if (run.spec.workspace && !pinned.workspace_digest) {
    reasons.push_back(std::string("the workspace is the host directory ") + run.spec.workspace->path +
                      " without a snapshot (workspace_digest is null): replaying later uses its contents then");
  }
  pinned.not_replayable = std::move(reasons);
  pinned.dependencies.clear();
}

}  // namespace capsule::daemon
