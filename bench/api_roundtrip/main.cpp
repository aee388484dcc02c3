// api_roundtrip: a real capsuled on a temporary state dir; POST /v1/runs?wait=true round trips for `true` vs. bwrap,
// throughput with concurrent clients vs. bwrap, and the daemon's RSS over many runs. Prints a table and one JSON line.
#include <stdlib.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <map>
#include <mutex>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "api_roundtrip/daemon.h"
#include "api_roundtrip/load.h"
#include "api_roundtrip/proc_readings.h"
#include "http/unix_client.h"
#include "support/cpu_time.h"
#include "support/fail.h"
#include "support/spawn.h"
#include "support/stats.h"

namespace fs = std::filesystem;
using namespace capsule::bench;
using namespace capsule::bench::api_roundtrip;
using nlohmann::json;

namespace {

constexpr double kTargetLatencyRatio = 0.6;  // API p50 at most this fraction of bwrap's p50
constexpr double kTargetThroughput = 300;    // sandboxes per second
constexpr int kRssWarmupRuns = 1000;

struct Options {
  int rounds = 200;
  int warmup = 10;
  int throughput_runs = 2000;
  int runs_for_rss = 10000;
  int clients = 16;
  std::string capsuled;  // empty: capsuled next to this binary
  std::string bwrap;     // empty: bwrap on PATH
  std::string tmp_parent = "/tmp";  // where the daemon's socket and state dir go (its file system matters)
  bool keep_tmp = false;
  int pool_boxes = -1;  // -1: capsuled's default; 0: no pool (cold figures)
};

// The round-trip tables report nearest-rank percentiles; p50 is the median among them.
double p50(const std::vector<double>& values) { return percentile(values, 50); }

json rss_json(const std::map<std::string, long>& s, long runs) {
  return {{"runs", runs}, {"vm_rss_kb", s.at("VmRSS")}, {"rss_anon_kb", s.count("RssAnon") ? s.at("RssAnon") : 0},
          {"rss_file_kb", s.count("RssFile") ? s.at("RssFile") : 0}, {"threads", s.count("Threads") ? s.at("Threads") : 0}};
}

}  // namespace

int main(int argc, char** argv) {
  set_program_name("api_roundtrip");
  Options o;
  CLI::App app{"api_roundtrip: capsuled API round trip, throughput and RSS, side by side with bwrap"};
  app.add_option("--rounds", o.rounds, "measured round trips per method (interleaved)")->capture_default_str()->check(CLI::PositiveNumber);
  app.add_option("--warmup", o.warmup, "unmeasured round trips per method first")->capture_default_str()->check(CLI::NonNegativeNumber);
  app.add_option("--throughput-runs", o.throughput_runs, "runs per method in the throughput phase")->capture_default_str()->check(CLI::PositiveNumber);
  app.add_option("--runs-for-rss", o.runs_for_rss, "daemon runs in total before the last RSS reading")->capture_default_str()->check(CLI::PositiveNumber);
  app.add_option("--clients", o.clients, "client threads in the throughput and RSS phases")->capture_default_str()->check(CLI::PositiveNumber);
  app.add_option("--capsuled", o.capsuled, "capsuled binary (default: next to this one)");
  app.add_option("--bwrap", o.bwrap, "bwrap binary (default: on PATH)");
  app.add_option("--tmp-parent", o.tmp_parent, "directory for the temporary socket + state dir")->capture_default_str();
  app.add_flag("--keep-tmp", o.keep_tmp, "keep the temporary state dir (and the daemon log)");
  app.add_option("--pool-boxes", o.pool_boxes, "capsuled --pool-boxes (0: cold, no boxes made ahead; default: its own)")
      ->check(CLI::Range(0, 64));
  CLI11_PARSE(app, argc, argv);

  if (o.capsuled.empty()) {
    std::error_code ec;
    o.capsuled = (fs::read_symlink("/proc/self/exe", ec).parent_path() / "capsuled").string();
  }
  if (access(o.capsuled.c_str(), X_OK) != 0) die("no capsuled at " + o.capsuled + " (build the capsuled target)");
  if (o.bwrap.empty()) o.bwrap = find_program("bwrap");

  std::string tmp = o.tmp_parent + "/capsule-api-XXXXXX";
  if (mkdtemp(tmp.data()) == nullptr) die("mkdtemp in " + o.tmp_parent + ": " + std::strerror(errno));
  chmod(tmp.c_str(), 0711);  // sandboxes run as unprivileged ids and walk into <tmp>/state/scratch

  std::vector<std::string> daemon_args;
  if (o.pool_boxes >= 0) daemon_args = {"--pool-boxes", std::to_string(o.pool_boxes)};
  Daemon daemon(o.capsuled, tmp, daemon_args);
  set_cleanup([&] {
    std::fprintf(stderr, "api_roundtrip: capsuled %s\n", daemon.stop().c_str());
    std::error_code ec;
    if (!o.keep_tmp) fs::remove_all(tmp, ec);
  });
  const double startup_ms = daemon.wait_healthy();
  const capsule::http::HttpClient client(daemon.socket());
  long runs_done = 0;

  const Spawner bwrap({o.bwrap, "--unshare-all", "--die-with-parent", "--ro-bind", "/usr", "/usr", "--symlink",
                       "usr/bin", "/bin", "--symlink", "usr/lib", "/lib", "--symlink", "usr/lib64", "/lib64", "--proc",
                       "/proc", "--dev", "/dev", "--", "/usr/bin/true"},
                      current_environment());
  std::printf("api_roundtrip: capsuled pid %d, answering /v1/health %.0f ms after start\n", daemon.pid(), startup_ms);
  const std::string state_mount = mount_of(tmp);
  std::printf("daemon: %s\n", daemon.describe().c_str());
  std::printf("state dir file system: %s\n", state_mount.c_str());
  std::printf("client: http/unix_client.h http::HttpClient, one connection per request (it sends Connection: close)\n");
  std::printf("capsule: POST /v1/runs?wait=true {\"argv\":[\"true\"]} (host image, default policy and limits)\n");
  std::printf("bwrap:   %s (posix_spawn + waitpid)\n", bwrap.describe().c_str());
  const std::string load_before = load_average();
  std::printf("load average before: %s\n\n", load_before.c_str());
  std::fflush(stdout);

  // 1. RSS when idle after start, then after a warm-up of kRssWarmupRuns runs.
  std::vector<json> rss_series;
  auto sample_rss = [&] {
    rss_series.push_back(rss_json(proc_status(daemon.pid()), runs_done));
    return rss_series.back();
  };
  const json rss_idle = sample_rss();
  const int warmup_runs = std::min(kRssWarmupRuns, o.runs_for_rss);
  capsule_batch(client, o.clients, warmup_runs);
  runs_done += warmup_runs;
  const json rss_warm = sample_rss();
  std::printf("[rss] idle %ld kB, after %ld runs %ld kB\n", rss_idle["vm_rss_kb"].get<long>(), runs_done,
              rss_warm["vm_rss_kb"].get<long>());
  std::fflush(stdout);

  // 2. Round trips, one at a time, capsule and bwrap alternating (order swapped every round).
  std::vector<double> capsule_ms, bwrap_ms, record_wall_ms, outside_ms, queue_ms;
  int pooled_runs = 0;  // measured runs whose box was made ahead (record.result.pooled)
  std::map<std::string, std::vector<double>> setup;
  for (int round = 0; round < o.warmup + o.rounds; ++round) {
    const bool measured = round >= o.warmup;
    for (int k = 0; k < 2; ++k) {
      if ((k + round) % 2 == 0) {
        const auto t0 = Clock::now();
        json row;
        try {
          row = capsule_true(client);
        } catch (const std::exception& e) {
          die(e.what());
        }
        const double ms = ms_since(t0);
        ++runs_done;
        if (!measured) continue;
        capsule_ms.push_back(ms);
        const json& record = row["result"];
        record_wall_ms.push_back(record.value("wall_ms", 0.0));
        outside_ms.push_back(ms - record.value("wall_ms", 0.0));
        queue_ms.push_back(static_cast<double>(row["times"].value("started", 0L) - row["times"].value("created", 0L)));
        for (const auto& [step, value] : record["setup_ms"].items()) setup[step].push_back(value.get<double>());
        pooled_runs += record.value("pooled", false) ? 1 : 0;
      } else {
        const auto t0 = Clock::now();
        try {
          bwrap.run();
        } catch (const std::exception& e) {
          die(e.what());
        }
        if (measured) bwrap_ms.push_back(ms_since(t0));
      }
    }
  }
  const double ratio = p50(capsule_ms) / p50(bwrap_ms);
  std::printf("[round trip] %d measured + %d warm-up per method\n", o.rounds, o.warmup);
  std::printf("  %-8s %9s %9s %9s %9s\n", "method", "p50 ms", "p90 ms", "p99 ms", "min ms");
  for (const auto& [name, values] : {std::pair{"capsule", &capsule_ms}, std::pair{"bwrap", &bwrap_ms}}) {
    std::printf("  %-8s %9.2f %9.2f %9.2f %9.2f\n", name, p50(*values), percentile(*values, 90),
                percentile(*values, 99), *std::min_element(values->begin(), values->end()));
  }
  std::printf("  capsule/bwrap p50 = %.2f (target <= %.1f: %s), p99 ratio = %.2f\n", ratio, kTargetLatencyRatio,
              ratio <= kTargetLatencyRatio ? "MET" : "NOT MET", percentile(capsule_ms, 99) / percentile(bwrap_ms, 99));
  std::printf("  capsule medians (ms): result.wall_ms %.2f, client wall - result.wall_ms %.2f, queued->started %.0f\n",
              p50(record_wall_ms), p50(outside_ms), p50(queue_ms));
  std::printf("  capsule runs that took a box made ahead (pool): %d of %zu\n", pooled_runs, capsule_ms.size());
  std::printf("  result.setup_ms medians:");
  for (const char* step : {"prepare", "clone", "maps", "mounts", "seccomp", "exec", "total"}) {
    std::printf(" %s %.2f", step, p50(setup[step]));
  }
  std::printf("\n");
  std::fflush(stdout);

  // 3. Throughput: o.clients threads, o.throughput_runs runs of each method.
  const long ticks_per_s = sysconf(_SC_CLK_TCK);
  const auto threads_before = thread_cpu_ticks(daemon.pid());
  const auto cpu_before = machine_cpu();
  const double daemon_cpu_before = process_tree_cpu_ms(daemon.pid());
  const double client_cpu_before = rusage_ms(RUSAGE_SELF);
  std::vector<double> tp_queue_ms, tp_daemon_ms;
  std::mutex tp_mutex;
  const Load capsule_load = run_load(o.clients, o.throughput_runs, [&](int) {
    const json row = capsule_true(client);
    std::lock_guard lock(tp_mutex);
    tp_queue_ms.push_back(static_cast<double>(row["times"].value("started", 0L) - row["times"].value("created", 0L)));
    tp_daemon_ms.push_back(static_cast<double>(row["times"].value("finished", 0L) - row["times"].value("started", 0L)));
  });
  runs_done += o.throughput_runs;
  const auto cpu_after = machine_cpu();
  const double capsule_cpu_per_run = (process_tree_cpu_ms(daemon.pid()) - daemon_cpu_before) / o.throughput_runs;
  const double client_cpu_per_run = (rusage_ms(RUSAGE_SELF) - client_cpu_before) / o.throughput_runs;
  const auto threads_after = thread_cpu_ticks(daemon.pid());
  const double capsule_machine_busy =
      100.0 * static_cast<double>(cpu_after.first - cpu_before.first) / static_cast<double>(cpu_after.second - cpu_before.second);
  std::vector<std::pair<double, int>> thread_pct;  // % of one core, tid
  for (const auto& [tid, ticks] : threads_after) {
    const long before = threads_before.count(tid) ? threads_before.at(tid) : 0;
    thread_pct.emplace_back(100.0 * static_cast<double>(ticks - before) / static_cast<double>(ticks_per_s) / capsule_load.seconds, tid);
  }
  std::sort(thread_pct.rbegin(), thread_pct.rend());
  std::vector<std::string> top_thread_names;  // read now: the daemon is stopped before the JSON is written
  for (std::size_t i = 0; i < std::min<std::size_t>(3, thread_pct.size()); ++i) {
    top_thread_names.push_back(thread_name(daemon.pid(), thread_pct[i].second));
  }

  const auto cpu_before_b = machine_cpu();
  const double bwrap_cpu_before = rusage_ms(RUSAGE_CHILDREN);
  const Load bwrap_load = run_load(o.clients, o.throughput_runs, [&](int) { bwrap.run(); });
  const double bwrap_cpu_per_run = (rusage_ms(RUSAGE_CHILDREN) - bwrap_cpu_before) / o.throughput_runs;
  const auto cpu_after_b = machine_cpu();
  const double bwrap_machine_busy =
      100.0 * static_cast<double>(cpu_after_b.first - cpu_before_b.first) / static_cast<double>(cpu_after_b.second - cpu_before_b.second);
  const double capsule_rate = o.throughput_runs / capsule_load.seconds;
  const double bwrap_rate = o.throughput_runs / bwrap_load.seconds;
  std::printf("\n[throughput] %d clients, %d runs per method\n", o.clients, o.throughput_runs);
  std::printf("  %-8s %10s %9s %12s %12s %13s %10s\n", "method", "runs/s", "seconds", "p50 lat ms", "p99 lat ms",
              "CPU ms/run", "CPU busy");
  std::printf("  %-8s %10.1f %9.2f %12.1f %12.1f %13.2f %9.0f%%\n", "capsule", capsule_rate, capsule_load.seconds,
              p50(capsule_load.latency_ms), percentile(capsule_load.latency_ms, 99), capsule_cpu_per_run,
              capsule_machine_busy);
  std::printf("  %-8s %10.1f %9.2f %12.1f %12.1f %13.2f %9.0f%%\n", "bwrap", bwrap_rate, bwrap_load.seconds,
              p50(bwrap_load.latency_ms), percentile(bwrap_load.latency_ms, 99), bwrap_cpu_per_run, bwrap_machine_busy);
  std::printf("  CPU ms/run: capsule = capsuled + its sandboxes (utime+stime+cutime+cstime), bwrap = bwrap + its\n"
              "  children (RUSAGE_CHILDREN); kernel work in kworkers (e.g. network namespace cleanup) is in neither.\n"
              "  The API client threads used %.2f CPU ms per capsule run on top.\n", client_cpu_per_run);
  std::printf("  capsule/bwrap throughput = %.2f; target >= %.0f sandboxes/s: %s\n", capsule_rate / bwrap_rate,
              kTargetThroughput, capsule_rate >= kTargetThroughput ? "MET" : "NOT MET");
  std::printf("  capsule medians: queued->started %.0f ms, started->finished %.0f ms (ledger timestamps)\n",
              p50(tp_queue_ms), p50(tp_daemon_ms));
  std::printf("  busiest capsuled threads (%% of one core):");
  for (std::size_t i = 0; i < std::min<std::size_t>(3, thread_pct.size()); ++i) {
    std::printf(" %s (tid %d) %.0f%%", top_thread_names[i].c_str(), thread_pct[i].second, thread_pct[i].first);
  }
  std::printf("\n");
  std::fflush(stdout);

  // 4. More runs up to o.runs_for_rss, in batches of 1000 with an RSS reading after each (daemon idle).
  const auto rss_start = Clock::now();
  while (runs_done < o.runs_for_rss) {
    const int batch = static_cast<int>(std::min<long>(1000 - runs_done % 1000, o.runs_for_rss - runs_done));
    capsule_batch(client, o.clients, batch);
    runs_done += batch;
    if (runs_done % 1000 == 0 || runs_done == o.runs_for_rss) {
      const json s = sample_rss();
      std::printf("[rss] after %ld runs: VmRSS %ld kB\n", runs_done, s["vm_rss_kb"].get<long>());
      std::fflush(stdout);
    }
  }
  if (rss_series.back()["runs"].get<long>() != runs_done) sample_rss();
  const json rss_final = rss_series.back();
  const long warm_runs = rss_warm["runs"].get<long>();
  const double growth_per_1000 =
      runs_done > warm_runs ? static_cast<double>(rss_final["vm_rss_kb"].get<long>() - rss_warm["vm_rss_kb"].get<long>()) /
                                  (static_cast<double>(runs_done - warm_runs) / 1000.0)
                            : 0.0;
  const auto logs = dir_usage(tmp + "/state/logs");
  const long long ledger = ledger_bytes(tmp + "/state/ledger.db");
  std::printf("\n[rss] capsuled VmRSS: idle %ld kB, after %ld runs %ld kB, after %ld runs %ld kB; growth %.1f kB per 1000 "
              "runs after the warm-up (top-up phase %.0f s)\n",
              rss_idle["vm_rss_kb"].get<long>(), warm_runs, rss_warm["vm_rss_kb"].get<long>(), runs_done,
              rss_final["vm_rss_kb"].get<long>(), growth_per_1000, ms_since(rss_start) / 1000);
  std::printf("[disk] state dir after %ld runs: %ld log files of %.1f MiB; ledger (db, wal, shm) %.1f MiB\n", runs_done,
              logs.first, static_cast<double>(logs.second) / (1 << 20), static_cast<double>(ledger) / (1 << 20));
  const std::string load_after = load_average();
  std::printf("load average after: %s\n", load_after.c_str());
  std::fflush(stdout);

  // 5. Stop the daemon, remove the temp dir.
  set_cleanup(nullptr);
  const std::string stopped = daemon.stop();
  std::printf("capsuled stopped: %s\n", stopped.c_str());
  std::error_code ec;
  const auto remove_start = Clock::now();
  if (!o.keep_tmp) fs::remove_all(tmp, ec);
  std::printf("temp dir %s %s in %.1f s\n", tmp.c_str(), o.keep_tmp ? "kept" : "removed", ms_since(remove_start) / 1000);
  if (ec) std::printf("warning: cannot remove %s: %s\n", tmp.c_str(), ec.message().c_str());

  json setup_json;
  for (const auto& [step, values] : setup) setup_json[step] = p50(values);
  json threads_json = json::array();
  json top_threads = json::array();
  for (std::size_t i = 0; i < std::min<std::size_t>(3, thread_pct.size()); ++i) {
    threads_json.push_back(thread_pct[i].first);
    top_threads.push_back({{"name", top_thread_names[i]}, {"cpu_pct", thread_pct[i].first}});
  }
  const json out = {
      {"bench", "api_roundtrip"},
      {"rounds", o.rounds},
      {"clients", o.clients},
      {"load_average", {{"before", load_before}, {"after", load_after}}},
      {"state_dir_mount", state_mount},
      {"round_trip_ms",
       {{"capsule", {{"p50", p50(capsule_ms)}, {"p90", percentile(capsule_ms, 90)}, {"p99", percentile(capsule_ms, 99)}}},
        {"bwrap", {{"p50", p50(bwrap_ms)}, {"p90", percentile(bwrap_ms, 90)}, {"p99", percentile(bwrap_ms, 99)}}},
        {"ratio_p50", ratio},
        {"ratio_p99", percentile(capsule_ms, 99) / percentile(bwrap_ms, 99)},
        {"capsule_record_wall_p50", p50(record_wall_ms)},
        {"capsule_outside_launcher_p50", p50(outside_ms)},
        {"capsule_setup_p50", setup_json}}},
      {"throughput",
       {{"runs", o.throughput_runs},
        {"capsule_per_s", capsule_rate},
        {"bwrap_per_s", bwrap_rate},
        {"ratio", capsule_rate / bwrap_rate},
        {"capsule_latency_p50_ms", p50(capsule_load.latency_ms)},
        {"capsule_latency_p99_ms", percentile(capsule_load.latency_ms, 99)},
        {"bwrap_latency_p50_ms", p50(bwrap_load.latency_ms)},
        {"bwrap_latency_p99_ms", percentile(bwrap_load.latency_ms, 99)},
        {"capsule_cpu_ms_per_run", capsule_cpu_per_run},
        {"bwrap_cpu_ms_per_run", bwrap_cpu_per_run},
        {"client_cpu_ms_per_capsule_run", client_cpu_per_run},
        {"capsule_machine_cpu_busy_pct", capsule_machine_busy},
        {"bwrap_machine_cpu_busy_pct", bwrap_machine_busy},
        {"capsuled_top_thread_cpu_pct", threads_json},
        {"capsuled_top_threads", top_threads}}},
      {"rss_kb",
       {{"idle", rss_idle["vm_rss_kb"]},
        {"after_warmup", rss_warm["vm_rss_kb"]},
        {"warmup_runs", warm_runs},
        {"final", rss_final["vm_rss_kb"]},
        {"final_runs", runs_done},
        {"growth_per_1000_runs", growth_per_1000},
        {"series", rss_series}}},
      {"state_dir", {{"log_files", logs.first}, {"log_bytes", logs.second}, {"ledger_bytes", ledger}}},
      {"targets",
       {{"latency_ratio_met", ratio <= kTargetLatencyRatio}, {"throughput_met", capsule_rate >= kTargetThroughput}}}};
  std::printf("%s\n", out.dump().c_str());
  return 0;
}
