// Resolution of an accepted run: its names pinned (images to digests, the policy to its digest), its workspace
// opened as the caller, and the whole turned into the launcher's SandboxSpec. The daemon's half of spec/.
#pragma once

#include <memory>
#include <string>

#include "daemon/auth.h"
#include "daemon/snapshots/snapshot_store.h"
#include "images/image_store.h"
#include "images/toolchain_select.h"
#include "proxy/frozen_set.h"
#include "sandbox/spec.h"
#include "spec/pinned.h"
#include "spec/run_spec.h"

namespace capsule::daemon {

// A run as capsuled accepted it: the spec, its pins, and who asked.
struct Submission {
  spec::RunSpec spec;
  spec::Pinned pinned;
  // True when the request carried "pinned" (a stored run submitted again): the pins are used as given, never
  // looked up again, and a pin that no longer holds (an image gone, the policy changed) refuses the run.
  bool pins_given = false;
  // Who submitted it: a non-root caller's workspace is opened with its credentials (authorize_workspace).
  Caller caller = root_caller();
  // The workspace directory as the caller opened it; the sandbox mounts this exact directory through
  // /proc/self/fd (it stays open as long as the submission), so a path swapped after the check changes nothing.
  std::shared_ptr<const OpenedHostPath> workspace_dir;
  // A replay of a network "proxy" run: its proxy serves only the original's objects (daemon/api/run_replay_api.cpp).
  std::shared_ptr<const proxy::FrozenSet> frozen;
  // A snapshot workspace (or a reproducible run's snapshot of its directory): its tree is the workspace's overlay
  // lower, held (not removable) for as long as the submission (snapshots/snapshot_workspace.h).
  std::shared_ptr<const SnapshotLease> workspace_snapshot;
  // spec.baseline's run object, read at submit as the submitter may see it (daemon/api/api.h attach_baseline).
  std::shared_ptr<const nlohmann::json> baseline_run;
};

// POST /v1/runs: a spec (the request itself), or {"spec": ..., "pinned": ...} as GET /v1/runs/{id} shows them.
// Throws 400 invalid_spec naming the field.
Submission parse_submission(const nlohmann::json& body, const spec::LimitPolicy& policy);

// Where images come from: the OCI store and the Python release table for "auto" toolchains; `access` says who
// sees every image (image_access.h), everyone else picks among the refs visible to it.
struct ImageCatalog {
  const images::ImageStore* store = nullptr;
  const images::PythonReleases* python_releases = nullptr;
  AccessPolicy access;
};

// Pins spec.image or spec.toolchains, and spec.layers, to pinned.image_digests (base first), image_choice and
// toolchains; a network "proxy" run's cutoff is its as_of. A toolchain matched by a layer image (label
// org.capsule.layer.base) gives its base first and the layer next. Names, toolchains and pins resolve only to
// images run.caller may use (an image it may not use is as unknown as one never imported). With pins_given,
// checks instead that every pinned image is installed and usable and the cutoff is the spec's. Throws ApiError 404 (image_not_found naming image or
// layers[i], no_matching_image) or 400 naming the field.
void pin_images(Submission& run, const ImageCatalog& catalog);

// Sets run.caller and, for a non-root caller with a workspace, opens it as that caller into run.workspace_dir:
// ro and cow need the directory readable and searchable, rw writable as well. The directory must be the caller's
// own: ro and rw show it with sandbox root as its owner and group (so its group must be one of the caller's
// too), and cow shows the tree with host ids as they are. ro gets a read-only copy of the mount. Throws ApiError
// 403 forbidden naming the path and the caller's uid, or 400 invalid_spec. Root: nothing opened.
void authorize_workspace(Submission& run, const Caller& caller);

struct ResolveContext {
  std::string images_dir;    // host image cache
  std::string policies_dir;  // <name>.json seccomp profiles
  std::string run_dir;       // per-run dir: workspace upper/work live here
  const images::ImageStore* store = nullptr;  // for pinned images
};

// Resolves the pinned run into a SandboxSpec and pins the policy (pinned.policy_sha256; with pins_given, a
// different policy text is 409 pin_mismatch). The pinned images are stacked with their configs merged
// (images/image_stack.h); the merged User is looked up in the stack's /etc/passwd, and HOME, unless the image or
// the run sets it, is that user's home ("/" without an entry). Throws ApiError (400/404/409) naming the field.
// Last, pins what runs it (pin_run_facts).
sandbox::SandboxSpec resolve_run(Submission& run, const ResolveContext& context);

// Pins the facts of the machine that runs it — kernel (uname release), capsule (the daemon's version), the host
// image's digest when the run uses it — and why it would not replay byte for byte (the host image; a host
// directory workspace without a workspace_digest). Dependencies start empty: the run's proxy.served fills them.
void pin_run_facts(Submission& run);

}  // namespace capsule::daemon
