// session_api: the exec round trip of `true` in a warm session through capsuled's API (POST .../exec on a new
// connection, as the CLI does) next to a one-shot POST /v1/runs?wait=true and a host posix_spawn, same process.
#include <sys/stat.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <functional>
#include <string>
#include <thread>
#include <vector>

#include "api_roundtrip/daemon.h"
#include "http/unix_client.h"
#include "support/fail.h"
#include "support/spawn.h"
#include "support/stats.h"

using namespace capsule::bench;
using nlohmann::json;

namespace {

constexpr double kTargetExecP50Ms = 2.0;

json post(const capsule::http::HttpClient& client, const std::string& target, const json& body, int status) {
  const auto response = client.request("POST", target, body);
  if (static_cast<int>(response.status) != status) {
    die("POST " + target + ": " + std::to_string(response.status) + " " + response.body.substr(0, 2000));
  }
  return json::parse(response.body);
}

struct Method {
  std::string name;
  std::function<void()> once;
  std::vector<double> wall_ms;
};

void print(const std::vector<Method>& methods) {
  std::printf("%-16s %9s %9s %9s %9s\n", "method", "p50", "p90", "p99", "min");
  for (const Method& m : methods) {
    std::printf("%-16s %9.3f %9.3f %9.3f %9.3f\n", m.name.c_str(), median(m.wall_ms), percentile(m.wall_ms, 90),
                percentile(m.wall_ms, 99), *std::min_element(m.wall_ms.begin(), m.wall_ms.end()));
  }
}

}  // namespace

int main(int argc, char** argv) {
  set_program_name("session_api");
  int runs = 300;
  int sessions = 20;
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string arg = argv[i];
    if (arg == "--runs") runs = std::max(1, std::atoi(argv[i + 1]));
    else if (arg == "--sessions") sessions = std::max(1, std::atoi(argv[i + 1]));
    else die("usage: session_api [--runs N] [--sessions N]");
  }
  std::error_code ec;
  const std::string self = std::filesystem::read_symlink("/proc/self/exe", ec).parent_path().string();
  char dir_template[] = "/tmp/capsule-session-api-XXXXXX";
  if (mkdtemp(dir_template) == nullptr || chmod(dir_template, 0711) != 0) die("mkdtemp failed");
  api_roundtrip::Daemon daemon(self + "/capsuled", dir_template);
  daemon.wait_healthy();
  const capsule::http::HttpClient client(daemon.socket());

  const std::string id = post(client, "/v1/sessions", json::object(), 201)["id"];
  const std::string exec_target = "/v1/sessions/" + id + "/exec";
  const json true_exec = {{"argv", {"true"}}};
  Spawner host({find_program("true")}, current_environment());
  std::vector<Method> methods;
  methods.push_back({"session exec", [&] {
                       const json run = post(client, exec_target, true_exec, 200);
                       if (run.value("state", "") != "succeeded") die("exec did not succeed: " + run.dump());
                     }, {}});
  methods.push_back({"one-shot run", [&] { api_roundtrip::capsule_true(client); }, {}});
  methods.push_back({"host spawn", [&] { host.run(); }, {}});

  std::printf("session_api: %d round trips per method after 20 warm-up, round-robin; capsuled %s\n", runs,
              daemon.describe().c_str());
  std::printf("load average before: %s\n\n", load_average().c_str());
  for (int round = 0; round < 20 + runs; ++round) {
    for (std::size_t k = 0; k < methods.size(); ++k) {
      Method& method = methods[(static_cast<std::size_t>(round) + k) % methods.size()];
      const double ms = time_ms(method.once);
      if (round >= 20) method.wall_ms.push_back(ms);
    }
  }
  print(methods);
  const double exec_p50 = median(methods[0].wall_ms);
  std::printf("\nratios of p50: session exec / one-shot run = %.3f, session exec / host spawn = %.2f\n",
              exec_p50 / median(methods[1].wall_ms), exec_p50 / median(methods[2].wall_ms));
  std::printf("target: exec p50 <= %.1f ms via the API -> %s\n\n", kTargetExecP50Ms,
              exec_p50 <= kTargetExecP50Ms ? "MET" : "NOT MET");

  // An agent thinks between commands: each exec after 100 ms of quiet (untimed), next to a host spawn after the
  // same pause. A quiet box is where per-exec costs that hide in a tight loop show (a cgroup move after a quiet
  // spell waits for an RCU grace period: what the session's prepared exec takes off the round trip).
  std::vector<Method> idle;
  idle.push_back({"exec after idle", methods[0].once, {}});
  idle.push_back({"host after idle", methods[2].once, {}});
  const int idle_runs = std::min(runs, 60);
  for (int round = 0; round < 3 + idle_runs; ++round) {
    for (auto& method : idle) {
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
      const double ms = time_ms(method.once);
      if (round >= 3) method.wall_ms.push_back(ms);
    }
  }
  std::printf("each after 100 ms idle (%d each):\n", idle_runs);
  print(idle);
  std::printf("\nratio of p50: exec after idle / host spawn after idle = %.2f; exec after idle p50 <= %.1f ms -> %s\n\n",
              median(idle[0].wall_ms) / median(idle[1].wall_ms), kTargetExecP50Ms,
              median(idle[0].wall_ms) <= kTargetExecP50Ms ? "MET" : "NOT MET");

  // Session create (to ready) vs a one-shot run, interleaved; each session deleted after.
  std::vector<Method> starts;
  starts.push_back({"session create", [&] {
                      const std::string made = post(client, "/v1/sessions", json::object(), 201)["id"];
                      client.request("DELETE", "/v1/sessions/" + made);
                    }, {}});
  starts.push_back({"one-shot run", [&] { api_roundtrip::capsule_true(client); }, {}});
  for (int round = 0; round < 3 + sessions; ++round) {
    for (auto& method : starts) {
      const double ms = time_ms(method.once);
      if (round >= 3) method.wall_ms.push_back(ms);
    }
  }
  std::printf("session create + delete vs one-shot run (%d each):\n", sessions);
  print(starts);
  const double create_ratio = median(starts[0].wall_ms) / median(starts[1].wall_ms);
  std::printf("\nratio of p50: session create+delete / one-shot run = %.3f -> target (<= 1) %s\n", create_ratio,
              create_ratio <= 1.0 ? "MET" : "NOT MET");
  std::printf("load average after:  %s\n", load_average().c_str());
  client.request("DELETE", "/v1/sessions/" + id);
  std::printf("%s\n", daemon.stop().c_str());
  std::filesystem::remove_all(dir_template, ec);
  return 0;
}
