// `capsule run` over capsuled's ndjson event stream (run_stream relays it): the POST /v1/runs body from the
// flags, the first SIGINT/SIGTERM turned into a cancel, and the finished run handed to run_view.
#include "client/cli_run.h"

#include <iostream>
#include <iterator>

#include "client/cli_daemon.h"
#include "client/cli_runs.h"
#include "client/run_stream.h"
#include "client/run_view.h"
#include "http/unix_client.h"

namespace capsule::client {

using nlohmann::json;

json build_run_body(const RunOptions& o) {
  if (o.argv.empty()) throw std::invalid_argument("no command given: put it after --, e.g. capsule run -- make test");
  json body = {{"argv", o.argv}};
  if (!o.image.empty()) body["image"] = o.image;
  json env = json::object();
  for (const auto& [key, value] : env_assignments(o.env)) env[key] = value;
  if (!env.empty()) body["env"] = env;
  json labels = json::object();
  for (const auto& item : o.labels) {
    const auto [key, value] = split_pair(item, "--label");
    labels[key] = value;
  }
  if (!labels.empty()) body["labels"] = labels;
  json toolchains = json::object();
  for (const auto& item : o.toolchains) {
    const auto [key, value] = split_pair(item, "--toolchain");
    toolchains[key] = value;
  }
  if (!toolchains.empty()) body["toolchains"] = toolchains;
  if (!o.as_of.empty()) body["as_of"] = o.as_of;
  if (!o.workdir.empty()) body["cwd"] = o.workdir;
  if (!o.workspace.empty()) {
    body["workspace"] = {{"path", absolute_path(o.workspace)}};
    if (!o.mode.empty()) body["workspace"]["mode"] = o.mode;
  } else if (!o.mode.empty()) {
    throw std::invalid_argument("--mode needs --workspace");
  }
  if (!o.workspace_snapshot.empty()) {
    if (!o.workspace.empty()) throw std::invalid_argument("give --workspace or --workspace-snapshot, not both");
    body["workspace"] = {{"snapshot", o.workspace_snapshot}};
  }
  if (o.reproducible) body["reproducible"] = true;
  if (!o.baseline.empty()) body["baseline"] = {{"run", o.baseline}, {"allow_removed", o.allow_removed}};
  else if (o.allow_removed) throw std::invalid_argument("--allow-removed needs --baseline");
  if (o.protect_test_config) body["protect_test_config"] = true;
  if (!o.protect.empty()) body["protect"] = o.protect;
  json limits = json::object();
  if (!o.timeout.empty()) limits["wall_time"] = o.timeout;
  if (!o.cpu_time.empty()) limits["cpu_time"] = o.cpu_time;
  if (!o.kill_grace.empty()) limits["kill_grace"] = o.kill_grace;
  if (!o.memory.empty()) limits["memory"] = o.memory;
  if (o.cpus) limits["cpus"] = *o.cpus;
  if (o.pids) limits["pids"] = *o.pids;
  if (!limits.empty()) body["limits"] = limits;
  if (!o.network.empty()) body["network"] = o.network;
  if (!o.policy.empty()) body["policy"] = o.policy;
  json collect = json::object();
  if (!o.junit.empty()) collect["junit"] = o.junit;
  if (!o.classfiles.empty()) collect["classfiles"] = o.classfiles;
  if (!o.coverage.empty()) collect["coverage"] = o.coverage;
  if (o.tail_lines) collect["tail_lines"] = *o.tail_lines;
  if (!collect.empty()) body["collect"] = collect;
  if (o.stdin_data) body["stdin"] = *o.stdin_data;
  return body;
}

int cmd_run(const std::string& socket, RunOptions options) {
  if (options.interactive) {
    options.stdin_data = std::string(std::istreambuf_iterator<char>(std::cin), std::istreambuf_iterator<char>());
  }
  const json body = build_run_body(options);
  const http::HttpClient client(socket);
  if (options.detach) {
    std::cout << id_of(with_daemon(client, [&] { return http::request_json(client, "POST", "/v1/runs", body); }))
              << "\n";
    return 0;
  }
  InterruptWatcher watcher("run", [&client](const std::string& id) {
    std::cerr << "capsule: cancelling run " << id << " (interrupt again to stop waiting)\n";
    const http::HttpResponse response = client.request("POST", run_path(id) + "/cancel");
    if (response.status != 409) http::throw_if_error(response);
  });
  RunEventRelay relay(options.json, [&watcher](const std::string& id) { watcher.set_id(id); });
  const http::HttpResponse response = with_daemon(client, [&] {
    return client.stream_lines("POST", "/v1/runs", body, {{"Accept", "application/x-ndjson"}},
                               [&relay](std::string_view line) { relay.on_line(line); }, watcher.watch());
  });
  http::throw_if_error(response);
  return report_finished(relay, options.json);
}

}  // namespace capsule::client
