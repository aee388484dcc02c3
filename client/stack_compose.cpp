// compose.yaml -> POST /v1/stacks: a bounded walk over yaml-cpp's document (nodes counted with aliases expanded,
// nesting capped) that maps the compose keys a stack can honour and refuses every other one by its key path.
#include "client/stack_compose.h"

#include <yaml-cpp/depthguard.h>
#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <cctype>
#include <charconv>
#include <set>
#include <stdexcept>
#include <utility>
#include <vector>

#include "base/units.h"
#include "client/cli_args.h"

namespace capsule::client {
namespace {

using nlohmann::json;
using Entries = std::vector<std::pair<std::string, YAML::Node>>;

[[noreturn]] void refuse(const std::string& path, const std::string& why) {
  throw std::invalid_argument("compose: " + path + ": " + why);
}

// Why a compose key is not part of the subset; "" for keys without a note of their own.
std::string refusal(const std::string& key) {
  if (key == "networks" || key == "network_mode") return "the services of a stack share its one network";
  if (key == "volumes") return "give the service a workspace in its x-capsule (workspace: {path: ...})";
  if (key == "build") return "give an image (or x-capsule toolchains and layers) and build in a stage of x-capsule";
  if (key == "privileged" || key == "cap_add" || key == "devices") {
    return "a service's box has no capabilities and no host devices";
  }
  return "";
}

[[noreturn]] void refuse_key(const std::string& path, const std::string& key, const char* supported) {
  const std::string why = refusal(key);
  refuse(path, "not supported by stacks (each stack has a private network of its own, which only its services "
               "share): " + (why.empty() ? std::string(supported) : why));
}

// Counts every node visited (an alias is visited as often as it is used) and the nesting of the visit.
class Walk {
 public:
  void visit(const std::string& path) {
    if (++nodes_ > kMaxComposeNodes) {
      refuse(path, "the document expands to more than " + std::to_string(kMaxComposeNodes) + " nodes (aliases counted "
             "each time they are used)");
    }
  }

  class Deeper {
   public:
    Deeper(Walk& walk, const std::string& path) : walk_(walk) {
      if (++walk_.depth_ > kMaxComposeDepth) {
        refuse(path, "nested deeper than " + std::to_string(kMaxComposeDepth) + " levels");
      }
    }
    ~Deeper() { --walk_.depth_; }
    Deeper(const Deeper&) = delete;
    Deeper& operator=(const Deeper&) = delete;

   private:
    Walk& walk_;
  };

 private:
  std::size_t nodes_ = 0;
  int depth_ = 0;
};

void check_tag(const YAML::Node& node, const std::string& path) {
  const std::string& tag = node.Tag();
  if (tag.empty() || tag == "?" || tag == "!" || tag.starts_with("tag:yaml.org,2002:")) return;
  refuse(path, "the YAML tag " + tag + " is not supported");
}

// Compose's interpolation: "$$" is a literal "$"; a variable would need this shell's environment, so it is refused.
std::string literal(const std::string& text, const std::string& path) {
  std::string out;
  for (std::size_t i = 0; i < text.size(); ++i) {
    if (text[i] != '$') {
      out += text[i];
    } else if (i + 1 < text.size() && text[i + 1] == '$') {
      out += '$';
      ++i;
    } else {
      refuse(path, "variables ($NAME, ${NAME}) are not interpolated: write the value, or $$ for a literal $");
    }
  }
  return out;
}

std::string yaml_text(const YAML::Node& node, const std::string& path, Walk& walk) {
  walk.visit(path);
  check_tag(node, path);
  if (!node.IsScalar()) refuse(path, "must be a single value");
  return literal(node.Scalar(), path);
}

// A map's entries in document order; `<<` merge keys add the keys of their maps (the first one given wins) that
// the map does not set itself. A key given twice is refused.
Entries entries(const YAML::Node& node, const std::string& path, Walk& walk) {
  const Walk::Deeper deeper(walk, path);
  walk.visit(path);
  check_tag(node, path);
  if (!node.IsMap()) refuse(path, "must be a map");
  Entries own, merged;
  std::set<std::string> keys, merged_keys;
  const auto merge = [&](const YAML::Node& source, const std::string& at) {
    for (auto& entry : entries(source, at, walk)) {
      if (merged_keys.insert(entry.first).second) merged.push_back(std::move(entry));
    }
  };
  for (auto it = node.begin(); it != node.end(); ++it) {
    const YAML::Node key = it->first;
    walk.visit(path);
    if (!key.IsScalar()) refuse(path, "a key must be a single value");
    const std::string name = key.Scalar();
    const YAML::Node value = it->second;
    if (name == "<<" && key.Tag() == "?") {
      if (value.IsSequence()) {
        for (std::size_t i = 0; i < value.size(); ++i) merge(value[i], path + ".<<[" + std::to_string(i) + "]");
      } else {
        merge(value, path + ".<<");
      }
      continue;
    }
    if (!keys.insert(name).second) refuse(path + "." + name, "is given twice");
    own.emplace_back(name, value);
  }
  for (auto& entry : merged) {
    if (keys.insert(entry.first).second) own.push_back(std::move(entry));
  }
  return own;
}

// A plain scalar typed as YAML 1.2's core schema does (null, bool, integer, float, else text); quoted: text.
json typed_scalar(const YAML::Node& node, const std::string& path) {
  const std::string& text = node.Scalar();
  if (node.Tag() == "!" || node.Tag() == "tag:yaml.org,2002:str") return literal(text, path);
  if (text == "~" || text == "null" || text == "Null" || text == "NULL") return nullptr;
  if (text == "true" || text == "True" || text == "TRUE") return true;
  if (text == "false" || text == "False" || text == "FALSE") return false;
  const char* end = text.data() + text.size();
  std::int64_t integer = 0;
  if (!text.empty() && std::from_chars(text.data(), end, integer).ptr == end) return integer;
  double real = 0;
  if (!text.empty() && text.find_first_not_of("0123456789+-.eE") == std::string::npos &&
      std::from_chars(text.data(), end, real).ptr == end) {
    return real;
  }
  return literal(text, path);
}

// Any node as JSON (what x-capsule passes through).
json value_of(const YAML::Node& node, const std::string& path, Walk& walk) {
  if (node.IsMap()) {
    json out = json::object();
    for (const auto& [key, value] : entries(node, path, walk)) out[key] = value_of(value, path + "." + key, walk);
    return out;
  }
  const Walk::Deeper deeper(walk, path);
  walk.visit(path);
  check_tag(node, path);
  if (node.IsSequence()) {
    json out = json::array();
    for (std::size_t i = 0; i < node.size(); ++i) {
      out.push_back(value_of(node[i], path + "[" + std::to_string(i) + "]", walk));
    }
    return out;
  }
  return node.IsScalar() ? typed_scalar(node, path) : json(nullptr);
}

std::vector<std::string> words(const YAML::Node& node, const std::string& path, Walk& walk) {
  walk.visit(path);
  if (!node.IsSequence()) refuse(path, "must be a list");
  std::vector<std::string> out;
  for (std::size_t i = 0; i < node.size(); ++i) {
    out.push_back(yaml_text(node[i], path + "[" + std::to_string(i) + "]", walk));
  }
  return out;
}

json shell(const std::string& script) { return json::array({"/bin/sh", "-c", script}); }

// command: a list is the argv, a string is run by /bin/sh -c.
json command_of(const YAML::Node& node, const std::string& path, Walk& walk) {
  if (node.IsScalar()) return shell(yaml_text(node, path, walk));
  const std::vector<std::string> argv = words(node, path, walk);
  if (argv.empty()) refuse(path, "must not be empty");
  return argv;
}

// environment and labels: a map, or a list of KEY=VALUE.
json key_values(const YAML::Node& node, const std::string& path, Walk& walk) {
  json pairs = json::object();
  if (node.IsMap()) {
    for (const auto& [key, value] : entries(node, path, walk)) {
      if (value.IsNull()) refuse(path + "." + key, "has no value (none is taken from this shell): write KEY: VALUE");
      pairs[key] = yaml_text(value, path + "." + key, walk);
    }
    return pairs;
  }
  if (!node.IsSequence()) refuse(path, "must be a map or a list of KEY=VALUE");
  const std::vector<std::string> items = words(node, path, walk);
  for (std::size_t i = 0; i < items.size(); ++i) {
    const std::string at = "compose: " + path + "[" + std::to_string(i) + "]";
    const auto [key, value] = split_pair(items[i], at.c_str());
    pairs[key] = value;
  }
  return pairs;
}

json depends_on_of(const YAML::Node& node, const std::string& path, Walk& walk) {
  json out = json::object();
  if (node.IsSequence()) {
    for (const std::string& name : words(node, path, walk)) out[name] = "started";
    return out;
  }
  for (const auto& [name, value] : entries(node, path, walk)) {
    std::string condition = "started";
    for (const auto& [key, setting] : entries(value, path + "." + name, walk)) {
      const std::string at = path + "." + name + "." + key;
      if (key != "condition") refuse(at, "not supported by stacks: a dependency takes only condition");
      const std::string given = yaml_text(setting, at, walk);
      if (given == "service_started") condition = "started";
      else if (given == "service_healthy") condition = "ready";
      else if (given == "service_completed_successfully") condition = "completed";
      else refuse(at, "must be service_started, service_healthy or service_completed_successfully");
    }
    out[name] = condition;
  }
  return out;
}

constexpr std::int64_t kMaxDurationMs = 100LL * 365 * 24 * 3600 * 1000;

// A compose duration ("30s", "500ms", "1m30s", "1.5h"; "0") in milliseconds.
std::int64_t duration_ms(const YAML::Node& node, const std::string& path, Walk& walk) {
  const std::string text = yaml_text(node, path, walk);
  if (text == "0") return 0;
  const char* hint = "must be a duration such as \"30s\", \"500ms\" or \"1m30s\" (units h, m, s, ms)";
  if (text.empty()) refuse(path, hint);
  std::int64_t total = 0;
  for (std::size_t start = 0; start < text.size();) {
    const std::size_t unit = text.find_first_not_of("0123456789.", start);
    if (unit == start || unit == std::string::npos) refuse(path, hint);
    const std::size_t end = std::min(text.find_first_of("0123456789.", unit), text.size());
    const std::string suffix = text.substr(unit, end - unit);
    if (suffix != "h" && suffix != "m" && suffix != "s" && suffix != "ms") refuse(path, hint);
    try {
      total += base::parse_duration(text.substr(start, end - start)).count();
    } catch (const std::invalid_argument&) {
      refuse(path, hint);
    }
    if (total > kMaxDurationMs) refuse(path, "must be at most 100 years");
    start = end;
  }
  return total;
}

std::int64_t count_of(const YAML::Node& node, const std::string& path, Walk& walk, std::int64_t most) {
  const std::string text = yaml_text(node, path, walk);
  std::int64_t value = 0;
  const char* end = text.data() + text.size();
  if (text.empty() || std::from_chars(text.data(), end, value).ptr != end || value < 1 || value > most) {
    refuse(path, "must be a whole number from 1 to " + std::to_string(most));
  }
  return value;
}

// healthcheck -> ready {exec, interval, timeout, retries, start_period, start_interval, deadline}; null when
// disabled. Compose's defaults (30s, 30s, 3, 0) are written out; the deadline is the longest compose would wait:
// the start period, the attempt running at its end, then `retries` failed attempts with their intervals.
json ready_of(const YAML::Node& node, const std::string& path, Walk& walk) {
  std::int64_t interval = 30000, timeout = 30000, retries = 3, start_period = 0, start_interval = 0;
  json exec;
  bool disabled = false, tested = false;
  for (const auto& [key, value] : entries(node, path, walk)) {
    const std::string at = path + "." + key;
    if (key == "test") {
      tested = true;
      if (value.IsScalar()) {
        exec = shell(yaml_text(value, at, walk));
        continue;
      }
      const std::vector<std::string> test = words(value, at, walk);
      if (test.size() == 1 && test[0] == "NONE") disabled = true;
      else if (test.size() >= 2 && test[0] == "CMD") exec = std::vector<std::string>(test.begin() + 1, test.end());
      else if (test.size() == 2 && test[0] == "CMD-SHELL") exec = shell(test[1]);
      else refuse(at, "must be a string, [\"CMD\", ARGS...], [\"CMD-SHELL\", COMMAND] or [\"NONE\"]");
    } else if (key == "interval") {
      interval = duration_ms(value, at, walk);
    } else if (key == "start_period") {
      start_period = duration_ms(value, at, walk);
    } else if (key == "start_interval") {
      start_interval = duration_ms(value, at, walk);
    } else if (key == "timeout") {
      timeout = duration_ms(value, at, walk);
    } else if (key == "retries") {
      retries = count_of(value, at, walk, 100000);
    } else if (key == "disable") {
      const json flag = value_of(value, at, walk);
      if (!flag.is_boolean()) refuse(at, "must be true or false");
      disabled = disabled || flag.get<bool>();
    } else {
      refuse(at, "not supported by stacks: a healthcheck takes test, interval, timeout, retries, start_period, "
                 "start_interval and disable");
    }
  }
  if (disabled) return nullptr;
  if (!tested) refuse(path, "needs a test (no image healthcheck is inherited)");
  if (interval + timeout > (kMaxDurationMs - start_period) / (retries + 1)) {
    refuse(path + ".interval", "(interval + timeout) times retries must be at most 100 years");
  }
  json ready = {{"exec", exec}, {"interval", interval}, {"timeout", timeout}, {"retries", retries},
                {"start_period", start_period}, {"deadline", start_period + (retries + 1) * (interval + timeout)}};
  if (start_interval > 0) ready["start_interval"] = start_interval;
  return ready;
}

std::uint16_t port_number(const std::string& text, const std::string& path) {
  std::uint32_t port = 0;
  const char* end = text.data() + text.size();
  if (text.empty() || std::from_chars(text.data(), end, port).ptr != end || port < 1 || port > 65535) {
    refuse(path, "must be a TCP port (1-65535): '" + text + "'");
  }
  return static_cast<std::uint16_t>(port);
}

// One `ports` entry -> {port, host_port}: "80", "8080:80", "127.0.0.1:8080:80", with "/tcp", or the long form
// {target, published, host_ip, protocol}. A stack publishes on the host's 127.0.0.1 only, TCP only, one port a row.
json compose_published_port(const YAML::Node& node, const std::string& path, Walk& walk) {
  std::string target, published, host_ip, protocol = "tcp";
  if (node.IsMap()) {
    for (const auto& [key, value] : entries(node, path, walk)) {
      const std::string at = path + "." + key;
      if (key == "target") target = yaml_text(value, at, walk);
      else if (key == "published") published = yaml_text(value, at, walk);
      else if (key == "host_ip") host_ip = yaml_text(value, at, walk);
      else if (key == "protocol") protocol = yaml_text(value, at, walk);
      else if (key != "mode" && key != "name" && key != "app_protocol") {
        refuse(at, "not supported by stacks: a port takes target, published, host_ip and protocol");
      }
    }
    if (target.empty()) refuse(path + ".target", "is required");
  } else {
    std::string text = yaml_text(node, path, walk);
    if (const std::size_t slash = text.find('/'); slash != std::string::npos) {
      protocol = text.substr(slash + 1);
      text.resize(slash);
    }
    const std::size_t last = text.rfind(':');
    target = last == std::string::npos ? text : text.substr(last + 1);
    if (last != std::string::npos) {
      const std::string host = text.substr(0, last);
      const std::size_t ip_end = host.rfind(':');
      published = ip_end == std::string::npos ? host : host.substr(ip_end + 1);
      if (ip_end != std::string::npos) host_ip = host.substr(0, ip_end);
    }
  }
  if (protocol != "tcp") refuse(path, "only TCP ports are published (a stack relays TCP connections)");
  if (!host_ip.empty() && host_ip != "127.0.0.1" && host_ip != "localhost" && host_ip != "0.0.0.0") {
    refuse(path, "a stack publishes on the host's 127.0.0.1 only, not on " + host_ip);
  }
  if (target.find('-') != std::string::npos || published.find('-') != std::string::npos) {
    refuse(path, "port ranges are not supported: give one port a row");
  }
  json port = {{"port", port_number(target, path)}};
  if (!published.empty()) port["host_port"] = port_number(published, path);
  return port;
}

// ports -> publish on the host's loopback (0.0.0.0 is read as 127.0.0.1: nothing of a stack listens elsewhere);
// expose -> publish on a free loopback port (inside the stack every port is reachable anyway, so exposing
// is only of use from the host; the stack object shows which port).
void add_published(json& publish, const YAML::Node& node, const std::string& path, Walk& walk, bool exposed) {
  walk.visit(path);
  if (!node.IsSequence()) refuse(path, "must be a list");
  for (std::size_t i = 0; i < node.size(); ++i) {
    const std::string at = path + "[" + std::to_string(i) + "]";
    json port;
    if (exposed) {  // "3000" or "3000/tcp"
      std::string text = yaml_text(node[i], at, walk);
      if (const std::size_t slash = text.find('/'); slash != std::string::npos) {
        if (text.substr(slash + 1) != "tcp") refuse(at, "only TCP ports are published (a stack relays TCP connections)");
        text.resize(slash);
      }
      if (text.find('-') != std::string::npos) refuse(at, "port ranges are not supported: give one port a row");
      port = {{"port", port_number(text, at)}};
    } else {
      port = compose_published_port(node[i], at, walk);
    }
    const bool known = std::any_of(publish.begin(), publish.end(), [&](const json& p) { return p["port"] == port["port"]; });
    if (!known) publish.push_back(std::move(port));
    else if (!exposed) refuse(at, "publishes port " + port["port"].dump() + " twice");
  }
}

// mem_limit ("512m", "1gb", 1073741824) -> limits.memory as the API reads sizes ("512m", "1g", bytes).
json memory_of(const YAML::Node& node, const std::string& path, Walk& walk) {
  std::string text = yaml_text(node, path, walk);
  for (char& c : text) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  if (!text.empty() && text.back() == 'b') text.pop_back();  // "512mb" is 512m, "2048b" 2048 bytes
  const std::size_t digits = text.find_first_not_of("0123456789");
  const bool sized = digits != std::string::npos && digits > 0 && digits + 1 == text.size() &&
                     std::string_view("kmg").find(text.back()) != std::string_view::npos;
  if (text.empty() || (digits != std::string::npos && !sized)) {
    refuse(path, "must be a size such as 512m or 1g (units b, k, m, g)");
  }
  if (digits == std::string::npos) {
    std::uint64_t bytes = 0;
    if (std::from_chars(text.data(), text.data() + text.size(), bytes).ec != std::errc()) refuse(path, "is too large");
    return bytes;
  }
  return text;
}

const char* const kServiceKeys =
    "a service takes image, command, environment, working_dir, user, depends_on, healthcheck, ports, expose, "
    "mem_limit, labels, stop_grace_period and x-capsule";

json service_of(const YAML::Node& node, const std::string& path, Walk& walk) {
  json service = json::object();
  json extension = json::object();
  json publish = json::array();
  json memory;
  const Entries given = entries(node, path, walk);
  // ports first, so a port both published and exposed keeps its host port.
  for (const auto& [key, value] : given) {
    if (key == "ports") add_published(publish, value, path + "." + key, walk, false);
  }
  for (const auto& [key, value] : given) {
    const std::string at = path + "." + key;
    if (key == "image") service["image"] = yaml_text(value, at, walk);
    else if (key == "command") service["command"] = command_of(value, at, walk);
    else if (key == "environment") service["env"] = key_values(value, at, walk);
    else if (key == "working_dir") service["cwd"] = yaml_text(value, at, walk);
    else if (key == "user") service["user"] = yaml_text(value, at, walk);
    else if (key == "depends_on") service["depends_on"] = depends_on_of(value, at, walk);
    else if (key == "ports") continue;
    else if (key == "expose") add_published(publish, value, at, walk, true);
    else if (key == "mem_limit") memory = memory_of(value, at, walk);
    else if (key == "labels") service["labels"] = key_values(value, at, walk);
    else if (key == "stop_grace_period") service["stop_grace"] = duration_ms(value, at, walk);
    else if (key == "healthcheck") {
      json ready = ready_of(value, at, walk);
      if (!ready.is_null()) service["ready"] = std::move(ready);
    } else if (key == "x-capsule") {
      extension = value_of(value, at, walk);
      if (!extension.is_object()) refuse(at, "must be a map of service fields (workspace, limits, ready, ...)");
    } else if (key == "entrypoint") {
      refuse(at, "not supported by stacks: a service's command is its whole argv; put the entrypoint's words "
                 "first in command");
    } else if (!key.starts_with("x-")) {
      refuse_key(at, key, kServiceKeys);
    }
  }
  if (!publish.empty()) service["publish"] = std::move(publish);
  if (!memory.is_null()) service["limits"] = {{"memory", memory}};
  for (auto& [key, value] : extension.items()) {
    if (key == "limits" && value.is_object() && !memory.is_null() && !value.contains("memory")) value["memory"] = memory;
    service[key] = std::move(value);
  }
  return service;
}

json body_of(const YAML::Node& document, Walk& walk) {
  json body = json::object();
  bool has_services = false;
  for (const auto& [key, value] : entries(document, "(top level)", walk)) {
    if (key == "services") {
      has_services = true;
      json services = json::object();
      for (const auto& [name, service] : entries(value, "services", walk)) {
        services[name] = service_of(service, "services." + name, walk);
      }
      if (services.empty()) refuse("services", "must name at least one service");
      body["services"] = std::move(services);
    } else if (key == "x-capsule") {
      json extension = value_of(value, key, walk);
      if (!extension.is_object()) refuse(key, "must be a map (stages, ttl, labels, network)");
      for (auto& [field, setting] : extension.items()) {
        if (field != "stages" && field != "ttl" && field != "labels" && field != "network") {
          refuse(key + "." + field, "not supported: the top level's x-capsule takes stages, ttl, labels and network");
        }
        body[field] = std::move(setting);
      }
    } else if (key != "name" && key != "version" && !key.starts_with("x-")) {
      refuse_key(key, key, "a compose file takes services, name and x-capsule");
    }
  }
  if (!has_services) refuse("services", "is required");
  return body;
}

}  // namespace

json compose_to_stack_body(std::string_view yaml) {
  if (yaml.size() > kMaxStackFileBytes) {
    throw std::invalid_argument("compose: the file has more than " + std::to_string(kMaxStackFileBytes) + " bytes");
  }
  try {
    const std::vector<YAML::Node> documents = YAML::LoadAll(std::string(yaml));
    if (documents.size() != 1) {
      throw std::invalid_argument("compose: expected one YAML document, found " + std::to_string(documents.size()));
    }
    Walk walk;
    return body_of(documents[0], walk);
  } catch (const YAML::Exception& e) {
    throw std::invalid_argument("compose: not valid YAML: line " + std::to_string(e.mark.line + 1) + ", column " +
                                std::to_string(e.mark.column + 1) + ": " +
                                (dynamic_cast<const YAML::DeepRecursion*>(&e) ? "nested too deeply" : e.msg));
  }
}

json stack_body_from_text(const std::string& file_name, std::string_view text) {
  if (text.size() > kMaxStackFileBytes) {
    throw std::invalid_argument(file_name + ": more than " + std::to_string(kMaxStackFileBytes) + " bytes");
  }
  const std::size_t first = text.find_first_not_of(" \t\r\n");
  const bool is_json = file_name.ends_with(".json") || (first != std::string_view::npos && text[first] == '{');
  try {
    if (!is_json) return compose_to_stack_body(text);
    json body = json::parse(text);
    if (!body.is_object()) throw std::invalid_argument("the stack must be a JSON object");
    return body;
  } catch (const std::exception& e) {
    throw std::invalid_argument(file_name + ": " + e.what());
  }
}

}  // namespace capsule::client
