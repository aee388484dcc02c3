// capsuled and the disk: per-run disk and inode limits (limits.disk, limits.inodes), a state filesystem that
// fills up (the run fails, the daemon answers, kill -9 and restart work), private state, the free-space watermark.
#include <sys/mount.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdio>

#include "http/error_status.h"
#include "http/response.h"
#include "daemon/config.h"
#include "daemon/runs/disk_guard.h"
#include "tests/support/auth_users.h"
#include "tests/support/capsuled_fixture.h"

namespace capsule::testing {
namespace {

struct Command {
  int status = -1;
  std::string output;  // stdout and stderr
};

Command host(const std::string& command) {
  Command result;
  FILE* pipe = ::popen((command + " 2>&1").c_str(), "r");
  if (pipe == nullptr) return result;
  char buffer[4096];
  for (std::size_t n; (n = std::fread(buffer, 1, sizeof buffer, pipe)) > 0;) result.output.append(buffer, n);
  result.status = ::pclose(pipe);
  return result;
}

bool has(const json& run, const std::string& text) {
  return run["result"]["stdout"]["head"].get<std::string>().find(text) != std::string::npos;
}

class CapsuledDisk : public Capsuled {
 protected:
  void TearDown() override {
    if (daemon_ > 0) stop();
    if (!small_fs_.empty()) {
      EXPECT_EQ(::umount2(small_fs_.c_str(), 0), 0) << "the test's state filesystem is busy";
    }
    if (!user_.empty()) {
      remove_user(user_);
      remove_group(user_);
    }
    Capsuled::TearDown();
  }

  // A 256 MiB ext4 made by the test and mounted as the state dir.
  void mount_small_state_fs() {
    const fs::path image = dir_ / "state.img";
    fs::create_directories(state_);
    const Command made = host("truncate -s 256M " + image.string() + " && mkfs.ext4 -q -F -m 0 " + image.string() +
                              " && mount -o loop " + image.string() + " " + state_.string());
    ASSERT_EQ(made.status, 0) << made.output;
    small_fs_ = state_.string();
    // The default watermark (1 GiB free) is more than this filesystem has: one it can cross instead.
    small_config_ = (dir_ / "small-fs.json").string();
    write_file(small_config_, R"({"min_free_bytes": "16m", "min_free_inodes": 100})");
  }
  void start_on_small_state_fs() {
    mount_small_state_fs();
    start({"--config", small_config_});
  }

  std::string small_config_;
  std::string small_fs_;
  std::string user_;
};

// ---------------------------------------------------------------------------------------------------------

TEST_F(CapsuledDisk, DiskLimitStopsWritesToTheCowWorkspaceAndTheRootfs) {
  start();
  const fs::path workspace = make_dir("project");
  write_file(workspace / "keep.txt", "keep\n");
  json spec = sh("dd if=/dev/zero of=/workspace/big bs=1M count=100 2>&1; echo workspace-rc=$?; rm -f /workspace/big; "
                 "dd if=/dev/zero of=/var/big bs=1M count=100 2>&1; echo var-rc=$?");
  spec["workspace"] = {{"path", workspace.string()}};
  spec["limits"] = {{"disk", "32m"}, {"inodes", 5000}};
  const json run = run_and_wait(spec);
  ASSERT_EQ(run["state"], "succeeded") << run;
  EXPECT_TRUE(has(run, "No space left on device")) << run["result"]["stdout"];
  EXPECT_TRUE(has(run, "workspace-rc=1")) << run["result"]["stdout"];
  EXPECT_TRUE(has(run, "var-rc=1")) << run["result"]["stdout"];
  EXPECT_EQ(run["spec"]["limits"]["disk"], 32u << 20);
  EXPECT_EQ(run["spec"]["limits"]["inodes"], 5000);
  EXPECT_FALSE(fs::exists(workspace / "big"));
  EXPECT_EQ(health()["status"], "ok");
}

TEST_F(CapsuledDisk, DefaultLimitsBoundDiskInodesMemoryAndTmp) {
  start();
  const json run = run_and_wait(sh("df -k /tmp | tail -1"));
  ASSERT_EQ(run["state"], "succeeded") << run;
  const json& limits = run["spec"]["limits"];
  EXPECT_EQ(limits["disk"], 10ull << 30);
  EXPECT_EQ(limits["inodes"], 1u << 20);
  EXPECT_EQ(limits["memory"], 4ull << 30);
  EXPECT_EQ(limits["tmp_size"], 256u << 20);
}

TEST_F(CapsuledDisk, InodeLimitStopsCreatingFiles) {
  start();
  json spec = sh("mkdir /var/many && cd /var/many && i=0; "
                 "while [ $i -lt 4000 ]; do touch f$i 2>/dev/null || break; i=$((i+1)); done; echo created=$i");
  spec["limits"] = {{"disk", "64m"}, {"inodes", 1000}};
  const json run = run_and_wait(spec);
  ASSERT_EQ(run["state"], "succeeded") << run;
  const std::string out = run["result"]["stdout"]["head"];
  ASSERT_NE(out.find("created="), std::string::npos) << out;
  const int created = std::stoi(out.substr(out.find("created=") + 8));
  EXPECT_GE(created, 900) << out;
  EXPECT_LT(created, 1100) << out;
  EXPECT_EQ(health()["status"], "ok");
}

TEST_F(CapsuledDisk, AFullStateFilesystemLeavesCapsuledAnsweringAndItRestartsOnIt) {
  start_on_small_state_fs();
  // A disk limit above what the state filesystem has: the sandbox's disk image fills the filesystem itself.
  // Silent, as in NewRunsBelowTheWatermarkAre507: output the full filesystem cannot take would end the run.
  json spec = sh("dd if=/dev/zero of=/var/fill bs=1M count=400 2>/dev/null; sync; sleep 600");
  spec["limits"] = {{"disk", "1g"}};
  const std::string id = submit(spec);
  ASSERT_TRUE(eventually([&] {
    // sync pushes the filler's pages through both loop devices now instead of at writeback's pace.
    const Command df = host("sync; sync; df --output=avail -B1M " + state_.string() + " | tail -1");
    return df.status == 0 && std::stoi(df.output) < 2;
  }, 120s)) << host("df " + state_.string()).output;
  EXPECT_EQ(health()["status"], "ok");
  EXPECT_EQ(get_run(id)["state"], "running");

  kill9();  // as if it had aborted on the full disk; its sandbox still holds the space
  restart();
  EXPECT_EQ(health()["status"], "ok");
  // Its processes are killed and its disk detached at start; the kernel gives the space back once the box's
  // mount namespace is gone and the disk's last writes are done, which may come after the first answer.
  EXPECT_TRUE(eventually([&] {
    // sync pushes the filler's pages through both loop devices now instead of at writeback's pace.
    const Command df = host("sync; sync; df --output=avail -B1M " + state_.string() + " | tail -1");
    return df.status == 0 && std::stoi(df.output) > 100;
  }, 120s)) << "the leftover sandbox's disk was not released: " << host("df " + state_.string()).output;
  json after = sh("echo alive");
  after["limits"] = {{"disk", "32m"}};
  const json run = run_and_wait(after);
  EXPECT_EQ(run["state"], "succeeded") << run;
  EXPECT_EQ(get_run(id)["state"], "interrupted") << get_run(id);
}

// Output arriving when the state filesystem is full ends that run (its log cannot be written), with the cause;
// the daemon records it (the sandbox's disk is released first) and goes on.
TEST_F(CapsuledDisk, OutputOnAFullStateFilesystemEndsTheRunNotTheDaemon) {
  start_on_small_state_fs();
  json spec = sh("dd if=/dev/zero of=/var/fill bs=1M count=400 2>&1; sync; sleep 3; yes log-line | head -c 4000000; "
                 "sleep 600");
  spec["limits"] = {{"disk", "1g"}};
  const std::string id = submit(spec);
  const json run = wait_finished(id);
  EXPECT_NE(run["state"], "succeeded") << run;
  EXPECT_NE(run["result"]["reason"].get<std::string>().find("No space left on device"), std::string::npos) << run;
  EXPECT_EQ(health()["status"], "ok");
  const Command df = host("df --output=avail -B1M " + state_.string() + " | tail -1");
  EXPECT_GT(std::stoi(df.output), 100) << "the sandbox's disk was not released";
  json after = sh("echo alive");
  after["limits"] = {{"disk", "32m"}};
  EXPECT_EQ(run_and_wait(after)["state"], "succeeded");
}

// Below the free-space watermark a new run is refused with 507 before anything is written for it.
TEST_F(CapsuledDisk, NewRunsBelowTheWatermarkAre507) {
  start_on_small_state_fs();
  // Silent: its output would go to a log file on the filesystem it fills, and a write failing there ends the run
  // as internal_error (CapsuledDisk.OutputOnAFullStateFilesystemEndsTheRunNotTheDaemon), freeing the space again.
  const std::string filler = submit(sh("dd if=/dev/zero of=/var/fill bs=1M count=400 2>/dev/null; sleep 600"));
  ASSERT_TRUE(eventually([&] {
    // sync pushes the filler's pages through both loop devices now instead of at writeback's pace.
    const Command df = host("sync; sync; df --output=avail -B1M " + state_.string() + " | tail -1");
    return df.status == 0 && std::stoi(df.output) < 2;
  }, 300s)) << "the 400 MB reach the state filesystem through two loop devices' writeback: 30-110 s in CI runs";
  expect_error(call("POST", "/v1/runs", sh("echo never")), 507, "insufficient_storage", "min_free_bytes");
  EXPECT_EQ(health()["status"], "ok");
  ASSERT_EQ(call("POST", "/v1/runs/" + filler + "/cancel").status, 202);
  wait_finished(filler);
}

TEST_F(CapsuledDisk, OtherHostUsersCannotListOrReadWhatSandboxesWrite) {
  user_ = account_name("capsule-t-probe");
  try {
    create_group(user_);
    create_user(user_, user_, {});
  } catch (const std::exception& e) {
    FAIL() << e.what();
  }
  start();
  const fs::path workspace = make_dir("project");
  json spec = sh("echo secret > /workspace/secret.txt && echo secret > /var/secret.txt && echo ready && sleep 600");
  spec["workspace"] = {{"path", workspace.string()}};
  const std::string id = submit(spec);
  wait_running(id);
  const fs::path written = state_ / "runs" / id / "upper" / "secret.txt";
  ASSERT_TRUE(eventually([&] { return fs::exists(written); })) << written;

  const std::string as_user = "setpriv --reuid " + user_ + " --regid " + user_ + " --clear-groups ";
  for (const std::string& command : {"ls " + (state_ / "runs").string(), "ls " + (state_ / "scratch").string(),
                                     "cat " + written.string(), "ls " + (state_ / "logs").string(),
                                     "cat " + (state_ / "ledger.db").string()}) {
    const Command attempt = host(as_user + command);
    EXPECT_NE(attempt.status, 0) << command << ": " << attempt.output;
    EXPECT_NE(attempt.output.find("Permission denied"), std::string::npos) << command << ": " << attempt.output;
  }
  const Command control = host(as_user + "ls -d " + state_.string());  // the state dir itself is searchable
  EXPECT_EQ(control.status, 0) << control.output;
  ASSERT_EQ(call("POST", "/v1/runs/" + id + "/cancel").status, 202);
  wait_finished(id);
}

// ---------------------------------------------------------------------------------------------------------
// The watermark, on a tmpfs of the test's: free bytes and free inodes each count.

TEST(DiskGuard, RefusesBelowTheWatermarkOfBytesOrInodes) {
  char pattern[] = "/tmp/disk-guard-XXXXXX";
  ASSERT_NE(::mkdtemp(pattern), nullptr);
  const std::string dir = pattern;
  ASSERT_EQ(::mount("tmpfs", dir.c_str(), "tmpfs", 0, "size=4m,nr_inodes=64"), 0) << std::strerror(errno);
  const daemon::StorageWatermark watermark{1u << 20, 16};
  EXPECT_FALSE(daemon::storage_shortage(dir, watermark).has_value());

  write_file(dir + "/fill", std::string(3584u << 10, 'x'));  // 3.5 of 4 MiB
  auto shortage = daemon::storage_shortage(dir, watermark);
  ASSERT_TRUE(shortage.has_value());
  EXPECT_NE(shortage->find("min_free_bytes"), std::string::npos) << *shortage;
  try {
    daemon::require_storage(dir, watermark);
    ADD_FAILURE() << "require_storage accepted a full filesystem";
  } catch (const http::ApiError& e) {
    EXPECT_EQ(http::status_for(e.code()), 507u);
    EXPECT_EQ(e.code(), "insufficient_storage");
  }

  fs::remove(dir + "/fill");
  for (int i = 0; i < 60; ++i) write_file(dir + "/f" + std::to_string(i), "");
  shortage = daemon::storage_shortage(dir, watermark);
  ASSERT_TRUE(shortage.has_value());
  EXPECT_NE(shortage->find("min_free_inodes"), std::string::npos) << *shortage;

  EXPECT_TRUE(daemon::storage_shortage(dir + "/missing", watermark).has_value());
  EXPECT_EQ(::umount2(dir.c_str(), 0), 0);
  ::rmdir(dir.c_str());
}

TEST(DiskGuard, WatermarkAndDiskLimitsComeFromTheConfigFile) {
  char pattern[] = "/tmp/disk-config-XXXXXX";
  ASSERT_NE(::mkdtemp(pattern), nullptr);
  const std::string file = std::string(pattern) + "/capsuled.json";
  write_file(file, R"({"min_free_bytes": "2g", "min_free_inodes": 5000,
                       "default_limits": {"disk": "1g", "inodes": 1000}, "max_limits": {"disk": "8g"}})");
  daemon::DaemonConfig config;
  daemon::load_config_file(file, config);
  EXPECT_EQ(config.storage.min_free_bytes, 2ull << 30);
  EXPECT_EQ(config.storage.min_free_inodes, 5000u);
  EXPECT_EQ(config.limits.defaults.disk_bytes, 1ull << 30);
  EXPECT_EQ(config.limits.defaults.disk_inodes, 1000u);
  EXPECT_EQ(config.limits.maxima.disk_bytes, 8ull << 30);
  EXPECT_EQ(config.limits.maxima.disk_inodes, 16u << 20);  // untouched: the built-in ceiling

  write_file(file, R"({"min_free_bytes": "lots"})");
  try {
    daemon::load_config_file(file, config);
    ADD_FAILURE() << "a bad min_free_bytes was accepted";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("min_free_bytes"), std::string::npos) << e.what();
  }
  write_file(file, R"({"default_limits": {"disk": "1m"}})");
  try {
    daemon::load_config_file(file, config);
    ADD_FAILURE() << "a disk limit below 16 MiB was accepted";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("disk"), std::string::npos) << e.what();
  }
  fs::remove_all(pattern);
}

}  // namespace
}  // namespace capsule::testing
