// Parsing and printing of StackSpec. A service's box goes through parse_session_spec, so its fields and their
// errors read as a session's do ("services.app.limits.memory: ..."); the rest is checked here.
#include "spec/stack_spec.h"

#include <regex.h>

#include <algorithm>
#include <functional>
#include <regex>
#include <set>

#include "http/response.h"
#include "spec/as_of.h"
#include "spec/json_fields.h"

namespace capsule::spec {
namespace {

using nlohmann::json;

bool is_service_name(const std::string& name) {
  static const std::regex pattern("[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?");
  return std::regex_match(name, pattern) && name != "localhost";
}

std::uint16_t port_field(const json& value, const std::string& field) {
  if (!is_count(value) || value.get<std::uint64_t>() < 1 || value.get<std::uint64_t>() > 65535) {
    invalid(field, "must be a TCP port (1-65535)");
  }
  return static_cast<std::uint16_t>(value.get<std::uint64_t>());
}

std::string pattern_field(const json& value, const std::string& field) {
  const std::string pattern = string_field(value, field);
  if (pattern.empty() || pattern.size() > kMaxProbePattern) {
    invalid(field, "must be a regular expression of 1 to " + std::to_string(kMaxProbePattern) + " characters");
  }
  reject_nul(pattern, field);
  // Back-references are what makes a POSIX matcher backtrack without bound; without them glibc's regexec
  // runs in time bounded by the pattern and the line.
  if (std::regex_search(pattern, std::regex(R"(\\[1-9])"))) invalid(field, "back-references (\\1 to \\9) are not allowed");
  if (const std::string problem = check_log_pattern(pattern); !problem.empty()) {
    invalid(field, "is not a POSIX extended regular expression: " + problem);
  }
  return pattern;
}

std::vector<std::string> argv_field(const json& value, const std::string& field) {
  std::vector<std::string> argv = string_list(value, field);
  if (argv.empty() || argv[0].empty()) invalid(field, "must name a command");
  for (std::size_t i = 0; i < argv.size(); ++i) reject_nul(argv[i], field + "[" + std::to_string(i) + "]");
  return argv;
}

ReadyProbe parse_ready(const json& body, const std::string& where) {
  if (!body.is_object()) invalid(where, "must be an object");
  reject_unknown(body, where, {"tcp", "http", "log", "exec", "interval", "deadline", "timeout", "retries",
                               "start_period", "start_interval"});
  ReadyProbe probe;
  int kinds = 0;
  if (body.contains("tcp")) {
    probe.kind = ReadyProbe::Kind::kTcp;
    probe.port = port_field(body["tcp"], where + ".tcp");
    ++kinds;
  }
  if (body.contains("http")) {
    const json& http = body["http"];
    const std::string field = where + ".http";
    if (!http.is_object()) invalid(field, "must be an object {port, path, status}");
    reject_unknown(http, field, {"port", "path", "status"});
    if (!http.contains("port")) invalid(field + ".port", "is required");
    probe.kind = ReadyProbe::Kind::kHttp;
    probe.port = port_field(http["port"], field + ".port");
    if (http.contains("path")) {
      probe.path = string_field(http["path"], field + ".path");
      if (probe.path.empty() || probe.path[0] != '/' || probe.path.size() > 1024 ||
          probe.path.find_first_of(" \r\n\t") != std::string::npos) {
        invalid(field + ".path", "must be a URL path starting with / (no spaces or line breaks)");
      }
    }
    if (http.contains("status")) {
      if (!is_count(http["status"]) || http["status"].get<std::uint64_t>() < 100 ||
          http["status"].get<std::uint64_t>() > 599) {
        invalid(field + ".status", "must be an HTTP status (100-599)");
      }
      probe.status = http["status"].get<int>();
    }
    ++kinds;
  }
  if (body.contains("log")) {
    const json& log = body["log"];
    const std::string field = where + ".log";
    if (!log.is_object()) invalid(field, "must be an object {success, failure}");
    reject_unknown(log, field, {"success", "failure"});
    if (!log.contains("success")) invalid(field + ".success", "is required");
    probe.kind = ReadyProbe::Kind::kLog;
    probe.success = pattern_field(log["success"], field + ".success");
    if (log.contains("failure")) probe.failure = pattern_field(log["failure"], field + ".failure");
    ++kinds;
  }
  if (body.contains("exec")) {
    probe.kind = ReadyProbe::Kind::kExec;
    probe.argv = argv_field(body["exec"], where + ".exec");
    ++kinds;
  }
  if (kinds != 1) invalid(where, "give exactly one of tcp, http, log, exec");
  if (body.contains("interval")) probe.interval = duration_field(body["interval"], where + ".interval");
  if (body.contains("deadline")) probe.deadline = duration_field(body["deadline"], where + ".deadline");
  if (body.contains("timeout")) probe.timeout = duration_field(body["timeout"], where + ".timeout");
  if (body.contains("start_period")) probe.start_period = duration_field(body["start_period"], where + ".start_period");
  if (body.contains("start_interval")) {
    probe.start_interval = duration_field(body["start_interval"], where + ".start_interval");
    if (probe.start_interval.count() != 0 && probe.start_interval < std::chrono::milliseconds(10)) {
      invalid(where + ".start_interval", "must be 0 (the interval) or at least 10ms");
    }
  }
  if (body.contains("retries")) {
    if (!is_count(body["retries"]) || body["retries"].get<std::uint64_t>() > kMaxProbeRetries) {
      invalid(where + ".retries", "must be a whole number from 0 to " + std::to_string(kMaxProbeRetries));
    }
    probe.retries = body["retries"].get<std::uint32_t>();
  }
  if (probe.interval < std::chrono::milliseconds(10)) invalid(where + ".interval", "must be at least 10ms");
  if (probe.deadline <= std::chrono::milliseconds(0)) invalid(where + ".deadline", "must be positive");
  if ((probe.kind == ReadyProbe::Kind::kTcp || probe.kind == ReadyProbe::Kind::kHttp) &&
      probe.timeout > kMaxSocketProbeTimeout) {
    invalid(where + ".timeout", "a tcp or http attempt is made on the stack's own thread: at most 30s");
  }
  return probe;
}

json to_json(const ReadyProbe& probe) {
  json j = {{"interval", probe.interval.count()}, {"deadline", probe.deadline.count()},
            {"timeout", probe.timeout.count()}, {"retries", probe.retries},
            {"start_period", probe.start_period.count()}, {"start_interval", probe.start_interval.count()}};
  switch (probe.kind) {
    case ReadyProbe::Kind::kNone: return nullptr;
    case ReadyProbe::Kind::kTcp: j["tcp"] = probe.port; break;
    case ReadyProbe::Kind::kHttp: j["http"] = {{"port", probe.port}, {"path", probe.path}, {"status", probe.status}}; break;
    case ReadyProbe::Kind::kLog:
      j["log"] = {{"success", probe.success}};
      if (!probe.failure.empty()) j["log"]["failure"] = probe.failure;
      break;
    case ReadyProbe::Kind::kExec: j["exec"] = probe.argv; break;
  }
  return j;
}

// [8080] or [{"port": 8080, "host_port": 18080}].
std::vector<PublishedPort> parse_publish(const json& body, const std::string& where) {
  if (!body.is_array()) invalid(where, "must be a list of ports or {port, host_port}");
  if (body.size() > kMaxPublishedPorts) invalid(where, "at most " + std::to_string(kMaxPublishedPorts) + " ports");
  std::vector<PublishedPort> ports;
  for (std::size_t i = 0; i < body.size(); ++i) {
    const std::string field = where + "[" + std::to_string(i) + "]";
    PublishedPort published;
    if (body[i].is_object()) {
      reject_unknown(body[i], field, {"port", "host_port"});
      if (!body[i].contains("port")) invalid(field + ".port", "is required");
      published.port = port_field(body[i]["port"], field + ".port");
      if (body[i].contains("host_port") && body[i]["host_port"] != 0) {
        published.host_port = port_field(body[i]["host_port"], field + ".host_port");
      }
    } else {
      published.port = port_field(body[i], field);
    }
    ports.push_back(published);
  }
  return ports;
}

ServiceSpec parse_service(const json& body, const std::string& where, const LimitPolicy& policy,
                          const StackSpec& stack) {
  if (!body.is_object()) invalid(where, "must be an object");
  if (body.contains("network")) invalid(where + ".network", "a stack's services share its network (give network at the top)");
  ServiceSpec service;
  json box = json::object();
  for (const auto& [key, value] : body.items()) {
    if (key == "command") service.command = argv_field(value, where + ".command");
    else if (key == "user") service.user = user_field(value, where + ".user");
    else if (key == "ready") {
      if (!value.is_null()) service.ready = parse_ready(value, where + ".ready");
    } else if (key == "depends_on") {
      for (const auto& [name, condition] : string_map(value, where + ".depends_on")) {
        if (condition == "started") service.depends_on[name] = DependsOn::kStarted;
        else if (condition == "ready") service.depends_on[name] = DependsOn::kReady;
        else if (condition == "completed") service.depends_on[name] = DependsOn::kCompleted;
        else invalid(where + ".depends_on." + name, "must be \"started\", \"ready\" or \"completed\"");
      }
    } else if (key == "publish") {
      service.publish = parse_publish(value, where + ".publish");
    } else if (key == "stop_grace") {
      service.stop_grace = duration_field(value, where + ".stop_grace");
      const std::chrono::milliseconds most = policy.maxima.kill_grace;
      if (most.count() > 0 && service.stop_grace > most) {
        invalid(where + ".stop_grace", "must be at most " + std::to_string(most.count()) + " ms (the daemon's max kill_grace)");
      }
    } else if (key == "ttl" || key == "idle_ttl" || key == "on_expiry" || key == "persist_shell_state") {
      invalid(where + "." + key, "a service lives as long as its stack (give ttl at the top)");
    } else {
      box[key] = value;
    }
  }
  if (stack.egress == "proxy") {  // every box reaches the stack's one package proxy (SessionPlacement)
    if (box.contains("as_of") && box["as_of"] != *stack.as_of) {
      invalid(where + ".as_of", "the stack's one package proxy serves network.as_of; give the date there");
    }
    box["network"] = "proxy";
    box["as_of"] = *stack.as_of;
  }
  try {
    service.box = parse_session_spec(box, policy);
  } catch (const http::ApiError& e) {
    throw http::ApiError(e.code(), where + "." + std::string(e.what()));
  }
  return service;
}

StageSpec parse_stage(const json& body, const std::string& where, const StackSpec& stack) {
  if (!body.is_object()) invalid(where, "must be an object");
  if (!body.contains("name")) invalid(where + ".name", "is required");
  StageSpec stage;
  stage.name = string_field(body["name"], where + ".name");
  if (!is_service_name(stage.name)) invalid(where + ".name", "must be a lower-case name (letters, digits, -)");
  if (stage.name == "deploy") {
    stage.deploy = true;
    reject_unknown(body, where, {"name", "deadline"});
    if (body.contains("deadline")) stage.deadline = duration_field(body["deadline"], where + ".deadline");
    return stage;
  }
  reject_unknown(body, where, {"name", "service", "argv", "env", "cwd", "timeout", "junit"});
  if (!body.contains("service")) invalid(where + ".service", "is required (the service whose box the stage runs in)");
  stage.service = string_field(body["service"], where + ".service");
  if (!stack.services.contains(stage.service)) invalid(where + ".service", "no service named '" + stage.service + "'");
  if (!body.contains("argv")) invalid(where + ".argv", "is required");
  json exec = json::object();
  for (const char* key : {"argv", "env", "cwd", "timeout"}) {
    if (body.contains(key)) exec[key] = body[key];
  }
  try {
    stage.exec = parse_exec_spec(exec);  // the checks a session exec gets: names, NUL bytes, paths, durations
  } catch (const http::ApiError& e) {
    throw http::ApiError(e.code(), where + "." + std::string(e.what()));
  }
  if (body.contains("junit")) {
    stage.junit = string_list(body["junit"], where + ".junit");
    if (stage.junit.size() > kMaxReportPaths) invalid(where + ".junit", "at most " + std::to_string(kMaxReportPaths) + " paths");
    for (const auto& glob : stage.junit) {
      if (glob.empty() || glob.find("..") != std::string::npos) invalid(where + ".junit", "'" + glob + "' is not a glob without ..");
      reject_nul(glob, where + ".junit");
    }
  }
  return stage;
}

void check_dependencies(const StackSpec& stack) {
  for (const auto& [name, service] : stack.services) {
    for (const auto& [other, condition] : service.depends_on) {
      if (!stack.services.contains(other)) invalid("services." + name + ".depends_on." + other, "no such service");
      if (other == name) invalid("services." + name + ".depends_on." + other, "a service cannot depend on itself");
      if (condition == DependsOn::kCompleted && stack.services.at(other).command.empty()) {
        invalid("services." + name + ".depends_on." + other, "\"completed\" needs a service with a command");
      }
      if (condition == DependsOn::kReady && stack.services.at(other).command.empty() &&
          stack.services.at(other).ready.kind != ReadyProbe::Kind::kNone) {
        invalid("services." + other + ".ready", "a service without a command has nothing to probe");
      }
    }
  }
  if (stack.start_order().size() != stack.services.size()) invalid("services", "depends_on has a cycle");
}

}  // namespace

std::string check_log_pattern(const std::string& pattern) {
  regex_t compiled;
  const int status = regcomp(&compiled, pattern.c_str(), REG_EXTENDED | REG_NOSUB);
  if (status == 0) {
    regfree(&compiled);
    return "";
  }
  char message[256];
  regerror(status, &compiled, message, sizeof message);
  return message;
}

std::chrono::milliseconds ReadyProbe::attempt_timeout() const {
  if (timeout.count() > 0) return timeout;
  if (kind == Kind::kExec) return std::chrono::seconds(30);
  return std::clamp(interval * 5, std::chrono::milliseconds(200), std::chrono::milliseconds(5000));
}

const char* depends_on_name(DependsOn condition) {
  switch (condition) {
    case DependsOn::kStarted: return "started";
    case DependsOn::kReady: return "ready";
    case DependsOn::kCompleted: return "completed";
  }
  return "started";
}

std::vector<std::string> StackSpec::start_order() const {
  std::vector<std::string> order;
  std::set<std::string> placed;
  // Kahn's algorithm, smallest name first among those whose dependencies are placed; a cycle leaves names out.
  while (order.size() < services.size()) {
    bool progressed = false;
    for (const auto& [name, service] : services) {
      if (placed.contains(name)) continue;
      const bool free = std::all_of(service.depends_on.begin(), service.depends_on.end(),
                                    [&](const auto& dependency) { return placed.contains(dependency.first); });
      if (!free) continue;
      order.push_back(name);
      placed.insert(name);
      progressed = true;
      break;
    }
    if (!progressed) break;
  }
  return order;
}

StackSpec parse_stack_spec(const json& body, const LimitPolicy& policy) {
  if (!body.is_object()) invalid("body", "must be a JSON object");
  reject_unknown(body, "", {"services", "network", "stages", "ttl", "labels"});
  StackSpec stack;
  if (!body.contains("services") || !body["services"].is_object() || body["services"].empty()) {
    invalid("services", "must be an object of one or more services by name");
  }
  if (body["services"].size() > kMaxStackServices) {
    invalid("services", "a stack has at most " + std::to_string(kMaxStackServices) + " services");
  }
  if (body.contains("network")) {
    const json& network = body["network"];
    if (!network.is_object()) invalid("network", "must be an object {egress, as_of}");
    reject_unknown(network, "network", {"egress", "as_of"});
    if (network.contains("egress")) {
      stack.egress = string_field(network["egress"], "network.egress");
      if (stack.egress != "none" && stack.egress != "proxy") {
        invalid("network.egress", "must be \"none\" (no route out of the stack) or \"proxy\" (the package proxy only)");
      }
    }
    if (network.contains("as_of")) {
      stack.as_of = resolve_as_of(string_field(network["as_of"], "network.as_of"), "network.as_of");
    }
    if (stack.egress == "proxy" && !stack.as_of) invalid("network.as_of", "is required with egress \"proxy\" (the cutoff)");
    if (stack.egress != "proxy" && stack.as_of) invalid("network.as_of", "is only for egress \"proxy\"");
  }
  for (const auto& [name, service] : body["services"].items()) {
    if (!is_service_name(name)) {
      invalid("services." + name, "a service name is a DNS label: lower-case letters, digits and -, at most 63");
    }
    stack.services.emplace(name, parse_service(service, "services." + name, policy, stack));
  }
  check_dependencies(stack);
  if (body.contains("stages")) {
    const json& stages = body["stages"];
    if (!stages.is_array()) invalid("stages", "must be a list");
    if (stages.size() > kMaxStackStages) invalid("stages", "at most " + std::to_string(kMaxStackStages) + " stages");
    std::set<std::string> names;
    for (std::size_t i = 0; i < stages.size(); ++i) {
      StageSpec stage = parse_stage(stages[i], "stages[" + std::to_string(i) + "]", stack);
      if (!names.insert(stage.name).second) invalid("stages[" + std::to_string(i) + "].name", "repeats '" + stage.name + "'");
      stack.stages.push_back(std::move(stage));
    }
  }
  if (std::none_of(stack.stages.begin(), stack.stages.end(), [](const StageSpec& s) { return s.deploy; })) {
    StageSpec deploy;
    deploy.name = "deploy";
    deploy.deploy = true;
    stack.stages.push_back(deploy);
  }
  if (body.contains("ttl")) stack.ttl = duration_field(body["ttl"], "ttl");
  if (body.contains("labels")) stack.labels = string_map(body["labels"], "labels");
  return stack;
}

json to_json(const StackSpec& stack) {
  json services = json::object();
  for (const auto& [name, service] : stack.services) {
    json j = to_json(service.box);
    for (const char* lifetime : {"ttl", "idle_ttl", "on_expiry", "persist_shell_state", "network"}) j.erase(lifetime);
    if (!service.command.empty()) j["command"] = service.command;
    if (!service.user.empty()) j["user"] = service.user;
    json depends = json::object();
    for (const auto& [other, condition] : service.depends_on) depends[other] = depends_on_name(condition);
    j["depends_on"] = depends;
    j["ready"] = to_json(service.ready);
    json publish = json::array();
    for (const PublishedPort& published : service.publish) {
      publish.push_back({{"port", published.port}, {"host_port", published.host_port}});
    }
    j["publish"] = publish;
    j["stop_grace"] = service.stop_grace.count();
    services[name] = j;
  }
  json stages = json::array();
  for (const StageSpec& stage : stack.stages) {
    if (stage.deploy) {
      stages.push_back({{"name", stage.name}, {"deadline", stage.deadline.count()}});
      continue;
    }
    json j = {{"name", stage.name}, {"service", stage.service}, {"argv", stage.exec.argv}, {"env", stage.exec.env},
              {"timeout", stage.exec.timeout.count()}, {"junit", stage.junit}};
    if (stage.exec.cwd) j["cwd"] = *stage.exec.cwd;
    stages.push_back(j);
  }
  json network = {{"egress", stack.egress}};
  if (stack.as_of) network["as_of"] = *stack.as_of;
  return {{"services", services}, {"network", network}, {"stages", stages},
          {"ttl", stack.ttl.count()}, {"labels", stack.labels}};
}

}  // namespace capsule::spec
