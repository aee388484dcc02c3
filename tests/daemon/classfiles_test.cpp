// collect.classfiles: class-file headers read from files built in the test, the census of majors with the odd
// ones out, files that are not class files, symlinks never followed, and the bounds on what is read.
#include "daemon/record/classfiles.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

#include "daemon/record/workspace_glob.h"
#include "tests/support/scratch_dir_test.h"

namespace capsule::daemon {
namespace {

namespace fs = std::filesystem;

class ClassfilesTest : public testing::ScratchDirTest {
 protected:
  // A class file's header (magic, minor 0, major) and a little body.
  void write_class(const std::string& rel, unsigned major) {
    const char header[] = {'\xCA', '\xFE', '\xBA', '\xBE', 0, 0, static_cast<char>(major >> 8),
                           static_cast<char>(major & 0xff), 0, 1};
    write(rel, std::string(header, sizeof header));
  }
};

TEST_F(ClassfilesTest, MajorsAreCountedAndTheOddOnesListed) {
  for (int i = 0; i < 3; ++i) write_class("target/classes/com/x/A" + std::to_string(i) + ".class", 61);
  write_class("target/classes/com/x/Old.class", 52);
  write_class("target/test-classes/com/x/ATest.class", 61);
  const ClassfileCensus census = collect_classfiles(dir_, {"target/**/*.class"});
  EXPECT_EQ(census.to_json(), nlohmann::json({{"majors", {{"52", 1}, {"61", 4}}},
                                              {"expected", 61},
                                              {"odd", {{{"path", "target/classes/com/x/Old.class"}, {"major", 52}}}},
                                              {"files", 5},
                                              {"unreadable", nlohmann::json::array()},
                                              {"truncated", false}}));
}

TEST_F(ClassfilesTest, ATieGoesToTheHigherMajor) {
  write_class("A.class", 52);
  write_class("B.class", 65);
  const ClassfileCensus census = collect_classfiles(dir_, {"*.class"});
  EXPECT_EQ(census.expected, 65u);
  ASSERT_EQ(census.odd.size(), 1u);
  EXPECT_EQ(census.odd[0].first, "A.class");
}

TEST_F(ClassfilesTest, NothingFoundHasNoExpectedMajor) {
  const nlohmann::json j = collect_classfiles(dir_, {"**/*.class"}).to_json();
  EXPECT_TRUE(j["expected"].is_null());
  EXPECT_EQ(j["files"], 0);
}

TEST_F(ClassfilesTest, NotClassFilesAndSymlinksAreNotCounted) {
  write_class("Good.class", 61);
  std::ofstream(dir_ + "/Short.class") << "\xCA\xFE";
  std::ofstream(dir_ + "/Text.class") << "hello, world";
  write_class("outside/Secret.class", 52);
  fs::create_symlink(dir_ + "/outside/Secret.class", dir_ + "/Link.class");
  fs::create_directory_symlink(dir_ + "/outside", dir_ + "/linkdir");
  const ClassfileCensus census = collect_classfiles(dir_, {"*.class", "linkdir/*.class"});
  EXPECT_EQ(census.files, 1u);
  EXPECT_EQ(census.majors, (std::map<unsigned, std::uint64_t>{{61, 1}}));
  ASSERT_EQ(census.unreadable.size(), 2u);
  EXPECT_EQ(census.unreadable[0], "Short.class: shorter than a class-file header");
  EXPECT_EQ(census.unreadable[1], "Text.class: not a class file (no 0xCAFEBABE)");
  EXPECT_THROW(classfile_major(dir_ + "/Link.class"), CollectError);
  EXPECT_EQ(classfile_major(dir_ + "/Good.class"), 61u);
}

TEST_F(ClassfilesTest, TheCensusIsBounded) {
  for (int i = 0; i < 8; ++i) write_class("C" + std::to_string(i) + ".class", i < 5 ? 61 : 52);
  ClassfileLimits limits;
  limits.max_listed = 2;
  ClassfileCensus census = collect_classfiles(dir_, {"*.class"}, limits);
  EXPECT_EQ(census.files, 8u);
  EXPECT_EQ(census.odd.size(), 2u);
  EXPECT_TRUE(census.truncated) << "three odd ones, two listed";
  limits.max_files = 3;
  census = collect_classfiles(dir_, {"*.class"}, limits);
  EXPECT_EQ(census.files, 3u);
  EXPECT_TRUE(census.truncated);
  limits = {};
  limits.max_visited = 2;
  census = collect_classfiles(dir_, {"*.class"}, limits);
  EXPECT_TRUE(census.truncated);
  EXPECT_THROW(collect_classfiles(dir_, {"../*.class"}), CollectError);
}

}  // namespace
}  // namespace capsule::daemon
