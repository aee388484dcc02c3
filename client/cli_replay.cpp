// `capsule replay`: a finished run replayed from its stored spec and pins (the proxy frozen to what it received);
// with --repeat, every replay waited for and the flakiness report of the original and its replays printed.
#include "client/cli_replay.h"

#include <filesystem>
#include <iomanip>
#include <iostream>
#include <sstream>
#include <stdexcept>

#include "client/cli_daemon.h"
#include "client/cli_runs.h"
#include "client/run_stream.h"
#include "client/run_view.h"
#include "http/unix_client.h"

namespace capsule::client {

using nlohmann::json;

namespace {

std::string rate(const json& value) {
  if (!value.is_number()) return "-";
  std::ostringstream out;
  out << std::fixed << std::setprecision(2) << value.get<double>();
  return out.str();
}

std::string count(const json& object, const char* name) {
  return object.is_object() && object.contains(name) && object[name].is_number() ? object[name].dump() : "-";
}

int print_repeats(const http::HttpClient& client, const ReplayOptions& options) {
  const json answer =
      http::request_json(client, "POST", run_path(options.id) + "/replay", build_replay_body(options));
  std::string ids = options.id;
  for (const auto& run : answer.value("runs", json::array())) {
    if (!options.json) std::cerr << summary_line(run) << "\n";
    ids += ',';  // not "," + id_of(run): GCC 12 at -O3 sees a false overlap there (-Wrestrict)
    ids += id_of(run);
  }
  const http::HttpResponse report = client.request("GET", "/v1/runs/flakiness?runs=" + http::url_encode(ids));
  if (report.status == 404) {
    std::cerr << "capsule: this capsuled has no flakiness report (GET /v1/runs/flakiness answered 404); the runs "
                 "are "
              << ids << "\n";
    if (options.json) std::cout << answer.dump(2) << "\n";
    return 0;
  }
  http::throw_if_error(report);
  const json body = json::parse(report.body);
  std::cout << (options.json ? body.dump(2) + "\n" : format_flakiness_report(body));
  return 0;
}

}  // namespace

json build_replay_body(const ReplayOptions& options) {
  json body = json::object();
  if (options.repeat) body["repeat"] = *options.repeat;
  json vary = json::object();
  std::istringstream names(options.vary);
  for (std::string name; std::getline(names, name, ',');) {
    if (name.empty()) continue;
    if (name != "cpus" && name != "memory" && name != "order") {
      throw std::invalid_argument("--vary: unknown '" + name + "'; expected cpus, memory or order");
    }
    vary[name] = true;
  }
  if (!vary.empty()) body["vary"] = vary;
  if (options.repeat) body["wait"] = true;
  if (options.workspace.starts_with("sha256:")) {
    body["workspace"] = {{"snapshot", options.workspace}};
  } else if (!options.workspace.empty()) {
    body["workspace"] = {{"path", std::filesystem::absolute(options.workspace).lexically_normal().string()}};
  }
  return body;
}

std::string format_flakiness_report(const json& report) {
  std::ostringstream out;
  const json verdict = report.value("verdict", json::object());
  out << "flakiness over " << count(report, "runs") << " runs: verdict passed " << count(verdict, "passed")
      << ", failed " << count(verdict, "failed") << ", flip rate " << rate(verdict.value("flip_rate", json()))
      << "\n";
  std::vector<std::vector<std::string>> rows{{"CASE", "PASSED", "FAILED", "SKIPPED", "FLIP RATE"}};
  for (const auto& item : report.value("cases", json::array())) {
    rows.push_back({item.value("name", ""), count(item, "passed"), count(item, "failed"), count(item, "skipped"),
                    rate(item.value("flip_rate", json()))});
  }
  if (rows.size() > 1) out << format_columns(rows);
  const json flaky = report.value("flaky", json::array());
  if (flaky.empty()) {
    out << "no flaky test cases\n";
  } else {
    out << "flaky:";
    for (const auto& name : flaky) out << " " << one_line(name.is_string() ? name.get<std::string>() : name.dump());
    out << "\n";
  }
  return out.str();
}

int cmd_replay(const std::string& socket, const ReplayOptions& options) {
  const json body = build_replay_body(options);
  const http::HttpClient client(socket);
  ensure_daemon(client);
  if (options.repeat) return print_repeats(client, options);
  InterruptWatcher watcher("replay", [&client](const std::string& id) {
    std::cerr << "capsule: cancelling run " << id << " (interrupt again to stop waiting)\n";
    const http::HttpResponse response = client.request("POST", run_path(id) + "/cancel");
    if (response.status != 409) http::throw_if_error(response);
  });
  RunEventRelay relay(options.json, [&watcher](const std::string& id) { watcher.set_id(id); });
  const http::HttpResponse response =
      client.stream_lines("POST", run_path(options.id) + "/replay", body, {{"Accept", "application/x-ndjson"}},
                          [&relay](std::string_view line) { relay.on_line(line); }, watcher.watch());
  http::throw_if_error(response);
  return report_finished(relay, options.json);
}

}  // namespace capsule::client
