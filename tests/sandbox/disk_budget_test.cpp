// DiskBudget (sandbox/disk_budget.h) on a tmpfs of the test's: claims fit in the free space less the reserve, a
// claim's image counts what it already holds, a released claim frees its room, headroom keeps room for others.
#include <gtest/gtest.h>
#include <fcntl.h>
#include <sys/mount.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <string>

#include "sandbox/disk_budget.h"
#include "sandbox/error.h"

namespace capsule::sandbox {
namespace {

constexpr std::uint64_t kMebibyte = 1ull << 20;

class DiskBudgetTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char pattern[] = "/tmp/disk-budget-XXXXXX";
    ASSERT_NE(::mkdtemp(pattern), nullptr) << std::strerror(errno);
    dir_ = pattern;
    ASSERT_EQ(::mount("tmpfs", dir_.c_str(), "tmpfs", 0, "size=64m"), 0) << std::strerror(errno);
  }
  void TearDown() override {
    EXPECT_EQ(::umount2(dir_.c_str(), 0), 0) << std::strerror(errno);
    ::rmdir(dir_.c_str());
  }
  // The insufficient_storage message of a claim that must not fit.
  static std::string refusal(DiskBudget& budget, std::uint64_t bytes, std::uint64_t headroom = 0) {
    try {
      budget.claim(bytes, headroom);
    } catch (const SandboxError& e) {
      EXPECT_EQ(e.code(), "insufficient_storage");
      return e.what();
    }
    ADD_FAILURE() << "a claim of " << bytes << " bytes fitted";
    return "";
  }
  std::string dir_;
};

TEST_F(DiskBudgetTest, ClaimsFitInTheFreeSpaceLessTheReserveAndComeBackWhenReleased) {
  DiskBudget budget(dir_, 8 * kMebibyte);  // 56 MiB to promise
  auto first = budget.claim(40 * kMebibyte);
  EXPECT_FALSE(budget.shortfall(16 * kMebibyte).has_value());
  const std::string message = refusal(budget, 20 * kMebibyte);
  EXPECT_NE(message.find("does not fit"), std::string::npos) << message;
  EXPECT_NE(message.find(std::to_string(40 * kMebibyte) + " still promised"), std::string::npos) << message;
  EXPECT_NE(message.find("min_free_bytes"), std::string::npos) << message;
  first.reset();
  EXPECT_TRUE(budget.claim(50 * kMebibyte) != nullptr);
  refusal(budget, 60 * kMebibyte);  // more than the filesystem has beyond the reserve, with nothing else promised
}

TEST_F(DiskBudgetTest, AnAttachedImageCountsWhatItAlreadyHolds) {
  DiskBudget budget(dir_, 8 * kMebibyte);
  const std::string image = dir_ + "/disk.img";
  const int fd = ::open(image.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0600);
  ASSERT_GE(fd, 0) << std::strerror(errno);
  auto claim = budget.claim(40 * kMebibyte);
  claim->attach(fd);
  const std::string chunk(kMebibyte, 'x');
  for (int i = 0; i < 30; ++i) ASSERT_EQ(::write(fd, chunk.data(), chunk.size()), static_cast<ssize_t>(kMebibyte));
  ::close(fd);
  ::unlink(image.c_str());  // as a sandbox disk's image: held by its descriptor alone (the claim keeps a copy)
  // 34 MiB free, 8 kept, 10 still promised: 16 MiB are left, as before the writes.
  EXPECT_FALSE(budget.shortfall(15 * kMebibyte).has_value());
  EXPECT_TRUE(budget.shortfall(18 * kMebibyte).has_value());
  claim.reset();  // the image's space comes back with its last descriptor
  EXPECT_FALSE(budget.shortfall(50 * kMebibyte).has_value());
}

TEST_F(DiskBudgetTest, HeadroomLeavesRoomForTheNextClaim) {
  DiskBudget budget(dir_, 8 * kMebibyte);
  EXPECT_TRUE(budget.claim(20 * kMebibyte, 20 * kMebibyte) != nullptr);
  refusal(budget, 30 * kMebibyte, 30 * kMebibyte);
  EXPECT_TRUE(budget.claim(30 * kMebibyte) != nullptr);
}

}  // namespace
}  // namespace capsule::sandbox
