// Replay variations: what each one writes into the replay's spec, and the pytest plugin mounted for "order".
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <sstream>
#include <thread>

#include "daemon/runs/replay_vary.h"
#include "http/response.h"

namespace capsule::daemon {
namespace {

TEST(ReplayVary, CpusAreHalvedNeverBelowHalfACore) {
  spec::RunSpec spec;
  spec.limits.cpus = 4;
  EXPECT_EQ(apply_replay_vary(spec, {.cpus = true}, 0), std::vector<std::string>{"cpus"});
  EXPECT_DOUBLE_EQ(spec.limits.cpus, 2);
  spec.limits.cpus = 0.6;
  apply_replay_vary(spec, {.cpus = true}, 0);
  EXPECT_DOUBLE_EQ(spec.limits.cpus, 0.5);
  spec.limits.cpus = 0.2;
  apply_replay_vary(spec, {.cpus = true}, 0);
  EXPECT_DOUBLE_EQ(spec.limits.cpus, 0.2) << "a limit below half a core is kept";
  spec.limits.cpus = 0;
  apply_replay_vary(spec, {.cpus = true}, 0);
  EXPECT_DOUBLE_EQ(spec.limits.cpus, std::max(0.5, std::max(1u, std::thread::hardware_concurrency()) / 2.0));
}

TEST(ReplayVary, MemoryIsThreeQuartersButNotBelowThePeakPlusTenPercent) {
  spec::RunSpec spec;
  spec.limits.memory_bytes = 1000ull << 20;
  apply_replay_vary(spec, {.memory = true}, 100ull << 20);
  EXPECT_EQ(spec.limits.memory_bytes, 750ull << 20);
  spec.limits.memory_bytes = 1000ull << 20;
  apply_replay_vary(spec, {.memory = true}, 900ull << 20);
  EXPECT_EQ(spec.limits.memory_bytes, (900ull << 20) + (90ull << 20));
  spec.limits.memory_bytes = 1000ull << 20;
  apply_replay_vary(spec, {.memory = true}, 990ull << 20);
  EXPECT_EQ(spec.limits.memory_bytes, 1000ull << 20) << "never above the original's limit";
  spec.limits.memory_bytes = 0;
  EXPECT_TRUE(apply_replay_vary(spec, {.memory = true}, 0).empty()) << "no limit and no peak: nothing to tighten";
  EXPECT_EQ(apply_replay_vary(spec, {.memory = true}, 50ull << 20), std::vector<std::string>{"memory"});
  EXPECT_EQ(spec.limits.memory_bytes, 100ull << 20);
}

TEST(ReplayVary, OrderReversesSurefireAndPytestKeepingTheRunsOwnOptions) {
  spec::RunSpec spec;
  spec.env = {{"MAVEN_OPTS", "-Xmx1g"}, {"PYTHONPATH", "/workspace/src"}};
  EXPECT_FALSE(uses_test_order_plugin(spec));
  apply_replay_vary(spec, {.order = true}, 0);
  EXPECT_EQ(spec.env["MAVEN_OPTS"], "-Xmx1g -Dsurefire.runOrder=reversealphabetical");
  EXPECT_EQ(spec.env["PYTEST_ADDOPTS"], "-p capsule_reverse_order");
  EXPECT_EQ(spec.env["PYTHONPATH"], std::string(kTestOrderDir) + ":/workspace/src");
  EXPECT_TRUE(uses_test_order_plugin(spec));
}

TEST(ReplayVary, ThePluginIsWrittenOnceAndMountedReadOnly) {
  const auto dir = std::filesystem::temp_directory_path() / ("replay-vary-" + std::to_string(::getpid()));
  const sandbox::BindMount mount = test_order_plugin_mount(dir.string());
  EXPECT_EQ(mount.target, kTestOrderDir);
  EXPECT_TRUE(mount.read_only);
  std::ifstream file(std::filesystem::path(mount.source) / "capsule_reverse_order.py");
  std::stringstream text;
  text << file.rdbuf();
  EXPECT_NE(text.str().find("items.reverse()"), std::string::npos);
  EXPECT_EQ(test_order_plugin_mount(dir.string()), mount);
  std::filesystem::remove_all(dir);
}

TEST(ReplayVary, UnknownOrMistypedNamesAreRefused) {
  EXPECT_TRUE(parse_replay_vary({{"cpus", true}, {"order", false}}).cpus);
  EXPECT_FALSE(parse_replay_vary({{"cpus", true}, {"order", false}}).order);
  EXPECT_THROW(parse_replay_vary({{"disk", true}}), http::ApiError);
  EXPECT_THROW(parse_replay_vary({{"cpus", 1}}), http::ApiError);
  EXPECT_THROW(parse_replay_vary(nlohmann::json::array()), http::ApiError);
}

}  // namespace
}  // namespace capsule::daemon
