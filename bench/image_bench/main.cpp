// image_bench: sandbox start-up on a 5-layer OCI image from the store vs. the built-in host image, and
// ImageStore::import_layout throughput vs. `tar -xzf` of the same layers. Prints a table and one JSON line.
#include <stdlib.h>
#include <sys/stat.h>

#include <CLI/CLI.hpp>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>

#include "image_bench/import_bench.h"
#include "image_bench/options.h"
#include "image_bench/startup_bench.h"
#include "sandbox/launcher.h"
#include "support/fail.h"
#include "support/files.h"

namespace fs = std::filesystem;
using namespace capsule::bench;
using namespace capsule::bench::image_bench;
using nlohmann::json;

namespace {
constexpr const char* kCgroupParent = "capsule-ibench";
}  // namespace

int main(int argc, char** argv) {
  set_program_name("image_bench");
  Options options;
  CLI::App app{"image_bench: sandbox start-up on a 5-layer store image vs. the host image, and image import "
               "throughput vs. tar -xzf"};
  app.add_option("--rounds", options.rounds, "measured start-up rounds (each runs every variant)")
      ->check(CLI::PositiveNumber);
  app.add_option("--warmup", options.warmup, "unmeasured start-up rounds first")->check(CLI::NonNegativeNumber);
  app.add_option("--cold-rounds", options.cold_rounds, "imports into a fresh store followed by a first run")
      ->check(CLI::PositiveNumber);
  app.add_option("--import-rounds", options.import_rounds, "throughput rounds per method")->check(CLI::PositiveNumber);
  app.add_option("--import-layers", options.import_layers, "layers in the throughput image")
      ->check(CLI::PositiveNumber);
  app.add_option("--layer-mb", options.layer_mb, "file data per throughput layer, MB")->check(CLI::PositiveNumber);
  app.add_option("--policy", options.policy, "seccomp profile")->check(CLI::ExistingFile);
  app.add_option("--tmp-parent", options.tmp_parent, "where the temp dir goes (its file system matters)")
      ->check(CLI::ExistingDirectory);
  app.add_flag("--keep-tmp", options.keep_tmp, "keep the temp dir");
  app.add_flag("--skip-startup", options.skip_startup, "only the import throughput part");
  app.add_flag("--skip-import", options.skip_import, "only the start-up part");
  CLI11_PARSE(app, argc, argv);

  std::string pattern = (fs::path(options.tmp_parent) / "capsule-ibench-XXXXXX").string();
  if (mkdtemp(pattern.data()) == nullptr) die("mkdtemp in " + options.tmp_parent + ": " + std::strerror(errno));
  const fs::path tmp = pattern;
  chmod(tmp.c_str(), 0755);  // the sandbox's root id must reach the scratch dir below it
  std::unique_ptr<capsule::sandbox::Launcher> launcher;
  set_cleanup([&] {
    if (launcher) {
      try {
        launcher->remove_cgroup_parent();
      } catch (const std::exception& e) {
        std::fprintf(stderr, "image_bench: removing cgroup parent: %s\n", e.what());
      }
    }
    if (!options.keep_tmp) remove_tree(tmp);
  });

  json result = {{"bench", "image_bench"}};
  try {
    std::printf("image_bench: temp dir %s, seccomp profile %s\n", tmp.c_str(), options.policy.c_str());
    if (!options.skip_startup) {
      const std::string profile = read_file(options.policy);
      capsule::sandbox::LauncherOptions launcher_options;
      launcher_options.scratch_dir = (tmp / "scratch").string();
      launcher_options.cgroup.parent = kCgroupParent;
      launcher = std::make_unique<capsule::sandbox::Launcher>(std::move(launcher_options));
      std::printf("launcher: cgroup v%d parent %s, memory 256 MiB, pids 64, wall 30 s\n\n", launcher->cgroup_version(),
                  kCgroupParent);
      result["startup"] = startup_bench(options, tmp, profile, *launcher);
    }
    if (!options.skip_import) result["import"] = import_bench(options, tmp);
  } catch (const std::exception& e) {
    die(std::string("failed: ") + e.what());
  }
  std::printf("%s\n", result.dump().c_str());
  run_cleanup();
  return 0;
}
