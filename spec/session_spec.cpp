// Parsing and printing of SessionSpec and ExecSpec. A session's environment is a RunSpec without a command:
// its fields go through parse_run_spec (with a placeholder argv), so errors read as they do for runs.
#include "spec/session_spec.h"

#include <regex>

#include "base/base64.h"
#include "spec/json_fields.h"

namespace capsule::spec {
namespace {

using nlohmann::json;

const std::vector<std::string> kPlaceholderArgv = {"/bin/true"};

std::map<std::string, std::string> labels_field(const json& value, const std::string& field) {
  std::map<std::string, std::string> labels = string_map(value, field);
  for (const auto& [key, text] : labels) {
    if (!std::regex_match(key, std::regex("[A-Za-z0-9_./-]{1,128}"))) invalid(field + "." + key, "is not a valid label key");
  }
  return labels;
}

// collect (without "outputs") and baseline as parse_run_spec reads them: the same globs, checks and errors.
void parse_exec_collect(const json& body, ExecSpec& spec) {
  json as_run = {{"argv", kPlaceholderArgv}};
  if (body.contains("collect")) {
    const json& collect = body["collect"];
    if (collect.is_object() && collect.contains("outputs")) {
      invalid("collect.outputs", "an exec keeps no outputs: the session's files stay in its box (GET .../files)");
    }
    as_run["collect"] = collect;
  }
  if (body.contains("baseline")) as_run["baseline"] = body["baseline"];
  const RunSpec parsed = parse_run_spec(as_run, default_limit_policy());
  spec.junit_globs = parsed.junit_globs;
  spec.classfile_globs = parsed.classfile_globs;
  spec.coverage_globs = parsed.coverage_globs;
  spec.tail_lines = parsed.tail_lines;
  spec.baseline = parsed.baseline;
}

}  // namespace

SessionSpec parse_session_spec(const json& body, const LimitPolicy& policy) {
  if (!body.is_object()) invalid("body", "must be a JSON object");
  reject_unknown(body, "", {"image", "layers", "toolchains", "as_of", "env", "cwd", "workspace", "limits", "network",
                            "policy", "labels", "protect", "ttl", "idle_ttl", "on_expiry", "persist_shell_state"});
  SessionSpec spec;
  json environment = json::object();
  for (const auto& [key, value] : body.items()) {
    if (key != "protect" && key != "ttl" && key != "idle_ttl" && key != "on_expiry" && key != "persist_shell_state") {
      environment[key] = value;
    }
  }
  environment["argv"] = kPlaceholderArgv;
  spec.environment = parse_run_spec(environment, policy);
  if (body.contains("protect")) {
    spec.protect = parse_protect_globs(body["protect"], "protect");
  }
  if (body.contains("ttl")) spec.ttl = duration_field(body["ttl"], "ttl");
  if (body.contains("idle_ttl")) spec.idle_ttl = duration_field(body["idle_ttl"], "idle_ttl");
  if (body.contains("on_expiry")) {
    const std::string on_expiry = string_field(body["on_expiry"], "on_expiry");
    if (on_expiry == "freeze") spec.on_expiry = OnExpiry::kFreeze;
    else if (on_expiry != "destroy") invalid("on_expiry", "must be \"destroy\" or \"freeze\"");
  }
  if (body.contains("persist_shell_state")) {
    if (!body["persist_shell_state"].is_boolean()) invalid("persist_shell_state", "must be true or false");
    spec.persist_shell_state = body["persist_shell_state"].get<bool>();
  }
  return spec;
}

json to_json(const SessionSpec& spec) {
  json j = to_json(spec.environment);
  j.erase("argv");
  j.erase("collect");
  j.erase("stdin");
  j["protect"] = spec.protect;
  j["ttl"] = spec.ttl.count();
  j["idle_ttl"] = spec.idle_ttl.count();
  j["on_expiry"] = spec.on_expiry == OnExpiry::kFreeze ? "freeze" : "destroy";
  j["persist_shell_state"] = spec.persist_shell_state;
  return j;
}

std::vector<std::string> ExecSpec::command() const {
  if (script) return {"/bin/sh", "-c", *script};
  return argv;
}

ExecSpec parse_exec_spec(const json& body) {
  if (!body.is_object()) invalid("body", "must be a JSON object");
  reject_unknown(body, "", {"argv", "script", "cwd", "env", "stdin", "stdin_b64", "timeout", "idle_timeout",
                            "cpu_time", "kill_grace", "output_cap", "background", "stdin_open", "pty", "rows",
                            "cols", "labels", "user", "collect", "baseline"});
  ExecSpec spec;
  if (body.contains("argv") == body.contains("script")) invalid("argv", "give either argv or script");
  if (body.contains("argv")) {
    spec.argv = string_list(body["argv"], "argv");
    if (spec.argv.empty() || spec.argv[0].empty()) invalid("argv", "must name a command");
    for (std::size_t i = 0; i < spec.argv.size(); ++i) reject_nul(spec.argv[i], "argv[" + std::to_string(i) + "]");
  } else {
    spec.script = string_field(body["script"], "script");
    reject_nul(*spec.script, "script");
    if (spec.script->size() > kMaxScriptBytes) {
      invalid("script", "is " + std::to_string(spec.script->size()) + " bytes; at most " +
                            std::to_string(kMaxScriptBytes) + " (put longer programs in a file)");
    }
  }
  if (body.contains("cwd")) {
    spec.cwd = string_field(body["cwd"], "cwd");
    if (!is_absolute_clean(*spec.cwd)) invalid("cwd", "must be an absolute path without ..");
  }
  if (body.contains("env")) spec.env = string_map(body["env"], "env");
  for (const auto& [key, value] : spec.env) {
    if (key.empty() || key.find('=') != std::string::npos) invalid("env." + key, "is not a valid variable name");
    reject_nul(key, "env." + key);
    reject_nul(value, "env." + key);
  }
  if (body.contains("stdin") && body.contains("stdin_b64")) invalid("stdin", "give either stdin or stdin_b64");
  if (body.contains("stdin")) spec.stdin_data = string_field(body["stdin"], "stdin");
  if (body.contains("stdin_b64")) {
    spec.stdin_data = base::base64_decode(string_field(body["stdin_b64"], "stdin_b64"));
    if (!spec.stdin_data) invalid("stdin_b64", "is not padded base64");
  }
  if (body.contains("timeout")) spec.timeout = duration_field(body["timeout"], "timeout");
  if (body.contains("idle_timeout")) spec.idle_timeout = duration_field(body["idle_timeout"], "idle_timeout");
  if (body.contains("cpu_time")) spec.cpu_time = duration_field(body["cpu_time"], "cpu_time");
  if (body.contains("kill_grace")) spec.kill_grace = duration_field(body["kill_grace"], "kill_grace");
  if (body.contains("output_cap")) spec.output_cap = size_field(body["output_cap"], "output_cap");
  if (body.contains("background")) {
    if (!body["background"].is_boolean()) invalid("background", "must be true or false");
    spec.background = body["background"].get<bool>();
  }
  for (auto [name, flag] : {std::pair{"stdin_open", &spec.stdin_open}, std::pair{"pty", &spec.pty}}) {
    if (!body.contains(name)) continue;
    if (!body[name].is_boolean()) invalid(name, "must be true or false");
    *flag = body[name].get<bool>();
  }
  for (auto [name, size] : {std::pair{"rows", &spec.rows}, std::pair{"cols", &spec.cols}}) {
    if (!body.contains(name)) continue;
    if (!body[name].is_number_integer() || body[name].get<std::int64_t>() < 1 || body[name].get<std::int64_t>() > 4096) {
      invalid(name, "must be 1 to 4096");
    }
    *size = static_cast<std::uint16_t>(body[name].get<std::uint64_t>());
  }
  if (body.contains("labels")) spec.labels = labels_field(body["labels"], "labels");
  if (body.contains("user")) spec.user = user_field(body["user"], "user");
  if (body.contains("collect") || body.contains("baseline")) parse_exec_collect(body, spec);
  return spec;
}

bool parse_network_switch(const json& body) {
  if (!body.is_object()) invalid("body", "must be a JSON object");
  reject_unknown(body, "", {"mode"});
  if (!body.contains("mode")) invalid("mode", "is required: \"none\" (off) or \"proxy\" (on)");
  const std::string mode = string_field(body["mode"], "mode");
  if (mode != "none" && mode != "proxy") invalid("mode", "must be \"none\" or \"proxy\"");
  return mode == "proxy";
}

void apply_collect(const ExecSpec& spec, RunSpec& run) {
  run.junit_globs = spec.junit_globs;
  run.classfile_globs = spec.classfile_globs;
  run.coverage_globs = spec.coverage_globs;
  run.tail_lines = spec.tail_lines;
  run.baseline = spec.baseline;
}

json to_json(const ExecSpec& spec) {
  json j = {{"env", spec.env},
            {"timeout", spec.timeout.count()},
            {"idle_timeout", spec.idle_timeout.count()},
            {"cpu_time", spec.cpu_time.count()},
            {"kill_grace", spec.kill_grace.count()},
            {"output_cap", spec.output_cap},
            {"background", spec.background},
            {"stdin_open", spec.stdin_open},
            {"pty", spec.pty},
            {"rows", spec.rows},
            {"cols", spec.cols},
            {"labels", spec.labels}};
  if (spec.user) j["user"] = *spec.user;
  if (spec.script) j["script"] = *spec.script;
  else j["argv"] = spec.argv;
  if (spec.cwd) j["cwd"] = *spec.cwd;
  if (spec.stdin_data) j["stdin_b64"] = base::base64_encode(*spec.stdin_data);
  RunSpec collecting;
  collecting.argv = kPlaceholderArgv;
  apply_collect(spec, collecting);
  const json as_run = to_json(collecting);
  j["collect"] = as_run["collect"];
  if (as_run.contains("baseline")) j["baseline"] = as_run["baseline"];
  return j;
}

}  // namespace capsule::spec
