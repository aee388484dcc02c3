// Parsing, validation, defaults and clamping of RunSpec, and its resolution into a SandboxSpec.
// Field names in errors match the JSON the API takes ("limits.memory: ...").
#include "spec/run_spec.h"

#include <sys/stat.h>

#include <algorithm>
#include <fstream>
#include <regex>
#include <set>
#include <sstream>

#include "base/units.h"
#include "http/response.h"
#include "images/host_image.h"
#include "images/image_ref.h"
#include "images/image_stack.h"
#include "images/image_user.h"
#include "sandbox/quota.h"
#include "sandbox/userns.h"

namespace capsule::daemon {
namespace {

using nlohmann::json;

[[noreturn]] void invalid(const std::string& field, const std::string& problem) {
  throw http::ApiError("invalid_spec", field + ": " + problem);
}

void reject_unknown(const json& object, const std::string& where, const std::set<std::string>& known) {
  for (const auto& [key, value] : object.items()) {
    if (!known.count(key)) invalid(where.empty() ? key : where + "." + key, "unknown field");
  }
}

// execve takes C strings: a NUL byte would silently cut an argument or a variable short.
void reject_nul(const std::string& text, const std::string& field) {
  if (text.find('\0') != std::string::npos) invalid(field, "must not contain a NUL byte");
}

std::string string_field(const json& value, const std::string& field) {
  if (!value.is_string()) invalid(field, "must be a string");
  return value.get<std::string>();
}

std::map<std::string, std::string> string_map(const json& value, const std::string& field) {
  if (!value.is_object()) invalid(field, "must be an object of strings");
  std::map<std::string, std::string> out;
  for (const auto& [key, item] : value.items()) out[key] = string_field(item, field + "." + key);
  return out;
}

std::vector<std::string> string_list(const json& value, const std::string& field) {
  if (!value.is_array()) invalid(field, "must be an array of strings");
  std::vector<std::string> out;
  for (std::size_t i = 0; i < value.size(); ++i) out.push_back(string_field(value[i], field + "[" + std::to_string(i) + "]"));
  return out;
}

// JSON integers written by most clients are signed; accept any integer that is not negative.
bool is_count(const json& value) {
  return value.is_number_unsigned() || (value.is_number_integer() && value.get<std::int64_t>() >= 0);
}

// The launcher adds durations to clock readings as int64 nanoseconds; this keeps them far from overflowing (and
// a JSON integer above INT64_MAX from wrapping into a negative duration).
constexpr std::chrono::milliseconds kMaxDuration = std::chrono::hours(24 * 365 * 100);

std::chrono::milliseconds duration_field(const json& value, const std::string& field) {
  std::chrono::milliseconds duration{0};
  if (is_count(value)) {
    if (value.get<std::uint64_t>() > static_cast<std::uint64_t>(kMaxDuration.count())) invalid(field, "must be at most 100 years");
    return std::chrono::milliseconds(value.get<std::uint64_t>());
  }
  if (!value.is_string()) invalid(field, "must be milliseconds or a duration such as \"10m\"");
  try {
    duration = base::parse_duration(value.get<std::string>());
  } catch (const std::exception& e) {
    invalid(field, e.what());
  }
  if (duration > kMaxDuration) invalid(field, "must be at most 100 years");
  return duration;
}

std::uint64_t size_field(const json& value, const std::string& field) {
  if (is_count(value)) return value.get<std::uint64_t>();
  if (!value.is_string()) invalid(field, "must be bytes or a size such as \"4g\"");
  try {
    return base::parse_size(value.get<std::string>());
  } catch (const std::exception& e) {
    invalid(field, e.what());
  }
}

template <typename T>
T clamp_to(T requested, T fallback, T maximum) {
  T value = requested != T{} ? requested : fallback;
  if (maximum != T{} && (value == T{} || value > maximum)) value = maximum;
  return value;
}

}  // namespace

RunLimits parse_run_limits(const json& object, const std::string& where) {
  if (!object.is_object()) invalid(where, "must be an object");
  reject_unknown(object, where,
                 {"wall_time", "cpu_time", "kill_grace", "memory", "pids", "cpus", "tmp_size", "output_cap", "disk",
                  "inodes"});
  RunLimits requested;
  if (object.contains("wall_time")) requested.wall_time = duration_field(object["wall_time"], where + ".wall_time");
  if (object.contains("cpu_time")) requested.cpu_time = duration_field(object["cpu_time"], where + ".cpu_time");
  if (object.contains("kill_grace")) requested.kill_grace = duration_field(object["kill_grace"], where + ".kill_grace");
  if (object.contains("memory")) requested.memory_bytes = size_field(object["memory"], where + ".memory");
  if (object.contains("tmp_size")) requested.tmp_size_bytes = size_field(object["tmp_size"], where + ".tmp_size");
  if (object.contains("output_cap")) requested.output_cap_bytes = size_field(object["output_cap"], where + ".output_cap");
  if (object.contains("disk")) requested.disk_bytes = size_field(object["disk"], where + ".disk");
  if (object.contains("inodes")) requested.inodes = size_field(object["inodes"], where + ".inodes");
  if (object.contains("pids")) {
    if (!is_count(object["pids"]) || object["pids"].get<std::uint64_t>() == 0) invalid(where + ".pids", "must be a positive integer");
    requested.pids = object["pids"].get<std::uint64_t>();
  }
  if (object.contains("cpus")) {
    if (!object["cpus"].is_number() || object["cpus"].get<double>() <= 0 || object["cpus"].get<double>() > 1024) {
      invalid(where + ".cpus", "must be a number of cores above 0");
    }
    requested.cpus = object["cpus"].get<double>();
  }
  if (requested.memory_bytes != 0 && requested.memory_bytes < (4u << 20)) invalid(where + ".memory", "must be at least 4 MiB");
  // The launcher's floors (sandbox/quota.h), said here rather than with a setup_failed run.
  if (requested.disk_bytes != 0 && requested.disk_bytes < sandbox::kMinDiskBytes) invalid(where + ".disk", "must be at least 16 MiB");
  if (requested.inodes != 0 && requested.inodes < sandbox::kMinDiskInodes) invalid(where + ".inodes", "must be at least 64");
  // The launcher refuses a /tmp below 4 KiB; say so here rather than with a setup_failed run.
  if (requested.tmp_size_bytes != 0 && requested.tmp_size_bytes < 4096) invalid(where + ".tmp_size", "must be at least 4 KiB");
  return requested;
}

namespace {

RunLimits apply_policy(const RunLimits& r, const LimitPolicy& p) {
  RunLimits out;
  out.wall_time = clamp_to(r.wall_time, p.defaults.wall_time, p.maxima.wall_time);
  out.cpu_time = clamp_to(r.cpu_time, p.defaults.cpu_time, p.maxima.cpu_time);
  out.kill_grace = clamp_to(r.kill_grace, p.defaults.kill_grace, p.maxima.kill_grace);
  out.memory_bytes = clamp_to(r.memory_bytes, p.defaults.memory_bytes, p.maxima.memory_bytes);
  out.pids = clamp_to(r.pids, p.defaults.pids, p.maxima.pids);
  out.cpus = clamp_to(r.cpus, p.defaults.cpus, p.maxima.cpus);
  out.tmp_size_bytes = clamp_to(r.tmp_size_bytes, p.defaults.tmp_size_bytes, p.maxima.tmp_size_bytes);
  out.output_cap_bytes = clamp_to(r.output_cap_bytes, p.defaults.output_cap_bytes, p.maxima.output_cap_bytes);
  out.disk_bytes = clamp_to(r.disk_bytes, p.defaults.disk_bytes, p.maxima.disk_bytes);
  out.inodes = clamp_to(r.inodes, p.defaults.inodes, p.maxima.inodes);
  return out;
}

bool is_absolute_clean(const std::string& path) {
  if (path.empty() || path[0] != '/') return false;
  return path.find("/../") == std::string::npos && !path.ends_with("/..") && path.find('\0') == std::string::npos;
}

std::string read_text(const std::string& path) {
  std::ifstream file(path);
  std::stringstream text;
  text << file.rdbuf();
  return text.str();
}

const char* mode_name(WorkspaceMode mode) {
  switch (mode) {
    case WorkspaceMode::kCow: return "cow";
    case WorkspaceMode::kReadOnly: return "ro";
    case WorkspaceMode::kReadWrite: return "rw";
  }
  return "cow";
}

// Refs are checked here so a malformed one is the client's 400; whether it is installed is pin_image's 404.
void check_image_ref(const std::string& ref, const std::string& field) {
  try {
    images::ImageRef::parse(ref);
  } catch (const base::Error& e) {
    invalid(field, e.what());
  }
}

}  // namespace

LimitPolicy default_limit_policy() {
  LimitPolicy policy;
  policy.defaults.wall_time = std::chrono::minutes(15);
  policy.defaults.kill_grace = std::chrono::seconds(5);
  policy.defaults.pids = 4096;
  // Untrusted code gets bounded memory and disk unless the request or the daemon's config says otherwise.
  policy.defaults.memory_bytes = 4ull << 30;
  policy.defaults.tmp_size_bytes = 256ull << 20;  // /tmp and /dev/shm each, charged to the memory limit
  policy.defaults.output_cap_bytes = 1ull << 20;
  policy.defaults.disk_bytes = 10ull << 30;
  policy.defaults.inodes = 1ull << 20;
  policy.maxima.wall_time = std::chrono::hours(6);
  policy.maxima.kill_grace = std::chrono::seconds(60);
  policy.maxima.pids = 65536;
  policy.maxima.tmp_size_bytes = 16ull << 30;
  policy.maxima.output_cap_bytes = 64ull << 20;
  policy.maxima.disk_bytes = 100ull << 30;
  policy.maxima.inodes = 16ull << 20;
  return policy;
}

RunSpec parse_run_spec(const json& body, const LimitPolicy& policy) {
  if (!body.is_object()) invalid("body", "must be a JSON object");
  reject_unknown(body, "", {"image", "layers", "toolchains", "as_of", "argv", "env", "cwd", "workspace", "limits",
                            "network", "policy", "labels", "collect", "stdin"});
  RunSpec spec;
  if (!body.contains("argv")) invalid("argv", "is required");
  if (body.contains("toolchains") || body.contains("as_of")) {
    // as_of alone (with an image) only dates the package proxy of a network "proxy" run.
    if (body.contains("image") && body.contains("toolchains")) invalid("image", "give either image or toolchains, not both");
    if (body.contains("as_of")) spec.as_of = string_field(body["as_of"], "as_of");
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
  if (body.contains("workspace")) {
    const json& ws = body["workspace"];
    if (ws.is_string()) {
      spec.workspace_path = ws.get<std::string>();
    } else if (ws.is_object()) {
      reject_unknown(ws, "workspace", {"path", "mode"});
      if (!ws.contains("path")) invalid("workspace.path", "is required");
      spec.workspace_path = string_field(ws["path"], "workspace.path");
      if (ws.contains("mode")) {
        const std::string mode = string_field(ws["mode"], "workspace.mode");
        if (mode == "cow") spec.workspace_mode = WorkspaceMode::kCow;
        else if (mode == "ro") spec.workspace_mode = WorkspaceMode::kReadOnly;
        else if (mode == "rw") spec.workspace_mode = WorkspaceMode::kReadWrite;
        else invalid("workspace.mode", "must be cow, ro or rw");
      }
    } else {
      invalid("workspace", "must be a path or {\"path\", \"mode\"}");
    }
    if (!is_absolute_clean(*spec.workspace_path)) invalid("workspace.path", "must be an absolute host path");
  }
  spec.limits = apply_policy(body.contains("limits") ? parse_run_limits(body["limits"], "limits") : RunLimits{}, policy);
  if (body.contains("network")) {
    spec.network = string_field(body["network"], "network");
    if (spec.network != "none" && spec.network != "proxy") invalid("network", "must be \"none\" or \"proxy\"");
    if (spec.network == "proxy" && !spec.as_of) {
      invalid("as_of", "is required with network \"proxy\": it is the date the package proxy shows");
    }
  }
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
  if (body.contains("collect")) {
    const json& collect = body["collect"];
    if (!collect.is_object()) invalid("collect", "must be an object");
    reject_unknown(collect, "collect", {"junit"});
    if (collect.contains("junit")) spec.junit_globs = string_list(collect["junit"], "collect.junit");
    for (const auto& glob : spec.junit_globs) {
      if (glob.empty() || glob[0] == '/' || glob.find("..") != std::string::npos) {
        invalid("collect.junit", "'" + glob + "' must be a relative glob inside the workspace");
      }
    }
  }
  if (body.contains("stdin")) spec.stdin_data = string_field(body["stdin"], "stdin");
  return spec;
}

void pin_image(RunSpec& spec, const ImageCatalog& catalog) {
  if (spec.toolchains.empty() && spec.image == "host") return;  // parse_run_spec refuses layers on host
  if (catalog.store == nullptr) throw http::ApiError("image_not_found", "image: this capsuled has no image store");
  try {
    if (!spec.toolchains.empty()) {
      images::ToolchainRequest request;
      request.toolchains = spec.toolchains;
      if (spec.as_of) request.as_of = images::parse_date(*spec.as_of);
      const images::ToolchainChoice choice = images::select_toolchain_image(
          images::toolchain_candidates(catalog.store->list()), request, catalog.python_releases);
      const images::ImageCandidate& picked = choice.image;
      json stacked = json::array();
      if (picked.base_digest.empty()) {
        spec.image = picked.ref;
        spec.image_digest = picked.digest;
      } else {
        spec.image = picked.base_ref;
        spec.image_digest = picked.base_digest;
        spec.layer_digests.push_back(picked.digest);
        stacked.push_back({{"ref", picked.base_ref}, {"digest", picked.base_digest}});
      }
      stacked.push_back({{"ref", picked.ref}, {"digest", picked.digest}});
      spec.image_choice = {{"wanted", choice.wanted}, {"provided", choice.provided}, {"reason", choice.reason},
                           {"matching_images", choice.matching_images}, {"images", stacked}};
      if (choice.python_auto) {
        spec.image_choice["python_auto"] = {{"version", choice.python_auto->version},
                                            {"reason", choice.python_auto->reason}};
      }
    } else {
      spec.image_digest = catalog.store->resolve(spec.image).str();
      spec.image_choice = json::object();
    }
  } catch (const images::ToolchainError& e) {
    if (e.code() == "no_matching_image") throw http::ApiError("no_matching_image", std::string("toolchains: ") + e.what());
    if (e.code() == "invalid_release_data") throw http::ApiError("invalid_release_data", e.what());
    invalid(e.code() == "release_data_outdated" ? "as_of" : "toolchains", e.what());
  } catch (const base::Error& e) {
    throw http::ApiError("image_not_found", "image: '" + spec.image + "' is not installed (" + e.what() + ")");
  }
  for (std::size_t i = 0; i < spec.layers.size(); ++i) {
    try {
      spec.layer_digests.push_back(catalog.store->resolve(spec.layers[i]).str());
    } catch (const base::Error& e) {
      throw http::ApiError("image_not_found", "layers[" + std::to_string(i) + "]: '" + spec.layers[i] +
                                                 "' is not installed (" + e.what() + ")");
    }
  }
}

std::vector<std::string> RunSpec::image_digests() const {
  std::vector<std::string> all;
  if (!image_digest.empty()) all.push_back(image_digest);
  all.insert(all.end(), layer_digests.begin(), layer_digests.end());
  return all;
}

json RunSpec::to_json() const {
  json j = {{"image", image},
            {"argv", argv},
            {"env", env},
            {"cwd", cwd ? json(*cwd) : json(nullptr)},
            {"network", network},
            {"policy", policy},
            {"labels", labels},
            {"collect", {{"junit", junit_globs}}},
            {"limits",
             {{"wall_time_ms", limits.wall_time.count()},
              {"cpu_time_ms", limits.cpu_time.count()},
              {"kill_grace_ms", limits.kill_grace.count()},
              {"memory_bytes", limits.memory_bytes},
              {"pids", limits.pids},
              {"cpus", limits.cpus},
              {"tmp_size_bytes", limits.tmp_size_bytes},
              {"output_cap_bytes", limits.output_cap_bytes},
              {"disk_bytes", limits.disk_bytes},
              {"inodes", limits.inodes}}}};
  j["workspace"] = workspace_path ? json{{"path", *workspace_path}, {"mode", mode_name(workspace_mode)}} : json(nullptr);
  j["stdin_bytes"] = stdin_data ? stdin_data->size() : 0;
  if (!toolchains.empty()) j["toolchains"] = toolchains;
  if (as_of) j["as_of"] = *as_of;
  j["layers"] = layers;
  j["image_digest"] = image_digest.empty() ? json(nullptr) : json(image_digest);
  j["image_digests"] = image_digests();
  if (!image_choice.is_null()) j["image_choice"] = image_choice;
  return j;
}

void authorize_workspace(RunSpec& spec, const Caller& caller) {
  spec.caller = caller;
  spec.workspace_dir.reset();
  if (caller.is_root() || !spec.workspace_path) return;
  const bool writable = spec.workspace_mode == WorkspaceMode::kReadWrite;
  auto opened = std::make_shared<OpenedHostPath>(open_as_caller(
      caller, *spec.workspace_path, writable ? HostAccess::kWriteDir : HostAccess::kReadDir, "workspace.path",
      "invalid_spec"));
  const std::string& path = *spec.workspace_path;
  if (opened->st.st_uid != caller.uid) {
    throw http::ApiError("forbidden", "workspace.path: '" + path + "' is owned by uid " + std::to_string(opened->st.st_uid) +
                                         "; " + caller.describe() + " may only use a directory it owns as a workspace "
                                         "(the sandbox sees the tree with its owners' ids)");
  }
  // ro and rw show the tree with sandbox root standing for the directory's owner and group (the launcher's
  // owner mapping): both must be the caller's, or the run would get a group's rights the caller lacks.
  if (spec.workspace_mode != WorkspaceMode::kCow && !caller.in_group(opened->st.st_gid)) {
    throw http::ApiError("forbidden", "workspace.path: '" + path + "' has group " + std::to_string(opened->st.st_gid) +
                                         ", which " + caller.describe() + " is not in; an ro or rw workspace acts with "
                                         "the directory's group (use cow, or chgrp it)");
  }
  if (spec.workspace_mode == WorkspaceMode::kReadOnly) {
    // A read-only copy of the mount tree at the opened directory: the launcher binds it as it binds an rw
    // workspace (sandbox root mapped to the caller), and the copy keeps it read-only.
    try {
      opened->fd.reset(sandbox::make_detached_mount(opened->proc_path(), -1, false, true, true));
    } catch (const std::exception& e) {
      throw http::ApiError("internal_error", "workspace.path: a read-only view of '" + path + "': " + e.what());
    }
  }
  spec.workspace_dir = std::move(opened);
}

sandbox::SandboxSpec resolve_run_spec(const RunSpec& spec, const ResolveContext& context) {
  sandbox::SandboxSpec out;
  std::vector<std::string> image_env;
  std::string image_cwd = "/";
  std::optional<std::string> image_home;  // the host image's env sets HOME itself
  if (spec.image_digest.empty()) {
    if (spec.image != "host") throw http::ApiError("image_not_found", "image: '" + spec.image + "' is not installed");
    images::HostImage image = images::prepare_host_image(context.images_dir);
    out.rootfs_layers = image.layers;
    out.mounts = image.mounts;
    image_env = image.env;
  } else {
    if (context.store == nullptr) throw http::ApiError("image_not_found", "image: this capsuled has no image store");
    std::vector<images::ImageInfo> stacked;
    for (const std::string& digest : spec.image_digests()) {
      try {
        stacked.push_back(context.store->inspect(digest));
      } catch (const base::Error& e) {
        throw http::ApiError("image_not_found", "image: " + digest + " is no longer installed (" + e.what() + ")");
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
  if (spec.workspace_path) {
    // Root: the path, as always. Anyone else: the directory authorize_workspace opened as the caller.
    std::string source = *spec.workspace_path;
    if (!spec.caller.is_root()) {
      if (!spec.workspace_dir) {
        throw http::ApiError("forbidden", "workspace.path: '" + source + "' was not opened as " + spec.caller.describe());
      }
      source = spec.workspace_dir->proc_path();
    }
    struct stat st;
    if (stat(source.c_str(), &st) != 0 || !S_ISDIR(st.st_mode)) {
      invalid("workspace.path", "'" + *spec.workspace_path + "' is not a directory on the host");
    }
    switch (spec.workspace_mode) {
      case WorkspaceMode::kCow:
      {
        // A non-root caller's tree is read with the caller's rights (sandbox root as the caller, other ids
        // unmapped), as its ro and rw workspaces are; root's shows host owners as they are.
        sandbox::OverlayMount view{{source}, context.run_dir + "/upper", context.run_dir + "/work", "/workspace"};
        if (!spec.caller.is_root()) view.layers_owner = std::make_pair(spec.caller.uid, spec.caller.gid);
        out.overlays.push_back(std::move(view));
      }
        break;
      case WorkspaceMode::kReadOnly:
        // A non-root caller's source is already a read-only mount: bound like an rw one, it is shown with
        // sandbox root as the caller, not with host ids as they are (host root's files as sandbox root's).
        out.mounts.push_back(sandbox::BindMount{source, "/workspace", spec.caller.is_root(), true});
        break;
      case WorkspaceMode::kReadWrite:
        // The launcher maps sandbox root to the directory's owner: for a non-root caller, the caller itself
        // (authorize_workspace made sure), so what the run creates is the caller's on the host.
        out.mounts.push_back(sandbox::BindMount{source, "/workspace", false, true});
        break;
    }
  }
  out.cwd = spec.cwd.value_or(spec.workspace_path ? "/workspace" : image_cwd);
  const std::string policy_path = context.policies_dir + "/" + spec.policy + ".json";
  struct stat st;
  if (stat(policy_path.c_str(), &st) != 0) throw http::ApiError("policy_not_found", "policy: '" + spec.policy + "' does not exist");
  out.seccomp_profile = read_text(policy_path);
  out.limits.wall_time = spec.limits.wall_time;
  out.limits.cpu_time = spec.limits.cpu_time;
  out.limits.kill_grace = spec.limits.kill_grace;
  out.limits.memory_bytes = spec.limits.memory_bytes;
  out.limits.pids = spec.limits.pids;
  out.limits.cpus = spec.limits.cpus;
  out.limits.tmp_size_bytes = spec.limits.tmp_size_bytes;
  out.limits.output_cap_bytes = spec.limits.output_cap_bytes;
  out.limits.disk_bytes = spec.limits.disk_bytes;
  out.limits.disk_inodes = spec.limits.disk_bytes != 0 ? spec.limits.inodes : 0;
  out.stdin_data = spec.stdin_data;
  return out;
}

}  // namespace capsule::daemon
