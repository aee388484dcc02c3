// RunSpec: the body of POST /v1/runs, parsed and validated in one place with its defaults, and its
// resolution (with the daemon's configuration) into the launcher's SandboxSpec.
#pragma once

#include <chrono>
#include <cstdint>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "daemon/auth.h"
#include "images/error.h"
#include "images/image_store.h"
#include "images/toolchain_select.h"
#include "sandbox/spec.h"

namespace capsule::daemon {

enum class WorkspaceMode { kCow, kReadOnly, kReadWrite };

struct RunLimits {
  std::chrono::milliseconds wall_time{0};
  std::chrono::milliseconds cpu_time{0};
  std::chrono::milliseconds kill_grace{0};
  std::uint64_t memory_bytes = 0;
  std::uint64_t pids = 0;
  double cpus = 0;
  std::uint64_t tmp_size_bytes = 0;
  std::uint64_t output_cap_bytes = 0;
  std::uint64_t disk_bytes = 0;  // the writable layers' disk of its own (sandbox/quota.h)
  std::uint64_t inodes = 0;      // files on it
};

struct RunSpec {
  std::string image = "host";                   // "host", "name[:tag]", "name@sha256:..." or "sha256:..."
  std::vector<std::string> layers;              // image refs stacked in order on the base (image or toolchains)
  std::map<std::string, std::string> toolchains;  // instead of image: {"java": "17"}, {"python": "auto"}
  std::optional<std::string> as_of;              // "YYYY-MM-DD": the date python "auto" is chosen for
  std::vector<std::string> argv;
  std::map<std::string, std::string> env;
  std::optional<std::string> cwd;
  std::optional<std::string> workspace_path;
  WorkspaceMode workspace_mode = WorkspaceMode::kCow;
  RunLimits limits;
  std::string network = "none";
  std::string policy = "default";
  std::map<std::string, std::string> labels;
  std::vector<std::string> junit_globs;
  std::optional<std::string> stdin_data;

  // Who submitted it: a non-root caller's workspace is opened with its credentials (authorize_workspace).
  Caller caller = root_caller();
  // The workspace directory as the caller opened it; the sandbox mounts this exact directory through
  // /proc/self/fd (it stays open as long as the spec), so a path swapped after the check changes nothing.
  std::shared_ptr<const OpenedHostPath> workspace_dir;

  // Set by pin_image at submission, so the run uses the images it was accepted with even if a ref moves.
  std::string image_digest;                // the base; empty: the built-in host image
  std::vector<std::string> layer_digests;  // stacked on it, in order: a toolchain layer picked, then `layers`
  nlohmann::json image_choice;             // for toolchain requests what was asked, found and why

  // image_digest then layer_digests: every image the root is composed of, base first; empty for host.
  std::vector<std::string> image_digests() const;
  nlohmann::json to_json() const;  // the resolved form stored in the record
};

// Daemon-wide defaults and ceilings; a request's limits are clamped to the maxima.
struct LimitPolicy {
  RunLimits defaults;
  RunLimits maxima;  // 0: no ceiling
};
LimitPolicy default_limit_policy();

// A "limits" object (durations as ms or "10m", sizes as bytes or "4g"); `where` prefixes field names in
// errors. Fields left out stay 0 (unset). Throws ApiError 400 like parse_run_spec.
RunLimits parse_run_limits(const nlohmann::json& object, const std::string& where);

// Throws ApiError("invalid_spec", "<field>: <problem>") for the first problem; unknown fields included.
RunSpec parse_run_spec(const nlohmann::json& body, const LimitPolicy& policy);

// Where images come from: the OCI store and the Python release table for "auto" toolchains.
struct ImageCatalog {
  const images::ImageStore* store = nullptr;
  const images::PythonReleases* python_releases = nullptr;
};

// Turns spec.image or spec.toolchains, and spec.layers, into spec.image_digest, layer_digests and
// image_choice. A toolchain matched by a layer image (label org.capsule.layer.base) gives its base as the
// image and the layer as the first of layer_digests. Throws ApiError 404 (image_not_found naming image or
// layers[i], no_matching_image) or 400 naming the field.
void pin_image(RunSpec& spec, const ImageCatalog& catalog);

// Sets spec.caller and, for a non-root caller with a workspace, opens it as that caller into
// spec.workspace_dir: ro and cow need the directory readable and searchable, rw writable as well. The
// directory must be the caller's own: ro and rw show it with sandbox root as its owner and group (so its
// group must be one of the caller's too), and cow shows the tree with host ids as they are. ro gets a
// read-only copy of the mount. Throws ApiError 403 forbidden naming the path and the caller's uid, or 400
// invalid_spec. Root: nothing opened, the path is used as before.
void authorize_workspace(RunSpec& spec, const Caller& caller);

struct ResolveContext {
  std::string images_dir;    // host image cache
  std::string policies_dir;  // <name>.json seccomp profiles
  std::string run_dir;       // per-run dir: workspace upper/work live here
  const images::ImageStore* store = nullptr;  // for pinned images
};

// Resolves names (image, policy, workspace) into a SandboxSpec. The pinned images are stacked with their
// configs merged (images/image_stack.h); the merged User is looked up in the stack's /etc/passwd, and HOME,
// unless the image or the run sets it, is that user's home ("/" without an entry). Throws ApiError (400/404)
// naming the field.
sandbox::SandboxSpec resolve_run_spec(const RunSpec& spec, const ResolveContext& context);

}  // namespace capsule::daemon
