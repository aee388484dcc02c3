// Parsing, validation and defaults of RunSpec, and its printing in the same vocabulary.
// Field names in errors match the JSON the API takes ("limits.memory: ...").
#include "spec/run_spec.h"

#include <algorithm>
#include <regex>

#include "base/error.h"
#include "images/image_ref.h"
#include "images/toolchain_select.h"
#include "spec/json_fields.h"
#include "store/digest.h"

namespace capsule::spec {
namespace {

using nlohmann::json;

// Refs are checked here so a malformed one is the client's 400; whether it is installed is pinning's 404.
void check_image_ref(const std::string& ref, const std::string& field) {
  try {
    images::ImageRef::parse(ref);
  } catch (const base::Error& e) {
    invalid(field, e.what());
  }
}

}  // namespace

Workspace parse_workspace(const json& ws) {
  Workspace out;
  if (ws.is_string()) {
    out.path = ws.get<std::string>();
  } else if (ws.is_object()) {
    reject_unknown(ws, "workspace", {"path", "snapshot", "mode"});
    if (ws.contains("path") == ws.contains("snapshot")) invalid("workspace", "give either path or snapshot");
    if (ws.contains("snapshot")) {
      out.snapshot = string_field(ws["snapshot"], "workspace.snapshot");
      if (!store::Digest::try_parse(out.snapshot)) invalid("workspace.snapshot", "must be a digest sha256:<64 hex>");
    } else {
      out.path = string_field(ws["path"], "workspace.path");
    }
    if (ws.contains("mode")) {
      const auto mode = parse_mode(string_field(ws["mode"], "workspace.mode"));
      if (!mode) invalid("workspace.mode", "must be cow, ro or rw");
      out.mode = *mode;
      if (!out.snapshot.empty() && out.mode != WorkspaceMode::kCow) invalid("workspace.mode", "a snapshot is always cow");
    }
  } else {
    invalid("workspace", "must be a path, {\"path\", \"mode\"} or {\"snapshot\"}");
  }
  if (out.snapshot.empty() && !is_absolute_clean(out.path)) invalid("workspace.path", "must be an absolute host path");
  return out;
}

namespace {

// collect: {"junit", "classfiles", "coverage": [relative globs], "outputs": [globs], "tail_lines": count}.
void parse_collect(const json& collect, RunSpec& spec) {
  if (!collect.is_object()) invalid("collect", "must be an object");
  reject_unknown(collect, "collect", {"junit", "tail_lines", "classfiles", "coverage", "outputs"});
  const auto globs = [&](const char* key, std::vector<std::string>& out) {
    if (!collect.contains(key)) return;
    const std::string field = std::string("collect.") + key;
    out = string_list(collect[key], field);
    for (const auto& glob : out) {
      if (glob.empty() || glob[0] == '/' || glob.find("..") != std::string::npos) {
        invalid(field, "'" + glob + "' must be a relative glob inside the workspace");
      }
    }
  };
  globs("junit", spec.junit_globs);
  globs("classfiles", spec.classfile_globs);
  globs("coverage", spec.coverage_globs);
  if (collect.contains("outputs")) {
    spec.output_globs = string_list(collect["outputs"], "collect.outputs");
    for (const auto& glob : *spec.output_globs) {
      const std::string relative = glob.starts_with('/') ? glob.substr(1) : glob;
      if (relative.empty() || relative.find("..") != std::string::npos) {
        invalid("collect.outputs", "'" + glob + "' must be a glob relative to the workspace or an absolute one");
      }
    }
  }
  if (collect.contains("tail_lines")) {
    const json& lines = collect["tail_lines"];
    if (!is_count(lines) || lines.get<std::uint64_t>() > kMaxTailLines) {
      invalid("collect.tail_lines", "must be a count of lines from 0 to " + std::to_string(kMaxTailLines));
    }
    spec.tail_lines = lines.get<std::size_t>();
  }
}

// baseline: {"run": ID, "allow_removed": bool}; the run's existence and visibility are checked at submit.
Baseline parse_baseline(const json& body, const RunSpec& spec) {
  if (!body.is_object()) invalid("baseline", "must be an object {\"run\": ID, \"allow_removed\": bool}");
  reject_unknown(body, "baseline", {"run", "allow_removed"});
  if (!body.contains("run")) invalid("baseline.run", "is required");
  Baseline baseline;
  baseline.run = string_field(body["run"], "baseline.run");
  if (!std::regex_match(baseline.run, std::regex("[A-Za-z0-9_-]{1,128}"))) invalid("baseline.run", "is not a run id");
  if (body.contains("allow_removed")) {
    if (!body["allow_removed"].is_boolean()) invalid("baseline.allow_removed", "must be true or false");
    baseline.allow_removed = body["allow_removed"].get<bool>();
  }
  if (spec.junit_globs.empty()) invalid("baseline", "needs collect.junit: the test cases are what is compared");
  return baseline;
}

}  // namespace

const char* mode_name(WorkspaceMode mode) {
  switch (mode) {
    case WorkspaceMode::kCow: return "cow";
    case WorkspaceMode::kReadOnly: return "ro";
    case WorkspaceMode::kReadWrite: return "rw";
  }
  return "cow";
}

std::optional<WorkspaceMode> parse_mode(const std::string& name) {
  if (name == "cow") return WorkspaceMode::kCow;
  if (name == "ro") return WorkspaceMode::kReadOnly;
  if (name == "rw") return WorkspaceMode::kReadWrite;
  return std::nullopt;
}

RunSpec parse_run_spec(const json& body, const LimitPolicy& policy) {
  if (!body.is_object()) invalid("body", "must be a JSON object");
  reject_unknown(body, "", {"image", "layers", "toolchains", "as_of", "as_of_packages", "argv", "env", "cwd",
                            "workspace", "limits", "network", "policy", "labels", "collect", "stdin", "reproducible",
                            "baseline", "protect_test_config", "protect"});
  RunSpec spec;
  if (!body.contains("argv")) invalid("argv", "is required");
  if (body.contains("toolchains") || body.contains("as_of")) {
    // as_of alone (with an image) only dates the package proxy of a network "proxy" run.
    if (body.contains("image") && body.contains("toolchains")) invalid("image", "give either image or toolchains, not both");
    if (body.contains("as_of")) spec.as_of = resolve_as_of(string_field(body["as_of"], "as_of"), "as_of");
    try {
      const images::ToolchainRequest request =
          images::parse_toolchain_request(body.value("toolchains", json::object()), spec.as_of.value_or(""));
      spec.toolchains = request.toolchains;
    } catch (const images::ToolchainError& e) {
      invalid(spec.as_of && !body.contains("toolchains") ? "as_of" : "toolchains", e.what());
    }
  }
  spec.argv = string_list(body["argv"], "argv");
  if (spec.argv.empty() || spec.argv[0].empty()) invalid("argv", "must name a command");
  for (std::size_t i = 0; i < spec.argv.size(); ++i) reject_nul(spec.argv[i], "argv[" + std::to_string(i) + "]");
  if (body.contains("image")) spec.image = string_field(body["image"], "image");
  if (spec.image != "host") check_image_ref(spec.image, "image");
  if (body.contains("layers")) {
    spec.layers = string_list(body["layers"], "layers");
    for (std::size_t i = 0; i < spec.layers.size(); ++i) check_image_ref(spec.layers[i], "layers[" + std::to_string(i) + "]");
    if (!spec.layers.empty() && spec.image == "host" && spec.toolchains.empty()) {
      invalid("layers", "are stacked on an imported image: give image or toolchains as well (not host)");
    }
  }
  if (body.contains("env")) spec.env = string_map(body["env"], "env");
  for (const auto& [key, value] : spec.env) {
    if (key.empty() || key.find('=') != std::string::npos) invalid("env." + key, "is not a valid variable name");
    reject_nul(key, "env." + key);
    reject_nul(value, "env." + key);
  }
  if (body.contains("cwd")) {
    spec.cwd = string_field(body["cwd"], "cwd");
    if (!is_absolute_clean(*spec.cwd)) invalid("cwd", "must be an absolute path without ..");
  }
  if (body.contains("workspace")) spec.workspace = parse_workspace(body["workspace"]);
  spec.limits = apply_policy(body.contains("limits") ? parse_limit_values(body["limits"], "limits")
                                                     : LimitValues{unlimited_limits(), {}},
                             policy);
  if (body.contains("network")) {
    spec.network = string_field(body["network"], "network");
    if (spec.network != "none" && spec.network != "proxy") invalid("network", "must be \"none\" or \"proxy\"");
    if (spec.network == "proxy" && !spec.as_of) {
      invalid("as_of", "is required with network \"proxy\": it is the date the package proxy shows");
    }
  }
  if (body.contains("as_of_packages")) spec.as_of_packages = parse_package_cutoffs(body["as_of_packages"], "as_of_packages");
  if (!spec.as_of_packages.empty() && spec.network != "proxy") invalid("as_of_packages", "is only for network \"proxy\"");
  if (body.contains("policy")) {
    spec.policy = string_field(body["policy"], "policy");
    if (!std::regex_match(spec.policy, std::regex("[a-z0-9][a-z0-9_-]{0,63}"))) invalid("policy", "is not a policy name");
  }
  if (body.contains("labels")) {
    spec.labels = string_map(body["labels"], "labels");
    for (const auto& [key, value] : spec.labels) {
      if (!std::regex_match(key, std::regex("[A-Za-z0-9_./-]{1,128}"))) invalid("labels." + key, "is not a valid label key");
    }
  }
  if (body.contains("collect")) parse_collect(body["collect"], spec);
  if (body.contains("stdin")) spec.stdin_data = string_field(body["stdin"], "stdin");
  if (body.contains("reproducible")) {
    if (!body["reproducible"].is_boolean()) invalid("reproducible", "must be true or false");
    spec.reproducible = body["reproducible"].get<bool>();
    if (spec.reproducible && (!spec.workspace || !spec.cow_workspace())) {
      invalid("reproducible", "needs a copy-on-write workspace (a host directory to snapshot, or a snapshot)");
    }
  }
  if (body.contains("baseline")) spec.baseline = parse_baseline(body["baseline"], spec);
  if (body.contains("protect_test_config")) {
    if (!body["protect_test_config"].is_boolean()) invalid("protect_test_config", "must be true or false");
    spec.protect_test_config = body["protect_test_config"].get<bool>();
    if (spec.protect_test_config && (!spec.workspace || spec.workspace->mode == WorkspaceMode::kReadWrite)) {
      invalid("protect_test_config", "needs a cow or ro workspace (changes are read from the copy-on-write diff)");
    }
  }
  if (body.contains("protect")) {
    spec.protect = parse_protect_globs(body["protect"], "protect");
    if (!spec.protect.empty() && (!spec.workspace || spec.workspace->mode == WorkspaceMode::kReadWrite)) {
      invalid("protect", "needs a cow or ro workspace (files created under the globs are read from the "
                         "copy-on-write diff)");
    }
  }
  return spec;
}

std::vector<std::string> parse_protect_globs(const json& body, const std::string& field) {
  std::vector<std::string> globs = string_list(body, field);
  if (globs.size() > 256) invalid(field, "at most 256 globs");
  for (const std::string& glob : globs) {
    reject_nul(glob, field);
    if (glob.empty() || glob.size() > 4096 || glob.find("..") != std::string::npos) {
      invalid(field, "'" + glob.substr(0, 64) + "' is not a glob of 1-4096 bytes without ..");
    }
    std::size_t double_stars = 0;
    for (std::size_t start = 0; start <= glob.size();) {
      const std::size_t end = std::min(glob.find('/', start), glob.size());
      if (glob.compare(start, end - start, "**") == 0) ++double_stars;
      start = end + 1;
    }
    if (double_stars > 4) invalid(field, "'" + glob.substr(0, 64) + "' has more than 4 '**' (matching would explode)");
  }
  return globs;
}

json to_json(const RunSpec& spec) {
  json j = {{"argv", spec.argv},
            {"env", spec.env},
            {"layers", spec.layers},
            {"limits", limits_to_json(spec.limits)},
            {"network", spec.network},
            {"policy", spec.policy},
            {"labels", spec.labels},
            {"collect",
             {{"junit", spec.junit_globs},
              {"tail_lines", spec.tail_lines},
              {"classfiles", spec.classfile_globs},
              {"coverage", spec.coverage_globs}}}};
  if (spec.output_globs) j["collect"]["outputs"] = *spec.output_globs;
  if (spec.toolchains.empty()) j["image"] = spec.image;
  else j["toolchains"] = spec.toolchains;
  if (spec.as_of) j["as_of"] = *spec.as_of;
  if (!spec.as_of_packages.empty()) j["as_of_packages"] = package_cutoffs_json(spec.as_of_packages);
  if (spec.cwd) j["cwd"] = *spec.cwd;
  if (spec.workspace && spec.workspace->snapshot.empty()) {
    j["workspace"] = {{"path", spec.workspace->path}, {"mode", mode_name(spec.workspace->mode)}};
  }
  if (spec.workspace && !spec.workspace->snapshot.empty()) {
    j["workspace"] = {{"snapshot", spec.workspace->snapshot}, {"mode", mode_name(spec.workspace->mode)}};
  }
  if (spec.stdin_data) j["stdin"] = *spec.stdin_data;
  if (spec.reproducible) j["reproducible"] = true;
  if (spec.baseline) j["baseline"] = {{"run", spec.baseline->run}, {"allow_removed", spec.baseline->allow_removed}};
  if (spec.protect_test_config) j["protect_test_config"] = true;
  if (!spec.protect.empty()) j["protect"] = spec.protect;
  return j;
}

}  // namespace capsule::spec
