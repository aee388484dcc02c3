// RunSpec: what to run, as the body of POST /v1/runs says it, parsed and validated in one place with the
// daemon's defaults filled in; to_json prints it back in the same vocabulary, so a stored spec is a valid request.
#pragma once

#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "sandbox/result_json.h"
#include "spec/as_of.h"
#include "spec/limits.h"

namespace capsule::spec {

enum class WorkspaceMode { kCow, kReadOnly, kReadWrite };
// "cow", "ro", "rw".
const char* mode_name(WorkspaceMode mode);
std::optional<WorkspaceMode> parse_mode(const std::string& name);

struct Workspace {
  std::string path;      // absolute host directory, shown at /workspace
  std::string snapshot;  // or, instead of path: a stored snapshot ("sha256:..."), always copy-on-write
  WorkspaceMode mode = WorkspaceMode::kCow;
};

// A run to compare this one's test cases with when it ends (record.baseline): a run that lost cases the
// baseline had (removed, or skipped where they ran) fails its verdict, unless allow_removed.
struct Baseline {
  std::string run;  // a finished run's id, readable by the submitter (checked at submit)
  bool allow_removed = false;
};

struct RunSpec {
  std::string image = "host";                     // "host", "name[:tag]", "name@sha256:..." or "sha256:..."
  std::vector<std::string> layers;                // image refs stacked in order on the base (image or toolchains)
  std::map<std::string, std::string> toolchains;  // instead of image: {"java": "17"}, {"python": "auto"}
  std::optional<std::string> as_of;               // "YYYY-MM-DD": python "auto"'s date and the proxy's cutoff
  proxy::PackageCutoffs as_of_packages;           // network "proxy": packages dated otherwise (spec/as_of.h)
  std::vector<std::string> argv;
  std::map<std::string, std::string> env;
  std::optional<std::string> cwd;
  std::optional<Workspace> workspace;
  Limits limits;
  std::string network = "none";  // "none" or "proxy"
  std::string policy = "default";
  std::map<std::string, std::string> labels;
  std::vector<std::string> junit_globs;      // collect.junit: JUnit XML reports -> the record's "tests"
  std::size_t tail_lines = sandbox::kDefaultTailLines;  // collect.tail_lines: each stream's last lines in the record
  std::vector<std::string> classfile_globs;  // collect.classfiles: class files -> "classfiles" (major versions)
  std::vector<std::string> coverage_globs;   // collect.coverage: JaCoCo / Cobertura XML -> "coverage"
  // collect.outputs: what of the run's upper layers is kept after it ("outputs"). Absent: everything. Given:
  // relative globs keep those workspace files, absolute globs ("/root/.m2/**") those of the root filesystem,
  // and an upper no glob names is not kept; [] keeps nothing.
  std::optional<std::vector<std::string>> output_globs;
  std::optional<std::string> stdin_data;
  bool reproducible = false;  // a host-directory workspace is snapshotted at submit; pinned.workspace_digest names it
  std::optional<Baseline> baseline;  // needs collect.junit
  // New or changed test configuration in the workspace diff (record.test_config_changes) fails the run's
  // verdict (record.protect_violations); needs a cow or ro workspace.
  bool protect_test_config = false;
  // Globs of paths (relative to /workspace, absolute ones from the root) bound read-only in the sandbox
  // (sandbox/protect.h); a matching path the command added, changed or deleted in a cow workspace's diff fails
  // the verdict (record.protect_violations). Needs a cow or ro workspace.
  std::vector<std::string> protect;

  bool cow_workspace() const { return workspace && workspace->mode == WorkspaceMode::kCow; }
};

// collect.tail_lines is at most this.
constexpr std::size_t kMaxTailLines = 10000;

// Throws http::ApiError("invalid_spec", "<field>: <problem>") for the first problem; unknown fields included.
// Limits a request leaves out (or gives as 0) get the policy's defaults; all are clamped to its maxima.
RunSpec parse_run_spec(const nlohmann::json& body, const LimitPolicy& policy);

// A spec's "workspace" (a path, {"path", "mode"} or {"snapshot"}), as parse_run_spec reads it, for requests that
// name one of their own (a replay's). Same errors.
Workspace parse_workspace(const nlohmann::json& body);

// Protect globs as a run's or a session's "protect" (`field`): at most 256, each 1-4096 bytes without NUL or
// "..", at most 4 "**" segments (sandbox/protect.h). Throws invalid_spec naming `field`.
std::vector<std::string> parse_protect_globs(const nlohmann::json& body, const std::string& field);

// Every field, defaults filled: parse_run_spec(to_json(spec), policy) == spec under the same policy.
nlohmann::json to_json(const RunSpec& spec);

}  // namespace capsule::spec
