// capsuled and the disk: per-run disk and inode limits (limits.disk, limits.inodes), a state filesystem that
// fills up (the run fails, the daemon answers, kill -9 and restart work, uploads and snapshots are 507), what box
// disks may be promised, private state, the free-space watermark.
#include <fcntl.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>

#include "base/unique_fd.h"

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

  // Free bytes of the state filesystem (as unprivileged writers see them), its dirty pages pushed through first.
  std::uint64_t free_bytes() const {
    ::sync();
    struct statvfs fs {};
    EXPECT_EQ(::statvfs(state_.c_str(), &fs), 0) << std::strerror(errno);
    return static_cast<std::uint64_t>(fs.f_bavail) * fs.f_frsize;
  }
  // Another writer on the host: a file allocated on the state filesystem until `leave` bytes are free.
  void fill_state_fs(std::uint64_t leave = 0) const {
    const base::UniqueFd file(::open((state_ / "host-filler").c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0600));
    ASSERT_TRUE(file) << std::strerror(errno);
    for (const std::uint64_t step : {std::uint64_t{1} << 20, std::uint64_t{4096}}) {
      for (std::uint64_t free = free_bytes(); free > leave + step; free = free_bytes()) {
        const std::uint64_t size = static_cast<std::uint64_t>(::lseek(file.get(), 0, SEEK_END));
        if (::fallocate(file.get(), 0, static_cast<off_t>(size), static_cast<off_t>(free - leave - step)) != 0 &&
            ::fallocate(file.get(), 0, static_cast<off_t>(size), static_cast<off_t>(step)) != 0) {
          break;  // ENOSPC: what is left is the filesystem's own
        }
      }
    }
  }
  // A sandbox's dd filling its kFillerDisk disk has reached the state filesystem.
  void wait_until_the_box_filled_its_disk(std::uint64_t free_before) const {
    ASSERT_TRUE(eventually([&] { return free_bytes() + (150u << 20) < free_before; }, 120s))
        << host("df " + state_.string()).output;
  }

  std::string small_config_;
  std::string small_fs_;
  std::string user_;
};

// A sandbox disk that fits on the test's state filesystem with room to spare, and fills most of it.
const char* const kFillerDisk = "160m";

// Disk limits for the test's small state filesystem: a box's promise is its whole image, whose inode tables take
// 256 bytes per inode (the default 2^20 inodes alone would be 256 MiB).
json small_disk(const std::string& size) { return {{"disk", size}, {"inodes", 4096}}; }

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
  // The sandbox fills its disk (what its disk was promised: the state filesystem cannot be promised more), and
  // another writer on the host the rest. Silent, as in NewRunsBelowTheWatermarkAre507: output the full filesystem
  // cannot take would end the run.
  const std::uint64_t before = free_bytes();
  json spec = sh("dd if=/dev/zero of=/var/fill bs=1M count=400 2>/dev/null; sync; sleep 600");
  spec["limits"] = small_disk(kFillerDisk);
  const std::string id = submit(spec);
  wait_until_the_box_filled_its_disk(before);
  fill_state_fs();
  EXPECT_EQ(health()["status"], "ok");
  EXPECT_EQ(get_run(id)["state"], "running");

  kill9();  // as if it had aborted on the full disk; its sandbox still holds the space
  restart();
  EXPECT_EQ(health()["status"], "ok");
  // Its processes are killed and its disk detached at start; the kernel gives the space back once the box's
  // mount namespace is gone and the disk's last writes are done, which may come after the first answer.
  EXPECT_TRUE(eventually([&] { return free_bytes() > (100u << 20); }, 120s))
      << "the leftover sandbox's disk was not released: " << host("df " + state_.string()).output;
  json after = sh("echo alive");
  after["limits"] = small_disk("32m");
  const json run = run_and_wait(after);
  EXPECT_EQ(run["state"], "succeeded") << run;
  EXPECT_EQ(get_run(id)["state"], "interrupted") << get_run(id);
}

// Output arriving when the state filesystem is full ends that run (its log cannot be written), with the cause;
// the daemon records it (the sandbox's disk is released first) and goes on.
TEST_F(CapsuledDisk, OutputOnAFullStateFilesystemEndsTheRunNotTheDaemon) {
  start_on_small_state_fs();
  const std::uint64_t before = free_bytes();
  // Silent until its disk is full, then output until a log write fails (once the host's writer filled the rest).
  json spec = sh("dd if=/dev/zero of=/var/fill bs=1M count=400 2>/dev/null; sync; "
                 "while :; do yes log-line | head -c 1000000; sleep 0.1; done");
  spec["limits"] = small_disk(kFillerDisk);
  const std::string id = submit(spec);
  wait_until_the_box_filled_its_disk(before);
  fill_state_fs();
  const json run = wait_finished(id);
  EXPECT_NE(run["state"], "succeeded") << run;
  EXPECT_NE(run["result"]["reason"].get<std::string>().find("No space left on device"), std::string::npos) << run;
  EXPECT_EQ(health()["status"], "ok");
  EXPECT_GT(free_bytes(), 100u << 20) << "the sandbox's disk was not released";
  json after = sh("echo alive");
  after["limits"] = small_disk("32m");
  EXPECT_EQ(run_and_wait(after)["state"], "succeeded");
}

// Below the free-space watermark a new run is refused with 507 before anything is written for it.
TEST_F(CapsuledDisk, NewRunsBelowTheWatermarkAre507) {
  start_on_small_state_fs();
  fill_state_fs();
  expect_error(call("POST", "/v1/runs", sh("echo never")), 507, "insufficient_storage", "min_free_bytes");
  EXPECT_EQ(health()["status"], "ok");
}

// Every box's disk is a sparse image: what the live ones were promised is held against the state filesystem's free
// space (less min_free_bytes), so the host never promises more than it can store. A session that does not fit now
// is 507; a run that never could is 507, one that fits once a box ends waits in the queue.
TEST_F(CapsuledDisk, BoxDisksArePromisedNoMoreThanTheStateFilesystemHas) {
  start_on_small_state_fs();  // 256 MiB, 16 MiB of it kept free
  expect_error(call("POST", "/v1/sessions", json::object()), 507, "insufficient_storage", "does not fit");  // 10g
  expect_error(call("POST", "/v1/sessions", json{{"limits", {{"disk", "1g"}}}}), 507, "insufficient_storage",
               "does not fit");
  json never = sh("echo never");
  never["limits"] = {{"disk", "1g"}};
  expect_error(call("POST", "/v1/runs", never), 507, "insufficient_storage", "does not fit");

  const HttpResponse first = call("POST", "/v1/sessions", json{{"limits", small_disk("96m")}});
  ASSERT_EQ(first.status, 201) << first.body;
  const std::string session = body_json(first)["id"];
  // 96 + 160 MiB are more than the filesystem has: the second is 507 while the first lives, and names it.
  expect_error(call("POST", "/v1/sessions", json{{"limits", small_disk(kFillerDisk)}}), 507, "insufficient_storage",
               "still promised");
  json later = sh("echo later");
  later["limits"] = small_disk(kFillerDisk);
  const std::string waiting = submit(later);
  EXPECT_EQ(get_run(waiting)["state"], "queued");
  EXPECT_EQ(health()["status"], "ok");
  ASSERT_EQ(call("DELETE", "/v1/sessions/" + session).status, 200);
  const json ran = wait_finished(waiting);  // the session's disk went: the run's fits now
  EXPECT_EQ(ran["state"], "succeeded") << ran;
  // The run's record is written before its box is torn down: its promise goes a moment later.
  HttpResponse second;
  EXPECT_TRUE(eventually([&] {
    second = call("POST", "/v1/sessions", json{{"limits", small_disk(kFillerDisk)}});
    return second.status != 507;
  }, 20s));
  EXPECT_EQ(second.status, 201) << second.body;
}

// A write into a box is on the host filesystem before PUT .../files answers: one the full state filesystem cannot
// store is 507 insufficient_storage and leaves nothing at the path, never a 200 for bytes that were not stored.
TEST_F(CapsuledDisk, AnUploadTheStateFilesystemCannotStoreIs507AndLeavesNothing) {
  start_on_small_state_fs();
  const HttpResponse made = call("POST", "/v1/sessions", json{{"limits", small_disk("128m")}});
  ASSERT_EQ(made.status, 201) << made.body;
  const std::string id = body_json(made)["id"];
  const fs::path upload = dir_ / "upload.bin";
  write_file(upload, std::string(80u << 20, 'u'));  // 80 MiB: the box's disk has room, the host will not
  fill_state_fs(24u << 20);                          // another writer leaves 24 MiB
  const HttpResponse put =
      call("PUT", "/v1/sessions/" + id + "/files?path=/root/upload.bin", json{{"source", upload.string()}});
  expect_error(put, 507, "insufficient_storage", "upload.bin");
  expect_error(call("GET", "/v1/sessions/" + id + "/files?path=/root/upload.bin"), 404, "not_found", "upload.bin");
  const HttpResponse listed = call("GET", "/v1/sessions/" + id + "/files?path=/root");
  EXPECT_EQ(listed.status, 200);
  EXPECT_EQ(listed.body.find("upload.bin"), std::string::npos) << "the upload is left in the box";
  EXPECT_EQ(listed.body.find(".capsule-"), std::string::npos) << "a part of the upload is left in the box";
  EXPECT_EQ(health()["status"], "ok");
  EXPECT_EQ(body_json(call("GET", "/v1/sessions/" + id))["state"], "ready");
}

// A checkpoint (the workspace's changes copied to the state filesystem) that the full filesystem cannot hold is 507
// insufficient_storage, not a 500, and is not kept.
TEST_F(CapsuledDisk, ACheckpointTheStateFilesystemCannotHoldIs507) {
  start_on_small_state_fs();
  const fs::path workspace = make_dir("ws");
  const HttpResponse made =
      call("POST", "/v1/sessions", json{{"workspace", {{"path", workspace.string()}}}, {"limits", small_disk("96m")}});
  ASSERT_EQ(made.status, 201) << made.body;
  const std::string id = body_json(made)["id"];
  const HttpResponse wrote = call("POST", "/v1/sessions/" + id + "/exec",
                                  json{{"script", "head -c 40000000 /dev/zero > /workspace/data && sync"}});
  ASSERT_EQ(wrote.status, 200) << wrote.body;
  ASSERT_EQ(body_json(wrote)["state"], "succeeded") << wrote.body;
  fill_state_fs(8u << 20);  // another writer leaves 8 MiB: less than the 40 MB to copy
  expect_error(call("POST", "/v1/sessions/" + id + "/checkpoint", json{{"name", "full"}}), 507,
               "insufficient_storage", "checkpoint");
  const json session = body_json(call("GET", "/v1/sessions/" + id));
  EXPECT_EQ(session["checkpoints"], json::array()) << session;
  EXPECT_EQ(health()["status"], "ok");
}

// A snapshot whose source the state filesystem cannot hold is 507 insufficient_storage (the documented code),
// whether the source tar itself (a directory) or its unpacked tree (a small compressed tar of zeros) fills it, and
// what it staged is removed.
TEST_F(CapsuledDisk, ASnapshotTheStateFilesystemCannotHoldIs507) {
  start_on_small_state_fs();
  const std::uint64_t before = free_bytes();
  const fs::path source = make_dir("big-source");
  const Command made = host("fallocate -l 300M " + (source / "zeros").string() + " && tar -czf " +
                            (dir_ / "bomb.tgz").string() + " -C " + source.string() + " zeros");
  ASSERT_EQ(made.status, 0) << made.output;
  expect_error(call("POST", "/v1/snapshots", json{{"dir", source.string()}}), 507, "insufficient_storage",
               "No space left on device");
  EXPECT_TRUE(eventually([&] { return free_bytes() + (8u << 20) > before; })) << "its staging was left";
  expect_error(call("POST", "/v1/snapshots", json{{"tar", (dir_ / "bomb.tgz").string()}}), 507,
               "insufficient_storage", "No space left on device");
  EXPECT_TRUE(eventually([&] { return free_bytes() + (8u << 20) > before; })) << "its staging was left";
  EXPECT_TRUE(body_json(call("GET", "/v1/snapshots"))["snapshots"].empty());
  EXPECT_EQ(health()["status"], "ok");
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
