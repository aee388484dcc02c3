// A sandbox's disk and inode limit (sandbox/quota.h): writes to the rootfs upper (/var) and to a
// copy-on-write workspace fail with ENOSPC past it, and nothing (mounts, loop devices, files) is left after.
#include <gtest/gtest.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <sstream>
#include <thread>

#include "sandbox/launcher.h"
#include "sandbox/quota.h"
#include "tests/support/test_support.h"

namespace capsule::sandbox {
namespace {

using capsule::testing::host_spec;
using capsule::testing::shared_launcher;

using capsule::testing::describe;

class SandboxDiskTest : public ::testing::Test {
 protected:
  void TearDown() override {
    const std::string scratch = shared_launcher().options().scratch_dir;
    shared_launcher().drain_teardown();  // run() leaves each box's teardown to the launcher's reaper
    EXPECT_TRUE(mount_points_below(scratch).empty()) << "a sandbox disk is still mounted";
    EXPECT_TRUE(mount_points_below(base_).empty()) << "a workspace bind is still mounted";
    // A loop device is released by the kernel just after its last user lets go: allow it a moment.
    bool released = false;
    for (int i = 0; i < 1500 && !released; ++i) {
      released = loop_devices_below(scratch).empty();
      if (!released) std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    EXPECT_TRUE(released) << "a loop device is still attached";
    std::error_code ignored;
    std::filesystem::remove_all(base_, ignored);
  }

  Result run_sh(const std::string& script, std::uint64_t disk, std::uint64_t inodes = 0) {
    SandboxSpec spec = host_spec({"/bin/sh", "-c", script});
    spec.limits.disk_bytes = disk;
    spec.limits.disk_inodes = inodes;
    return shared_launcher().run(spec);
  }

  const std::string base_ = "/tmp/capsule-test/disk-" + std::to_string(getpid());
};

TEST_F(SandboxDiskTest, WritesPastTheLimitInTheRootfsFailWithEnospc) {
  // 64 MiB of disk under no memory limit: /var is on the overlay's upper, so on the sandbox's disk.
  Result r = run_sh("dd if=/dev/zero of=/var/big bs=1M count=200 2>&1; echo rc=$?; "
                    "echo size=$(( $(stat -c %s /var/big) >> 20 ))", 64ull << 20);
  ASSERT_EQ(r.status, Status::kSucceeded) << describe(r);
  const std::string out = r.stdout_capture.head;
  EXPECT_NE(out.find("No space left on device"), std::string::npos) << out;
  EXPECT_NE(out.find("rc=1"), std::string::npos) << out;
  // About the limit was written, not less (the limit is usable) and not the 200 MiB asked for.
  const int size = std::stoi(out.substr(out.find("size=") + 5));
  EXPECT_GE(size, 56) << out;
  EXPECT_LE(size, 72) << out;
}

TEST_F(SandboxDiskTest, TheLimitIsSharedWithACopyOnWriteWorkspace) {
  std::filesystem::create_directories(base_ + "/workspace");
  std::ofstream(base_ + "/workspace/keep.txt") << "keep";
  SandboxSpec spec = host_spec({"/bin/sh", "-c",
                                "dd if=/dev/zero of=/var/a bs=1M count=40 2>&1 && echo first-ok; "
                                "dd if=/dev/zero of=/workspace/b bs=1M count=40 2>&1; echo rc=$?; "
                                "echo hello > /workspace/small.txt; cat /workspace/keep.txt"});
  spec.limits.disk_bytes = 64ull << 20;
  spec.overlays.push_back(OverlayMount{{base_ + "/workspace"}, base_ + "/upper", base_ + "/work", "/workspace"});
  {
    auto sandbox = shared_launcher().start(spec);
    sandbox->supervisor().run();
    Result r = sandbox->finish();
    ASSERT_EQ(r.status, Status::kSucceeded) << describe(r);
    const std::string out = r.stdout_capture.head;
    EXPECT_NE(out.find("first-ok"), std::string::npos) << out;
    EXPECT_NE(out.find("No space left on device"), std::string::npos) << out;
    EXPECT_NE(out.find("rc=1"), std::string::npos) << out;
    EXPECT_NE(out.find("keep"), std::string::npos) << out;
    // Until the sandbox is destroyed, the caller reads the workspace's changes where it asked for them.
    std::ifstream small(base_ + "/upper/small.txt");
    std::string text;
    std::getline(small, text);
    EXPECT_EQ(text, "hello");
    EXPECT_TRUE(std::filesystem::exists(base_ + "/upper/b"));
  }
  EXPECT_TRUE(std::filesystem::is_empty(base_ + "/upper"));  // the disk went with the sandbox
  EXPECT_FALSE(std::filesystem::exists(base_ + "/workspace/b"));
}

TEST_F(SandboxDiskTest, CreatingFilesPastTheInodeLimitFails) {
  Result r = run_sh("mkdir /var/many && cd /var/many && i=0; "
                    "while [ $i -lt 5000 ]; do touch f$i 2>/dev/null || break; i=$((i+1)); done; "
                    "echo created=$i; touch one-more 2>&1 || true", 64ull << 20, 1000);
  ASSERT_EQ(r.status, Status::kSucceeded) << describe(r);
  const std::string out = r.stdout_capture.head;
  ASSERT_NE(out.find("created="), std::string::npos) << describe(r);
  const int created = std::stoi(out.substr(out.find("created=") + 8));
  // ext4 rounds the inode count up to whole groups (a few more than asked); far below the 5000 tried.
  EXPECT_GE(created, 900) << out;
  EXPECT_LT(created, 1100) << out;
  EXPECT_NE(out.find("No space left on device"), std::string::npos) << describe(r);
}

TEST_F(SandboxDiskTest, LimitsBelowTheFloorAreSpecErrors) {
  Result r = run_sh("true", 1ull << 20);
  EXPECT_EQ(r.status, Status::kSetupFailed);
  EXPECT_NE(r.reason.find("limits.disk_bytes"), std::string::npos) << r.reason;
  r = run_sh("true", 0, 1000);
  EXPECT_EQ(r.status, Status::kSetupFailed);
  EXPECT_NE(r.reason.find("limits.disk_inodes"), std::string::npos) << r.reason;
  r = run_sh("true", ~0ull, 0);  // the image size would overflow
  EXPECT_EQ(r.status, Status::kSetupFailed);
  EXPECT_NE(r.reason.find("limits.disk_bytes"), std::string::npos) << r.reason;
  r = run_sh("true", 64ull << 20, 1ull << 40);
  EXPECT_EQ(r.status, Status::kSetupFailed);
  EXPECT_NE(r.reason.find("limits.disk_inodes"), std::string::npos) << r.reason;
}

TEST_F(SandboxDiskTest, LeftoverMountsAreDetached) {
  const std::string dir = base_ + "/left";
  std::filesystem::create_directories(dir);
  auto* disk = new SandboxDisk(dir, {kMinDiskBytes, 0}, 100000);  // as if capsuled died with it mounted
  ASSERT_EQ(mount_points_below(dir).size(), 1u);
  EXPECT_EQ(detach_mounts_below(base_), 1u);
  EXPECT_TRUE(mount_points_below(dir).empty());
  delete disk;  // its own unmount now finds nothing; the loop device went with the last mount
}

// Every distinct disk limit a caller asks for makes a template; the templates dir keeps the 32 made last, and a
// template removed while its descriptor is open still gives the whole template's data.
TEST_F(SandboxDiskTest, TemplatesAreBoundedAndARemovedOneStillReads) {
  const std::string dir = base_ + "/templates";
  std::filesystem::create_directories(base_);
  base::UniqueFd first = disk_template(dir, {kMinDiskBytes, kMinDiskInodes}, 100000);
  ASSERT_TRUE(first);
  struct stat made {};
  ASSERT_EQ(fstat(first.get(), &made), 0);
  const timespec an_hour_ago[2] = {{made.st_mtim.tv_sec - 3600, 0}, {made.st_mtim.tv_sec - 3600, 0}};
  ASSERT_EQ(futimens(first.get(), an_hour_ago), 0);  // the oldest whatever the clock's granularity
  for (std::uint64_t i = 1; i <= 40; ++i) {
    ASSERT_TRUE(disk_template(dir, {kMinDiskBytes, kMinDiskInodes + i}, 100000));
  }
  std::size_t left = 0;
  for (const auto& entry : std::filesystem::directory_iterator(dir)) left += entry.path().extension() == ".img" ? 1 : 0;
  EXPECT_EQ(left, 32u);
  struct stat still {};
  ASSERT_EQ(fstat(first.get(), &still), 0);
  EXPECT_EQ(still.st_nlink, 0u) << "the first template is one of the oldest";
  EXPECT_EQ(still.st_size, made.st_size);
  EXPECT_EQ(lseek(first.get(), 0, SEEK_DATA), 0) << "its data is still there";
}

}  // namespace
}  // namespace capsule::sandbox
