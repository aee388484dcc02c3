// The session subcommands: flags as CLI11 rows, the SessionSpec/ExecSpec bodies, one request each (exec streams
// its events through run_stream, attach follows through session_attach; cp runs in capsule-full, through
// session_files) and the one error rule: exit 125.
#include "client/cli_session.h"

#include <cctype>
#include <chrono>
#include <fstream>
#include <iostream>
#include <iterator>
#include <map>
#include <sstream>

#include "base/base64.h"
#include "client/cli_daemon.h"
#include "client/cli_run.h"
#include "client/json_read.h"
#include "client/run_stream.h"
#include "client/run_view.h"
#include "client/session_tty.h"
#include "http/unix_client.h"

namespace capsule::client {
namespace {

using nlohmann::json;

std::string read_file(const std::string& path, const char* flag) {
  std::ifstream file(path, std::ios::binary);
  if (!file) throw std::runtime_error(std::string(flag) + " " + path + ": cannot be read");
  std::ostringstream content;
  content << file.rdbuf();
  return content.str();
}

json pairs_object(const std::vector<std::string>& items, const char* flag) {
  json out = json::object();
  for (const auto& item : items) {
    const auto [key, value] = split_pair(item, flag);
    out[key] = value;
  }
  return out;
}

std::int64_t now_ms() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::system_clock::now().time_since_epoch())
      .count();
}

std::string format_sessions_table(const json& sessions) {
  std::vector<std::vector<std::string>> rows = {{"ID", "STATE", "EXECS", "CREATED", "LAST USED", "LABELS"}};
  const std::int64_t now = now_ms();
  for (const json& session : sessions) {
    const json& times = member(session, "times");
    const json& execs = member(session, "execs");
    std::string labels;
    for (const auto& [key, value] : member(session, "labels").items()) {
      labels += (labels.empty() ? "" : ",") + key + "=" + (value.is_string() ? value.get<std::string>() : value.dump());
    }
    std::string exec_count = std::to_string(number(execs, "total"));
    if (number(execs, "running") > 0) exec_count += " (" + std::to_string(number(execs, "running")) + " running)";
    rows.push_back({text(session, "id"), text(session, "state"), exec_count, age(now - number(times, "created")),
                    number(times, "last_used") > 0 ? age(now - number(times, "last_used")) : "-", labels});
  }
  return format_columns(rows);
}

int session_create(const std::string& socket, const SessionCreateOptions& options) {
  const json body = build_session_body(options);
  const http::HttpClient client(socket);
  const json session = with_daemon(client, [&] { return http::request_json(client, "POST", "/v1/sessions", body); });
  if (options.json) {
    std::cout << session.dump(2) << "\n";
  } else {
    std::cout << text(session, "id") << "\n";
    if (!options.quiet) std::cerr << "capsule: session " << text(session, "id") << " " << text(session, "state") << "\n";
  }
  return 0;
}

int session_ls(const std::string& socket, const SessionCommands& c) {
  std::string target = "/v1/sessions";
  char separator = '?';
  const std::string limit = c.limit > 0 ? std::to_string(c.limit) : "";
  for (const auto& [name, value] :
       {std::pair{"state", &c.state}, {"label", &c.label}, {"limit", &limit}, {"after", &c.after}}) {
    if (value->empty()) continue;
    target += separator + std::string(name) + "=" + http::url_encode(*value);
    separator = '&';
  }
  const json page = http::request_json(http::HttpClient(socket), "GET", target);
  if (c.json) {
    std::cout << page.dump(2) << "\n";
    return 0;
  }
  std::cout << format_sessions_table(page.value("sessions", json::array()));
  if (page.contains("next") && page["next"].is_string()) {
    std::cerr << "capsule: more sessions: capsule session ls --after " << page["next"].get<std::string>() << "\n";
  }
  return 0;
}

}  // namespace

int cmd_session_exec(const std::string& socket, ExecOptions options) {
  if (options.interactive && !options.tty) {  // with -t, stdin is forwarded as it is typed
    options.stdin_data = std::string(std::istreambuf_iterator<char>(std::cin), std::istreambuf_iterator<char>());
  }
  const http::HttpClient client(socket);
  if (options.tty) {
    if (options.background || !options.stdin_file.empty()) {
      throw std::invalid_argument("session exec: -t takes stdin from this terminal: not with --background or --stdin-file");
    }
    return exec_on_tty(client, options.id, build_exec_body(options), options.json);
  }
  const json body = build_exec_body(options);
  const std::string target = session_path(options.id) + "/exec";
  if (options.background) {
    const std::string exec_id = text(http::request_json(client, "POST", target, body), "id");
    std::cout << exec_id << "\n";
    std::cerr << "capsule: exec " << exec_id << " runs in the background; its output and exit status: "
              << attach_command(options.id, exec_id, {}) << " (stop it: capsule session kill " << options.id << " "
              << exec_id << ")\n";
    return 0;
  }
  InterruptWatcher watcher("exec", [&](const std::string& exec_id) {
    std::cerr << "capsule: sending SIGINT to exec " << exec_id << " (interrupt again to stop waiting)\n";
    const http::HttpResponse response =
        client.request("POST", exec_path(options.id, exec_id) + "/signal", {{"signal", "INT"}});
    if (response.status != 409) http::throw_if_error(response);
  });
  RunEventRelay relay(options.json, [&watcher](const std::string& exec_id) { watcher.set_id(exec_id); });
  const http::HttpResponse response =
      client.stream_lines("POST", target, body, {{"Accept", "application/x-ndjson"}},
                          [&relay](std::string_view line) { relay.on_line(line); }, watcher.watch());
  http::throw_if_error(response);
  return report_finished(relay, options.json);
}

namespace {

int dispatch(const std::string& socket, SessionCommands& c) {
  const http::HttpClient client(socket);
  if (c.create->parsed()) return session_create(socket, c.create_options);
  if (c.ls->parsed()) return session_ls(socket, c);
  if (c.show->parsed()) {
    std::cout << http::request_json(client, "GET", session_path(c.id)).dump(2) << "\n";
    return 0;
  }
  if (c.exec->parsed()) return cmd_session_exec(socket, c.exec_options);
  if (c.attach->parsed()) return attach_exec(client, c.id, c.exec_id, c.attach_from);
  if (c.execs->parsed()) {
    const json list = http::request_json(client, "GET", session_path(c.id) + "/execs");
    if (c.json) std::cout << list.dump(2) << "\n";
    else std::cout << format_runs_table(list.value("execs", json::array()), now_ms());
    return 0;
  }
  if (c.kill->parsed()) {
    http::request_json(client, "POST", exec_path(c.id, c.exec_id) + "/signal", {{"signal", signal_value(c.signal)}});
    std::cout << c.exec_id << "\n";
    return 0;
  }
  if (c.diff->parsed()) {
    const json diff = http::request_json(client, "GET", session_diff_target(c.id, c.patch, c.diff_include, c.diff_exclude));
    std::cout << (c.json ? diff.dump(2) + "\n" : format_session_diff(diff, c.patch));
    return 0;
  }
  if (c.network->parsed()) {
    const json session = http::request_json(client, "POST", session_path(c.id) + "/network", {{"mode", c.network_mode}});
    if (c.json) std::cout << session.dump(2) << "\n";
    std::cerr << "capsule: session " << c.id << " network " << text(session, "network") << "\n";
    return 0;
  }
  if (c.reset->parsed()) {
    http::request_json(client, "POST", session_path(c.id) + "/reset" + (c.to.empty() ? "" : "?to=" + http::url_encode(c.to)));
    std::cerr << "capsule: session " << c.id << " reset to " << (c.to.empty() ? "its start" : c.to) << "\n";
    return 0;
  }
  if (c.checkpoint->parsed()) {
    http::request_json(client, "POST", session_path(c.id) + "/checkpoint", {{"name", c.name}});
    std::cerr << "capsule: session " << c.id << " checkpoint " << c.name << " taken\n";
    return 0;
  }
  if (c.commit->parsed()) {
    std::cout << http::request_json(client, "POST", session_path(c.id) + "/commit", {{"ref", c.name}}).value("digest", "")
              << "\n";
    return 0;
  }
  int status = 0;
  for (const std::string& id : c.ids) {  // rm
    try {
      http::throw_if_error(client.request("DELETE", session_path(id)));
      std::cout << id << "\n";
    } catch (const http::ResponseError& e) {
      std::cerr << "capsule: session rm " << id << ": " << e.code() << ": " << e.cause().detail << "\n";
      status = kExitCapsuleFailed;
    }
  }
  return status;
}

}  // namespace

void add_exec_flags(CLI::App& exec, ExecOptions& e) {
  exec.add_option("--timeout", e.timeout, "wall-clock limit of this exec, e.g. 90s, 10m");
  exec.add_option("--idle-timeout", e.idle_timeout, "end the exec after this long without output, e.g. 5m");
  exec.add_option("--kill-grace", e.kill_grace, "time between SIGTERM and SIGKILL when a limit ends this exec or "
                  "it is killed, e.g. 10s (default: the session's)");
  exec.add_option("--cwd,-w", e.cwd, "working directory inside the session");
  exec.add_option("--env,-e", e.env, "environment variable K=V added to the session's (K alone copies it "
                  "from here)")->allow_extra_args(false);
  exec.add_option("--label,-l", e.labels, "label K=V of this exec's run")->allow_extra_args(false);
  exec.add_option("--stdin-file", e.stdin_file, "file whose bytes are the command's stdin (else it is at EOF)");
  exec.add_flag("--interactive,-i", e.interactive, "send this process's stdin to the command");
  exec.add_flag("--tty,-t", e.tty, "a terminal (pty) for the command, fed from this one as you type (-it)");
  exec.add_flag("--background,-d", e.background, "start the exec, print its id and return");
  exec.add_option("--script", e.script_file, "run this file's text with /bin/sh instead of a command");
  exec.add_option("-c", e.script, "run this text with /bin/sh instead of a command");
  exec.add_flag("--json", e.json, "print the finished run object instead of the command's output");
  add_run_flags(exec, e.collect, {RunFlag::kJunit, RunFlag::kClassfiles, RunFlag::kCoverage, RunFlag::kTailLines,
                                  RunFlag::kBaseline, RunFlag::kAllowRemoved});
  exec.prefix_command();  // `session exec ID make test` also works without "--"
  exec.footer(kExitCodeHelp);
}

void add_session_commands(CLI::App& app, SessionCommands& c) {
  c.session = app.add_subcommand("session", "live sandboxes to exec commands into, with files, diff and undo");
  c.session->require_subcommand(1);

  SessionCreateOptions& o = c.create_options;
  c.create = c.session->add_subcommand("create", "create a session: capsule session create [IMAGE] [FLAGS]");
  add_run_flags(*c.create, o.run,
                {RunFlag::kImage, RunFlag::kWorkspace, RunFlag::kMode, RunFlag::kWorkdir, RunFlag::kTimeout,
                 RunFlag::kCpuTime, RunFlag::kKillGrace, RunFlag::kMemory, RunFlag::kCpus, RunFlag::kPids,
                 RunFlag::kEnv, RunFlag::kLabel, RunFlag::kToolchain, RunFlag::kAsOf, RunFlag::kNetwork,
                 RunFlag::kPolicy, RunFlag::kWorkspaceSnapshot});
  c.create->add_option("--layer", o.layers, "image ref stacked on the base (repeatable, in order)")
      ->allow_extra_args(false);
  c.create->add_option("--disk", o.disk, "space the session's changes may take, e.g. 2g (then ENOSPC)");
  c.create->add_option("--protect", o.protect, "glob of workspace paths no exec may change, e.g. 'tests/**' "
                       "(repeatable)")->allow_extra_args(false);
  c.create->add_option("--ttl", o.ttl, "delete (or freeze) the session this long after creation, e.g. 2h");
  c.create->add_option("--idle-ttl", o.idle_ttl, "... or this long after its last exec or file call, e.g. 15m");
  c.create->add_option("--on-expiry", o.on_expiry, "what expiry does: destroy (default) or freeze")
      ->check(CLI::IsMember({"destroy", "freeze"}));
  c.create->add_flag("--persist-shell-state", o.persist_shell_state,
                     "script execs keep the shell's cwd and exported variables from one to the next");
  c.create->add_flag("--quiet,-q", o.quiet, "print only the session id");
  c.create->add_flag("--json", o.json, "print the session object");

  c.ls = c.session->add_subcommand("ls", "list sessions, newest first");
  c.ls->add_option("--state", c.state, "only sessions in this state (ready, frozen, deleted, expired, lost, failed)");
  c.ls->add_option("--label", c.label, "only sessions with this label K=V");
  c.ls->add_option("--limit", c.limit, "sessions per page (default 50, at most 1000)")->check(CLI::Range(1, 1000));
  c.ls->add_option("--after", c.after, "the page after this session id (the `next` of the previous page)");
  c.ls->add_flag("--json", c.json, "print the API's JSON instead of a table");

  c.show = c.session->add_subcommand("show", "print one session object as JSON");
  c.show->add_option("id", c.id, "session id")->required();

  c.exec = c.session->add_subcommand(
      "exec", "run a command in a session: capsule session exec ID [FLAGS] -- CMD... (or --script FILE, -c SCRIPT)");
  c.exec->add_option("id", c.exec_options.id, "session id")->required();
  add_exec_flags(*c.exec, c.exec_options);

  c.attach = c.session->add_subcommand(
      "attach", "follow a running or finished exec's output until it ends and exit with its status, as `session "
                "exec` does: capsule session attach ID EXEC_ID");
  c.attach->add_option("id", c.id, "session id")->required();
  c.attach->add_option("exec_id", c.exec_id, "exec id (printed by `session exec --background`, listed by "
                       "`session execs`)")->required();
  c.attach->add_option("--from", c.attach_from.stdout_from, "start at this byte of the exec's stdout (default 0: "
                       "all of it)")
      ->check(CLI::NonNegativeNumber);
  c.attach->add_option("--stderr-from", c.attach_from.stderr_from, "start at this byte of its stderr (default 0)")
      ->check(CLI::NonNegativeNumber);
  c.attach->footer(std::string("Ctrl-C (or SIGTERM) only detaches: the exec keeps running, no signal reaches it "
                               "(as docker attach --sig-proxy=false), and the command to re-attach where the output "
                               "stopped is printed. `capsule session kill` stops an exec.\n\n") + kExitCodeHelp);

  c.execs = c.session->add_subcommand("execs", "list a session's execs, newest first");
  c.execs->add_option("id", c.id, "session id")->required();
  c.execs->add_flag("--json", c.json, "print the API's JSON instead of a table");

  c.kill = c.session->add_subcommand("kill", "send a signal to every process of a running exec");
  c.kill->add_option("id", c.id, "session id")->required();
  c.kill->add_option("exec_id", c.exec_id, "exec id")->required();
  c.kill->add_option("--signal,-s", c.signal, "TERM (default), INT, KILL, HUP, QUIT, USR1, USR2 or a number")
      ->capture_default_str();

  c.cp = c.session->add_subcommand("cp", "copy a file or directory into or out of a session: capsule session cp "
                                         "SRC DST, one of them ID:/path");
  c.cp->add_option("source", c.source, "local path or ID:/path")->required();
  c.cp->add_option("destination", c.destination, "local path or ID:/path")->required();

  c.diff = c.session->add_subcommand("diff", "list what changed in the workspace since the session started");
  c.diff->add_option("id", c.id, "session id")->required();
  c.diff->add_flag("--patch,-p", c.patch, "also print unified diffs of text files");
  c.diff->add_flag("--json", c.json, "print the API's JSON");
  c.diff->add_option("--exclude", c.diff_exclude, "leave out paths matching this glob and what is below them, e.g. "
                     "'target/**' or target (repeatable)")->allow_extra_args(false);
  c.diff->add_option("--include", c.diff_include, "show only paths matching this glob or below it, e.g. 'src/**' "
                     "(repeatable)")->allow_extra_args(false);

  c.network = c.session->add_subcommand("network", "switch a network proxy session's package proxy off or on again "
                                                   "between execs: capsule session network ID none|proxy");
  c.network->add_option("id", c.id, "session id")->required();
  c.network->add_option("mode", c.network_mode, "none (off: the box reaches nothing) or proxy (on)")
      ->required()
      ->check(CLI::IsMember({"none", "proxy"}));
  c.network->add_flag("--json", c.json, "print the session object");

  c.reset = c.session->add_subcommand("reset", "discard changes: back to the start or to a checkpoint");
  c.reset->add_option("id", c.id, "session id")->required();
  c.reset->add_option("--to", c.to, "checkpoint name");

  c.checkpoint = c.session->add_subcommand("checkpoint", "keep the current state as a named point to reset to");
  c.checkpoint->add_option("id", c.id, "session id")->required();
  c.checkpoint->add_option("name", c.name, "checkpoint name")->required();

  c.commit = c.session->add_subcommand("commit", "make an image of the session's image and its changes so far");
  c.commit->add_option("id", c.id, "session id")->required();
  c.commit->add_option("ref", c.name, "the new image's ref (name:tag)")->required();

  c.rm = c.session->add_subcommand("rm", "delete sessions: their processes and sandboxes (records stay)");
  c.rm->add_option("ids", c.ids, "session ids")->required();
}

json build_session_body(const SessionCreateOptions& o) {
  RunOptions environment = o.run;
  environment.argv = {"-"};  // the environment half of a RunSpec is built as a run's, without the command
  json body = build_run_body(environment);
  body.erase("argv");
  if (!o.layers.empty()) body["layers"] = o.layers;
  if (!o.disk.empty()) body["limits"]["disk"] = o.disk;
  if (!o.protect.empty()) body["protect"] = o.protect;
  if (!o.ttl.empty()) body["ttl"] = o.ttl;
  if (!o.idle_ttl.empty()) body["idle_ttl"] = o.idle_ttl;
  if (!o.on_expiry.empty()) body["on_expiry"] = o.on_expiry;
  if (o.persist_shell_state) body["persist_shell_state"] = true;
  return body;
}

json build_exec_body(const ExecOptions& o) {
  const int given = !o.argv.empty() + !o.script.empty() + !o.script_file.empty();
  if (given == 0) {
    throw std::invalid_argument("no command given: put it after --, e.g. capsule session exec ID -- make test, "
                                "or give --script FILE or -c SCRIPT");
  }
  if (given > 1) throw std::invalid_argument("give one of a command (after --), --script FILE and -c SCRIPT");
  if (o.stdin_data && !o.stdin_file.empty()) throw std::invalid_argument("give one of -i and --stdin-file");
  json body = json::object();
  if (!o.argv.empty()) body["argv"] = o.argv;
  else body["script"] = o.script_file.empty() ? o.script : read_file(o.script_file, "--script");
  if (!o.cwd.empty()) body["cwd"] = o.cwd;
  json env = json::object();
  for (const auto& [key, value] : env_assignments(o.env)) env[key] = value;
  if (!env.empty()) body["env"] = env;
  if (!o.labels.empty()) body["labels"] = pairs_object(o.labels, "--label");
  if (o.stdin_data) body["stdin_b64"] = base::base64_encode(*o.stdin_data);
  else if (!o.stdin_file.empty()) body["stdin_b64"] = base::base64_encode(read_file(o.stdin_file, "--stdin-file"));
  if (!o.timeout.empty()) body["timeout"] = o.timeout;
  if (!o.idle_timeout.empty()) body["idle_timeout"] = o.idle_timeout;
  if (!o.kill_grace.empty()) body["kill_grace"] = o.kill_grace;
  if (o.background) body["background"] = true;
  RunOptions collecting = o.collect;  // the collect half of a run's body, built as a run's
  collecting.argv = {"-"};
  const json run = build_run_body(collecting);
  for (const char* part : {"collect", "baseline"}) {
    if (run.contains(part)) body[part] = run[part];
  }
  return body;
}

std::string session_diff_target(const std::string& id, bool patch, const std::vector<std::string>& include,
                                const std::vector<std::string>& exclude) {
  std::string target = session_path(id) + "/diff";
  char separator = '?';
  const auto add = [&](const std::string& name, const std::string& value) {
    target += separator + name + "=" + http::url_encode(value);
    separator = '&';
  };
  if (patch) add("patch", "1");
  for (const auto& glob : include) add("include", glob);
  for (const auto& glob : exclude) add("exclude", glob);
  return target;
}

std::string format_session_diff(const json& diff, bool patch) {
  std::map<std::string, const json*> patches;  // by path
  if (diff.contains("patches") && diff["patches"].is_array()) {
    for (const json& entry : diff["patches"]) patches[text(entry, "path")] = &entry;
  }
  std::string listing, texts;
  for (const auto& [key, letter] : {std::pair{"added", "A"}, {"modified", "M"}, {"deleted", "D"}}) {
    if (!diff.contains(key) || !diff[key].is_array()) continue;
    for (const json& change : diff[key]) {
      const std::string path = change.is_string() ? change.get<std::string>() : text(change, "path");
      const auto found = patches.find(path);
      const json* entry = found == patches.end() ? nullptr : found->second;
      const bool binary = entry != nullptr && entry->value("binary", false);
      listing += std::string(letter) + " " + path + (binary ? " (binary)" : "") + "\n";
      if (!patch || entry == nullptr) continue;
      if (!text(*entry, "patch").empty()) {
        texts += text(*entry, "patch");
        if (texts.back() != '\n') texts += '\n';
      } else if (binary) {
        texts += "Binary file " + path + " differs\n";
      } else if (entry->value("too_large", false)) {
        texts += "# " + path + ": no patch: " + text(*entry, "reason") + "\n";
      } else if (entry->value("omitted", false)) {
        texts += "# " + path + ": no patch: the response's limit was reached\n";
      } else if (!text(*entry, "error").empty()) {
        texts += "# " + path + ": no patch: " + text(*entry, "error") + "\n";
      }
    }
  }
  if (diff.value("truncated", false)) {
    const json& totals = member(diff, "totals");
    listing += "# only part of the changes is listed: " + std::to_string(number(totals, "added")) + " added, " +
               std::to_string(number(totals, "modified")) + " modified, " + std::to_string(number(totals, "deleted")) +
               " deleted in all\n";
  }
  if (const json& filter = member(diff, "filter"); number(filter, "left_out") > 0) {
    listing += "# " + std::to_string(number(filter, "left_out")) + " changed paths left out by --include/--exclude\n";
  }
  return listing + texts;
}

std::string session_path(const std::string& id) { return "/v1/sessions/" + http::url_encode(id); }

std::string exec_path(const std::string& session_id, const std::string& exec_id) {
  return session_path(session_id) + "/execs/" + http::url_encode(exec_id);
}

json signal_value(const std::string& typed) {
  if (!typed.empty() && typed.find_first_not_of("0123456789") == std::string::npos && typed.size() < 4) {
    return std::stoi(typed);
  }
  std::string name;
  for (const char c : typed) name += static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  return name.starts_with("SIG") ? name.substr(3) : name;
}

int exit_125_on_error(const std::function<int()>& command) {
  try {
    return command();
  } catch (const http::ResponseError& e) {
    std::cerr << "capsule: " << e.code() << ": " << e.cause().detail << "\n";
  } catch (const std::exception& e) {
    std::cerr << "capsule: " << e.what() << "\n";
  }
  return kExitCapsuleFailed;
}

int cmd_session(const std::string& socket, SessionCommands& c, bool separator_given,
                const std::vector<std::string>& command_words) {
  return exit_125_on_error([&] {
    if (c.exec->parsed()) {
      c.exec_options.argv = command_argv(c.exec->remaining(), separator_given, command_words);
    } else if (!command_words.empty()) {
      std::cerr << "capsule: unexpected arguments after --\n";
      return kExitCapsuleFailed;
    }
    return dispatch(socket, c);
  });
}

}  // namespace capsule::client
