// ScratchDir's removal (sandbox/scratch.h): the dirs it made go with a rmdir each when they are empty, anything
// left in them still goes, and a kept upper dir outside the scratch dir stays with what was written there.
#include "sandbox/scratch.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

namespace capsule::sandbox {
namespace {

namespace fs = std::filesystem;

class ScratchDirTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char pattern[] = "/tmp/capsule-scratch-test.XXXXXX";
    ASSERT_NE(mkdtemp(pattern), nullptr);
    base_ = pattern;
  }
  void TearDown() override { fs::remove_all(base_); }

  std::string base_;
  const std::uint32_t owner_ = getuid();
};

TEST_F(ScratchDirTest, WhatItMadeGoesAndTheRootStays) {
  std::string path;
  {
    ScratchDir scratch(base_ + "/scratch", "0123456789abcdef", 2, "", owner_);
    path = scratch.path();
    ASSERT_TRUE(fs::is_directory(scratch.lower(1)));
    ASSERT_TRUE(fs::is_directory(scratch.upper()));
    ASSERT_TRUE(fs::is_directory(scratch.work()));
  }
  EXPECT_FALSE(fs::exists(path));
  EXPECT_TRUE(fs::is_directory(base_ + "/scratch")) << "the scratch root is shared by every sandbox";
}

TEST_F(ScratchDirTest, WhatASandboxLeftInItGoesToo) {
  std::string path;
  {
    ScratchDir scratch(base_ + "/scratch", "0123456789abcdef", 1, "", owner_);
    path = scratch.path();
    fs::create_directories(scratch.upper() + "/deep/er");
    std::ofstream(scratch.upper() + "/deep/er/file") << "written";
    std::ofstream(scratch.new_root() + "/stray") << "left";
  }
  EXPECT_FALSE(fs::exists(path));
}

TEST_F(ScratchDirTest, AKeptUpperStaysWithItsContents) {
  const std::string kept = base_ + "/kept-upper";
  std::string path;
  {
    ScratchDir scratch(base_ + "/scratch", "0123456789abcdef", 1, kept, owner_);
    path = scratch.path();
    ASSERT_EQ(scratch.upper(), kept);
  }
  EXPECT_FALSE(fs::exists(path));
  EXPECT_TRUE(fs::is_directory(kept)) << "an empty kept upper must stay as well";
  {
    ScratchDir scratch(base_ + "/scratch", "fedcba9876543210", 1, kept, owner_);
    std::ofstream(kept + "/result") << "kept";
  }
  EXPECT_TRUE(fs::exists(kept + "/result"));
}

}  // namespace
}  // namespace capsule::sandbox
