// The stack subcommands: CLI11 rows, one request each to capsuled's /v1/stacks routes (up, in cli_stack_up.cpp,
// waits for the stages by default), the stack object as a summary or tables, and a service's logs and execs.
#include "client/cli_stack.h"

#include <unistd.h>

#include <chrono>
#include <exception>
#include <iostream>
#include <thread>

#include "client/cli_args.h"
#include "client/cli_runs.h"
#include "client/json_read.h"
#include "client/run_view.h"
#include "http/unix_client.h"

namespace capsule::client {
namespace {

using nlohmann::json;

constexpr int kExitUnknownService = 2;

std::string cell_duration(const json& object, const char* key) {
  return object.contains(key) && object[key].is_number() ? short_duration(number(object, key)) : "-";
}

std::string cell_number(const json& object, const char* key) {
  return object.contains(key) && object[key].is_number() ? std::to_string(number(object, key)) : "-";
}

std::string or_dash(const std::string& value) { return value.empty() ? "-" : value; }

std::string failure_line(const json& stack) {
  const json& failure = member(stack, "failure");
  if (failure.empty()) return "";
  std::string line = "failure: " + text(failure, "reason");
  if (!text(failure, "stage").empty()) line += " in stage " + text(failure, "stage");
  if (!text(failure, "service").empty()) line += ", service " + text(failure, "service");
  if (!text(failure, "message").empty()) line += ": " + text(failure, "message");
  return one_line(line) + "\n";
}

// services[name] of the stack object; nullptr, after saying which services the stack has, when there is none.
const json* find_service(const json& stack, const std::string& id, const std::string& name) {
  const json& services = member(stack, "services");
  if (services.contains(name) && services[name].is_object()) return &services[name];
  std::string names;
  for (const auto& [key, value] : services.items()) names += (names.empty() ? "" : ", ") + key;
  std::cerr << "capsule: stack " << id << " has no service " << one_line(name) << "; its services: "
            << (names.empty() ? "none" : one_line(names)) << "\n";
  return nullptr;
}

// services[service][field] as a non-empty id, or an error saying why the service has none.
std::string service_field(const json& service, const StackCommands& c, const char* field, const char* missing) {
  const std::string value = text(service, field);
  if (value.empty()) {
    throw std::runtime_error("service " + c.service + " of stack " + c.id + " has no " + field + " (" + missing +
                             "; state " + or_dash(text(service, "state")) + ")");
  }
  return value;
}

// One stream of a run's log relayed byte for byte to `fd` (GET /v1/runs/{id}/logs, with tail and follow).
void relay_log(const std::string& socket, const std::string& run, const char* stream, const StackCommands& c, int fd) {
  const std::string target = run_path(run) + "/logs?stream=" + stream +
                             (c.tail ? "&tail=" + std::to_string(*c.tail) : "") + (c.follow ? "&follow=true" : "");
  const http::HttpResponse response = http::HttpClient(socket).stream(
      "GET", target, nullptr, {}, [fd](std::string_view data) { relay_output(fd, data); });
  http::throw_if_error(response);
}

// A service's logs as `docker logs` gives them: its stdout on stdout and its stderr on stderr (PostgreSQL, for
// one, logs there), both at once when following; --stdout or --stderr: that stream alone, on stdout.
int stack_logs(const std::string& socket, const std::string& run, const StackCommands& c) {
  if (c.stderr_stream || c.stdout_stream) {
    relay_log(socket, run, c.stderr_stream ? "stderr" : "stdout", c, STDOUT_FILENO);
    return 0;
  }
  if (!c.follow) {
    relay_log(socket, run, "stdout", c, STDOUT_FILENO);
    relay_log(socket, run, "stderr", c, STDERR_FILENO);
    return 0;
  }
  std::exception_ptr failed;
  std::thread errors([&] {
    try {
      relay_log(socket, run, "stderr", c, STDERR_FILENO);
    } catch (...) {
      failed = std::current_exception();
    }
  });
  try {
    relay_log(socket, run, "stdout", c, STDOUT_FILENO);
  } catch (...) {
    errors.join();
    throw;
  }
  errors.join();
  if (failed) std::rethrow_exception(failed);
  return 0;
}

int stack_ps(const std::string& socket, const StackCommands& c) {
  const http::HttpClient client(socket);
  if (!c.id.empty()) {
    const json stack = http::request_json(client, "GET", stack_path(c.id));
    std::cout << (c.json ? stack.dump(2) + "\n" : format_stack_summary(stack, false));
    return 0;
  }
  const json page = http::request_json(client, "GET", "/v1/stacks");
  if (c.json) {
    std::cout << page.dump(2) << "\n";
    return 0;
  }
  const json stacks = page.is_array() ? page : page.is_object() ? page.value("stacks", json::array()) : json::array();
  const auto now = std::chrono::duration_cast<std::chrono::milliseconds>(
                       std::chrono::system_clock::now().time_since_epoch()).count();
  std::cout << format_stacks_table(stacks, now);
  return 0;
}

int stack_down(const std::string& socket, const StackCommands& c) {
  const http::HttpClient client(socket);
  const http::HttpResponse response = client.request("DELETE", stack_path(c.id));
  http::throw_if_error(response);
  json stack = json::parse(response.body, nullptr, false);
  if (!stack.is_object()) stack = http::request_json(client, "GET", stack_path(c.id));  // a 204 without a body
  std::cout << c.id << " " << text(stack, "state") << "\n";
  return 0;
}

int stack_dispatch(const std::string& socket, StackCommands& c, bool separator_given,
                   const std::vector<std::string>& command_words) {
  if (c.ps->parsed()) return stack_ps(socket, c);
  if (c.down->parsed()) return stack_down(socket, c);
  const json stack = http::request_json(http::HttpClient(socket), "GET", stack_path(c.id));  // logs, exec
  const json* service = find_service(stack, c.id, c.service);
  if (service == nullptr) return kExitUnknownService;
  if (c.logs->parsed()) {
    const std::string run = service_field(*service, c, "exec_id", "a tool service runs no command, or it has not "
                                                                  "started");
    return stack_logs(socket, run, c);
  }
  c.exec_options.id = service_field(*service, c, "session", "its box is not up");
  c.exec_options.argv = command_argv(c.exec->remaining(), separator_given, command_words);
  return cmd_session_exec(socket, c.exec_options);
}

}  // namespace

void add_stack_commands(CLI::App& app, StackCommands& c) {
  c.group = app.add_subcommand("stack", "services on one private network, started in order, with build, deploy and "
                                        "test stages (docs/stacks.md)");
  c.group->require_subcommand(1);

  c.up = c.group->add_subcommand("up", "start a stack and wait for its stages: capsule stack up FILE (the API's "
                                       "JSON, or a compose.yaml subset)");
  c.up->add_option("file", c.file, "stack.json (POST /v1/stacks's body) or compose.yaml")->required();
  c.up->add_flag("--detach,-d", c.detach, "submit the stack, print its id and return");
  c.up->add_flag("--json", c.json, "print the stack object instead of a summary");
  c.up->footer("Exit status: 0 the stack is up (or submitted, with --detach), 1 it failed (the failure's reason "
               "says where), 125 capsule could not start it.");

  c.ps = c.group->add_subcommand("ps", "list stacks, or one stack's services: capsule stack ps [ID]");
  c.ps->add_option("id", c.id, "stack id: its services instead of the list");
  c.ps->add_flag("--json", c.json, "print the API's JSON instead of a table");

  c.logs = c.group->add_subcommand("logs", "print the output of a service's command, its stdout on stdout and its "
                                           "stderr on stderr: capsule stack logs ID SERVICE");
  c.logs->add_option("id", c.id, "stack id")->required();
  c.logs->add_option("service", c.service, "service name")->required();
  c.logs->add_option("--tail,-n", c.tail, "only the last N lines (as `runs logs --tail`)");
  c.logs->add_flag("--stderr", c.stderr_stream, "print only its stderr, on stdout");
  c.logs->add_flag("--stdout", c.stdout_stream, "print only its stdout")->excludes("--stderr");
  c.logs->add_flag("--follow,-f", c.follow, "keep printing until the command ends");

  c.exec = c.group->add_subcommand("exec", "run a command in a service's box, as `session exec` does: capsule stack "
                                           "exec ID SERVICE [FLAGS] -- CMD...");
  c.exec->add_option("id", c.id, "stack id")->required();
  c.exec->add_option("service", c.service, "service name")->required();
  add_exec_flags(*c.exec, c.exec_options);

  c.down = c.group->add_subcommand("down", "end a stack: its services, their sessions and its network");
  c.down->add_option("id", c.id, "stack id")->required();
}

std::string stack_path(const std::string& id) { return "/v1/stacks/" + http::url_encode(id); }

int stack_exit_code(const json& stack) {
  const std::string state = text(stack, "state");
  if (state == "up" || state == "starting") return 0;
  return state == "failed" ? 1 : kExitCapsuleFailed;
}

std::string format_stack_summary(const json& stack, bool with_stages) {
  std::string out = "stack " + one_line(text(stack, "id")) + " " + one_line(text(stack, "state")) + "\n";
  const json stages = stack.is_object() && stack.contains("stages") && stack["stages"].is_array() ? stack["stages"]
                                                                                                  : json::array();
  if (with_stages && !stages.empty()) {
    std::vector<std::vector<std::string>> rows = {{"STAGE", "STATE", "WALL", "EXIT", "TESTS"}};
    for (const json& stage : stages) {
      rows.push_back({text(stage, "name"), text(stage, "state"), cell_duration(stage, "wall_ms"),
                      cell_number(stage, "exit_code"), or_dash(test_counts(member(stage, "tests")))});
    }
    out += format_columns(rows);
  }
  std::vector<std::vector<std::string>> rows = {{"SERVICE", "STATE", "READY AFTER", "EXIT", "SESSION"}};
  for (const auto& [name, service] : member(stack, "services").items()) {
    rows.push_back({name, text(service, "state"), cell_duration(service, "ready_ms"), cell_number(service, "exit_code"),
                    or_dash(text(service, "session"))});
  }
  return out + format_columns(rows) + failure_line(stack);
}

std::string format_stacks_table(const json& stacks, std::int64_t now_ms) {
  std::vector<std::vector<std::string>> rows = {{"ID", "STATE", "SERVICES", "FAILURE", "CREATED"}};
  for (const json& stack : stacks) {
    rows.push_back({text(stack, "id"), text(stack, "state"), std::to_string(member(stack, "services").size()),
                    or_dash(text(member(stack, "failure"), "reason")), age(now_ms - number(stack, "created_ms"))});
  }
  return format_columns(rows);
}

int cmd_stack(const std::string& socket, StackCommands& c, bool separator_given,
              const std::vector<std::string>& command_words) {
  return exit_125_on_error([&] {
    if (!c.exec->parsed() && !command_words.empty()) {
      std::cerr << "capsule: unexpected arguments after --\n";
      return kExitCapsuleFailed;
    }
    return stack_dispatch(socket, c, separator_given, command_words);
  });
}

}  // namespace capsule::client
