// image_bench's start-up part (see startup_bench.h): the variants run in turn with the order rotated each
// round so machine noise hits all alike; it prints wall percentiles, ratios and the launcher's setup breakdown.
#include "image_bench/startup_bench.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <iterator>
#include <unistd.h>
#include <vector>

#include "image_bench/content.h"
#include "image_bench/layout_writer.h"
#include "image_bench/summary.h"
#include "image_bench/test_layers.h"
#include "images/host_image.h"
#include "images/image_store.h"
#include "support/fail.h"
#include "support/files.h"
#include "support/stats.h"

namespace capsule::bench::image_bench {

namespace fs = std::filesystem;
using nlohmann::json;

namespace {

void print_row(const char* name, const std::vector<double>& v) {
  std::printf("%-16s %9.3f %9.3f %9.3f %9.3f %9.3f\n", name, percentile(v, 50), percentile(v, 90), percentile(v, 99),
              mean(v), *std::min_element(v.begin(), v.end()));
}

}  // namespace

json startup_bench(const Options& options, const fs::path& tmp, const std::string& profile,
                   sandbox::Launcher& launcher) {
  Content content;
  const fs::path layout = tmp / "layout-5";
  std::vector<LayerBlob> blobs;
  const double build_ms = time_ms([&] {
    blobs = write_layout(layout, 5, [&](LayerFile& layer, int i) { fill_small_image(layer, i, content); });
  });
  std::uint64_t compressed = 0, uncompressed = 0;
  for (const auto& blob : blobs) {
    compressed += blob.descriptor.size;
    uncompressed += blob.tar_bytes;
  }

  images::ImageStore store(tmp / "store");
  const double import_ms = time_ms([&] { store.import_layout(layout, "bench/five:1"); });
  const images::ImageInfo info = store.inspect("bench/five:1");
  const images::HostImage host = images::prepare_host_image((tmp / "host-image").string());

  sandbox::SandboxSpec layered;
  layered.argv = {"/bin/sh", "-c", "true"};
  layered.env = info.config.env;
  layered.rootfs_layers = info.layer_dirs;
  layered.seccomp_profile = profile;
  layered.limits.wall_time = std::chrono::seconds(30);
  layered.limits.memory_bytes = 256ull << 20;
  layered.limits.pids = 64;
  sandbox::SandboxSpec host_spec = layered;
  host_spec.env = host.env;
  host_spec.rootfs_layers = host.layers;
  host_spec.mounts = host.mounts;

  sandbox::Result last;
  auto run = [&](const sandbox::SandboxSpec& spec, const char* what) {
    last = launcher.run(spec);
    if (last.status != sandbox::Status::kSucceeded || last.exit_code != 0) {
      die(std::string(what) + " run failed: " + sandbox::status_name(last.status) + ": " + last.reason + " " +
          last.stderr_capture.head);
    }
  };
  // Once, untimed: the layers stack as intended (whiteout, opaque dir, topmost version wins).
  sandbox::SandboxSpec check = layered;
  check.argv = {"/bin/sh", "-c",
                "test ! -e /opt/app/old.txt && test ! -e /opt/app/data/a.json && test -e /opt/app/data/d.json && "
                "read v < /opt/app/version && test \"$v\" = 3"};
  run(check, "5-layer stacking check");

  std::printf("5-layer image: %zu layers, %.1f KB compressed, %.1f KB uncompressed, built in %.0f ms; "
              "import_layout %.1f ms\n", blobs.size(), static_cast<double>(compressed) / 1e3,
              static_cast<double>(uncompressed) / 1e3, build_ms, import_ms);

  // Import into a fresh store, then its first and second sandbox; the page cache is not dropped.
  std::vector<double> cold_import, cold_first, cold_second;
  for (int k = 0; k < options.cold_rounds; ++k) {
    const fs::path root = tmp / "cold-store";
    images::ImageStore fresh(root);
    sync();
    cold_import.push_back(time_ms([&] { fresh.import_layout(layout, "bench/five:1"); }));
    sandbox::SandboxSpec spec = layered;
    spec.rootfs_layers = fresh.inspect("bench/five:1").layer_dirs;
    cold_first.push_back(time_ms([&] { run(spec, "first 5-layer"); }));
    cold_second.push_back(time_ms([&] { run(spec, "second 5-layer"); }));
    remove_tree(root);
  }

  // The third variant isolates the layer count: the same sandbox on the base layer alone (it has /bin/sh).
  sandbox::SandboxSpec base_only = layered;
  base_only.rootfs_layers = {info.layer_dirs.back()};
  struct Variant {
    const char* name;
    const sandbox::SandboxSpec* spec;
    std::vector<double> wall, after_exec, teardown;  // measured; Result.wall_ms - setup; measured - Result.wall_ms
    std::vector<sandbox::SetupTimings> setups;
  };
  Variant variants[] = {{"5-layer (store)", &layered, {}, {}, {}, {}},
                        {"host (built-in)", &host_spec, {}, {}, {}, {}},
                        {"base layer only", &base_only, {}, {}, {}, {}}};
  const int count = static_cast<int>(std::size(variants));
  std::printf("start-up: /bin/sh -c true, %d rounds + %d warm-up, round-robin, order rotated per round\n",
              options.rounds, options.warmup);
  std::printf("load average before: %s\n", load_average().c_str());
  std::fflush(stdout);
  for (int round = 0; round < options.warmup + options.rounds; ++round) {
    for (int k = 0; k < count; ++k) {
      Variant& v = variants[(round + k) % count];
      const double ms = time_ms([&] { run(*v.spec, v.name); });
      if (round < options.warmup) continue;
      v.wall.push_back(ms);
      v.setups.push_back(last.setup);
      v.after_exec.push_back(last.wall_ms - last.setup.total_ms);
      v.teardown.push_back(ms - last.wall_ms);
    }
  }
  std::printf("load average after:  %s\n\n", load_average().c_str());

  std::printf("%-16s %9s %9s %9s %9s %9s   (wall ms per launch, spawn to reaped)\n", "image", "p50", "p90", "p99",
              "mean", "min");
  for (const Variant& v : variants) print_row(v.name, v.wall);
  const double ratio50 = percentile(variants[0].wall, 50) / percentile(variants[1].wall, 50);
  const double ratio99 = percentile(variants[0].wall, 99) / percentile(variants[1].wall, 99);
  const double layers50 = percentile(variants[0].wall, 50) / percentile(variants[2].wall, 50);
  std::printf("ratio 5-layer/host: p50 %.3f, p99 %.3f; 5-layer/base layer only: p50 %.3f\n", ratio50, ratio99,
              layers50);

  json variants_json;
  std::printf("\nbreakdown (p50 ms):  prepare   clone    maps  mounts seccomp    exec   setup  to-reaped  teardown\n");
  for (const Variant& v : variants) {
    auto step = [&](double sandbox::SetupTimings::*member) {
      std::vector<double> values;
      for (const auto& setup : v.setups) values.push_back(setup.*member);
      return percentile(values, 50);
    };
    using T = sandbox::SetupTimings;
    std::printf("  %-16s %8.3f %7.3f %7.3f %7.3f %7.3f %7.3f %7.3f %10.3f %9.3f\n", v.name, step(&T::prepare_ms),
                step(&T::clone_ms), step(&T::maps_ms), step(&T::mounts_ms), step(&T::seccomp_ms), step(&T::exec_ms),
                step(&T::total_ms), percentile(v.after_exec, 50), percentile(v.teardown, 50));
    variants_json[v.name] = {
        {"wall_ms", summary(v.wall)},
        {"p50_ms", {{"prepare", step(&T::prepare_ms)}, {"clone", step(&T::clone_ms)}, {"maps", step(&T::maps_ms)},
                    {"mounts", step(&T::mounts_ms)}, {"seccomp", step(&T::seccomp_ms)}, {"exec", step(&T::exec_ms)},
                    {"setup", step(&T::total_ms)}, {"exec_to_reaped", percentile(v.after_exec, 50)},
                    {"teardown", percentile(v.teardown, 50)}}}};
  }
  std::printf("\nfresh store, %d rounds (p50 ms): import_layout %.2f, first run %.2f, second run %.2f, "
              "import + first run %.2f\n\n", options.cold_rounds, percentile(cold_import, 50),
              percentile(cold_first, 50), percentile(cold_second, 50),
              percentile(cold_import, 50) + percentile(cold_first, 50));
  return {{"layers", blobs.size()}, {"compressed_bytes", compressed}, {"uncompressed_bytes", uncompressed},
          {"variants", variants_json}, {"ratio_p50", ratio50}, {"ratio_p99", ratio99},
          {"ratio_p50_vs_base_layer_only", layers50},
          {"fresh_store", {{"import_ms", summary(cold_import)}, {"first_run_ms", summary(cold_first)},
                           {"second_run_ms", summary(cold_second)}}}};
}

}  // namespace capsule::bench::image_bench
