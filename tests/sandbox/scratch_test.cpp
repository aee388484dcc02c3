// ScratchDir's removal (sandbox/scratch.h): the dirs it made go with a rmdir each when they are empty, anything
// left in them still goes, and a kept upper dir outside the scratch dir stays with what was written there.
#include "sandbox/scratch.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

#include "tests/support/scratch_dir_test.h"

namespace capsule::sandbox {
namespace {

namespace fs = std::filesystem;

// A fresh dir_ under /tmp per test (tests/support), holding the scratch root and any kept upper.
class ScratchDirTest : public capsule::testing::ScratchDirTest {
 protected:
  const std::uint32_t owner_ = getuid();
};

TEST_F(ScratchDirTest, WhatItMadeGoesAndTheRootStays) {
  std::string path;
  {
    ScratchDir scratch(dir_ + "/scratch", "0123456789abcdef", 2, "", owner_);
    path = scratch.path();
    ASSERT_TRUE(fs::is_directory(scratch.lower(1)));
    ASSERT_TRUE(fs::is_directory(scratch.upper()));
    ASSERT_TRUE(fs::is_directory(scratch.work()));
  }
  EXPECT_FALSE(fs::exists(path));
  EXPECT_TRUE(fs::is_directory(dir_ + "/scratch")) << "the scratch root is shared by every sandbox";
}

TEST_F(ScratchDirTest, WhatASandboxLeftInItGoesToo) {
  std::string path;
  {
    ScratchDir scratch(dir_ + "/scratch", "0123456789abcdef", 1, "", owner_);
    path = scratch.path();
    fs::create_directories(scratch.upper() + "/deep/er");
    std::ofstream(scratch.upper() + "/deep/er/file") << "written";
    std::ofstream(scratch.new_root() + "/stray") << "left";
  }
  EXPECT_FALSE(fs::exists(path));
}

TEST_F(ScratchDirTest, AKeptUpperStaysWithItsContents) {
  const std::string kept = dir_ + "/kept-upper";
  std::string path;
  {
    ScratchDir scratch(dir_ + "/scratch", "0123456789abcdef", 1, kept, owner_);
    path = scratch.path();
    ASSERT_EQ(scratch.upper(), kept);
  }
  EXPECT_FALSE(fs::exists(path));
  EXPECT_TRUE(fs::is_directory(kept)) << "an empty kept upper must stay as well";
  {
    ScratchDir scratch(dir_ + "/scratch", "fedcba9876543210", 1, kept, owner_);
    std::ofstream(kept + "/result") << "kept";
  }
  EXPECT_TRUE(fs::exists(kept + "/result"));
}

}  // namespace
}  // namespace capsule::sandbox
