// Tests of the capsuled configuration file: keys, limit objects checked like a RunSpec's, clear errors.
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

#include "daemon/config.h"

namespace capsule::daemon {
namespace {

class ConfigFileTest : public ::testing::Test {
 protected:
  void TearDown() override { std::filesystem::remove(path_); }
  DaemonConfig load(const std::string& text) {
    std::ofstream(path_) << text;
    DaemonConfig config;
    load_config_file(path_, config);
    return config;
  }
  std::string error(const std::string& text) {
    try {
      load(text);
    } catch (const std::invalid_argument& e) {
      return e.what();
    }
    return "no error";
  }
  const std::string path_ = "/tmp/capsule-config-test-" + std::to_string(::getpid()) + ".json";
};

TEST_F(ConfigFileTest, KeysAndLimitObjects) {
  const DaemonConfig config = load(R"({"socket": "/run/x.sock", "state_dir": "/srv/capsule", "max_concurrent": 3,
      "default_limits": {"wall_time": "20m", "memory": "2g"}, "max_limits": {"wall_time": "1h"}})");
  EXPECT_EQ(config.socket_path, "/run/x.sock");
  EXPECT_EQ(config.state_dir, "/srv/capsule");
  EXPECT_EQ(config.max_concurrent, 3u);
  EXPECT_EQ(config.limits.defaults.wall_time, std::chrono::minutes(20));
  EXPECT_EQ(config.limits.defaults.memory_bytes, 2ull << 30);
  EXPECT_EQ(config.limits.defaults.pids, spec::default_limit_policy().defaults.pids);  // untouched fields keep defaults
  EXPECT_EQ(config.limits.maxima.wall_time, std::chrono::hours(1));
}

TEST_F(ConfigFileTest, ErrorsNameTheFileAndKey) {
  EXPECT_NE(error(R"({"sockett": "/x"})").find("unknown key 'sockett'"), std::string::npos);
  EXPECT_NE(error(R"({"max_concurrent": 0})").find("max_concurrent"), std::string::npos);
  EXPECT_NE(error(R"({"default_limits": {"memory": "1k"}})").find("default_limits.memory: must be at least 4 MiB"),
            std::string::npos);
  EXPECT_NE(error(R"({"max_limits": {"wall_time": 18446744073709551615}})").find("max_limits.wall_time"),
            std::string::npos);
  EXPECT_NE(error("{not json").find(path_), std::string::npos);
}

TEST_F(ConfigFileTest, PublishedPortIdleTimeout) {
  EXPECT_EQ(load("{}").published_port_idle_timeout_s, 600u);
  EXPECT_EQ(load(R"({"published_port_idle_timeout_s": 1})").published_port_idle_timeout_s, 1u);
  for (const char* bad : {R"({"published_port_idle_timeout_s": 0})", R"({"published_port_idle_timeout_s": 604801})",
                          R"({"published_port_idle_timeout_s": "10m"})"}) {
    EXPECT_NE(error(bad).find("published_port_idle_timeout_s"), std::string::npos) << bad;
  }
}

TEST_F(ConfigFileTest, CpuWeightIsAutoOrAProcessCount) {
  EXPECT_EQ(parent_cpu_weight(load(R"({"max_concurrent": 6})")), 6u) << "auto by default: one process per box";
  EXPECT_EQ(parent_cpu_weight(load(R"({"max_concurrent": 6, "cpu_weight": "auto"})")), 6u);
  EXPECT_EQ(parent_cpu_weight(load(R"({"max_concurrent": 6, "cpu_weight": 2})")), 2u);
  for (const char* bad : {R"({"cpu_weight": 0})", R"({"cpu_weight": 10001})", R"({"cpu_weight": "8"})",
                          R"({"cpu_weight": -1})", R"({"cpu_weight": 1.5})"}) {
    EXPECT_NE(error(bad).find("cpu_weight must be"), std::string::npos) << bad;
  }
}

TEST(CgroupParent, DefaultStateDirKeepsTheShortNameOthersGetAStableHash) {
  EXPECT_EQ(cgroup_parent_for(DaemonConfig{}.state_dir), "capsule");
  const std::string other = cgroup_parent_for("/tmp/a/state");
  EXPECT_EQ(other, cgroup_parent_for("/tmp/a/state"));
  EXPECT_NE(other, cgroup_parent_for("/tmp/b/state"));
  EXPECT_EQ(other.rfind("capsule-", 0), 0u);
  EXPECT_EQ(other.size(), std::string("capsule-").size() + 16);
}

}  // namespace
}  // namespace capsule::daemon

namespace capsule::daemon {
namespace {

class LogRetentionConfigTest : public ::testing::Test {
 protected:
  void TearDown() override { std::filesystem::remove(path_); }
  DaemonConfig load(const std::string& text) {
    std::ofstream(path_) << text;
    DaemonConfig config;
    load_config_file(path_, config);
    return config;
  }
  const std::string path_ = "/tmp/capsule-config-logs-" + std::to_string(::getpid()) + ".json";
};

TEST_F(LogRetentionConfigTest, OutputsKeysDefaultsAndBadValues) {
  const DaemonConfig defaults = load("{}");
  EXPECT_EQ(defaults.outputs.keep_days, 7u);
  EXPECT_EQ(defaults.outputs.max_total_bytes, 0u);
  EXPECT_EQ(defaults.outputs.max_layer_bytes, 4ull << 30);
  const DaemonConfig set =
      load(R"({"outputs_keep_days": 0, "outputs_max_total_bytes": "20g", "outputs_max_layer_bytes": 1048576})");
  EXPECT_EQ(set.outputs.keep_days, 0u);
  EXPECT_EQ(set.outputs.max_total_bytes, 20ull << 30);
  EXPECT_EQ(set.outputs.max_layer_bytes, 1u << 20);
  EXPECT_THROW(load(R"({"outputs_keep_days": "7d"})"), std::invalid_argument);
  EXPECT_THROW(load(R"({"outputs_max_total_bytes": "lots"})"), std::invalid_argument);
  EXPECT_EQ(defaults.snapshots.keep_days, 30u);
  EXPECT_EQ(defaults.snapshots.max_total_bytes, 0u);
  const DaemonConfig snapshots = load(R"({"snapshots_keep_days": 0, "snapshots_max_total_bytes": "100g"})");
  EXPECT_EQ(snapshots.snapshots.keep_days, 0u);
  EXPECT_EQ(snapshots.snapshots.max_total_bytes, 100ull << 30);
}

TEST_F(LogRetentionConfigTest, KeysDefaultsAndBadValues) {
  const DaemonConfig defaults = load("{}");
  EXPECT_EQ(defaults.log_cap_bytes, 64ull << 20);
  EXPECT_EQ(defaults.retention_max_age_days, 0u);
  EXPECT_EQ(defaults.retention_max_total_bytes, 0u);
  EXPECT_EQ(defaults.retention_interval_s, 3600u);
  const DaemonConfig set = load(R"({"log_cap_bytes": 1048576, "retention_max_age_days": 30,
      "retention_max_total_bytes": 10737418240, "retention_interval_s": 60})");
  EXPECT_EQ(set.log_cap_bytes, 1u << 20);
  EXPECT_EQ(set.retention_max_age_days, 30u);
  EXPECT_EQ(set.retention_max_total_bytes, 10ull << 30);
  EXPECT_EQ(set.retention_interval_s, 60u);
  EXPECT_EQ(load(R"({"log_cap_bytes": 0})").log_cap_bytes, 0u) << "no cap";
  for (const std::string bad : {R"({"log_cap_bytes": 100})", R"({"log_cap_bytes": -1})",
                                R"({"retention_max_age_days": "30d"})", R"({"retention_interval_s": 0})",
                                R"({"retention_max_total_bytes": 1.5})"}) {
    try {
      load(bad);
      ADD_FAILURE() << "accepted " << bad;
    } catch (const std::invalid_argument& e) {
      const std::string key = bad.substr(2, bad.find('"', 2) - 2);
      EXPECT_NE(std::string(e.what()).find(key), std::string::npos) << e.what();
    }
  }
}

}  // namespace
}  // namespace capsule::daemon
