// A gtest fixture with a fresh directory under /tmp per test, removed afterwards: for unit tests of code that
// reads what a run left in a workspace (reports, class files, globs).
#pragma once

#include <gtest/gtest.h>
#include <stdlib.h>

#include <filesystem>
#include <fstream>
#include <string>

namespace capsule::testing {

class ScratchDirTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char pattern[] = "/tmp/capsule-unit-XXXXXX";
    ASSERT_NE(mkdtemp(pattern), nullptr);
    dir_ = pattern;
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }

  // Writes text to dir_/rel (creating its directories) and returns that path.
  std::string write(const std::string& rel, const std::string& text) {
    const std::string path = dir_ + "/" + rel;
    std::filesystem::create_directories(std::filesystem::path(path).parent_path());
    std::ofstream(path, std::ios::binary) << text;
    return path;
  }

  std::string dir_;
};

}  // namespace capsule::testing
