// diff_with_patches on hand-built upper/lower dirs: patches per status, whiteouts, binary files, planted
// FIFOs and symlinks (never followed or read), hostile listed paths, and the per-file and total limits.
#include "daemon/record/diff_patches.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>

#include "base/error.h"
#include "base/unique_fd.h"

namespace capsule::daemon {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

class DiffPatchesTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char pattern[] = "/tmp/capsule-patches-XXXXXX";
    ASSERT_NE(mkdtemp(pattern), nullptr);
    dir_ = pattern;
    lower_ = dir_ + "/lower";
    upper_ = dir_ + "/upper";
    fs::create_directories(lower_);
    fs::create_directories(upper_);
  }
  void TearDown() override { fs::remove_all(dir_); }

  static void write(const std::string& path, const std::string& text) {
    fs::create_directories(fs::path(path).parent_path());
    std::ofstream(path, std::ios::binary) << text;
  }

  json patches(const PatchLimits& limits = {}) const {
    return diff_with_patches(diff_upper(upper_, lower_), upper_, lower_, limits);
  }
  // The patch object for `path` in a diff_with_patches result; null when there is none.
  static json entry(const json& result, const std::string& path) {
    for (const auto& patch : result.at("patches")) {
      if (patch.at("path") == path) return patch;
    }
    return nullptr;
  }

  std::string dir_, lower_, upper_;
};

TEST_F(DiffPatchesTest, AddedModifiedAndWhitedOutFilesHavePatches) {
  write(lower_ + "/mod.txt", "one\ntwo\nthree\n");
  write(upper_ + "/mod.txt", "one\n2\nthree\n");
  write(upper_ + "/new.txt", "fresh\n");
  write(lower_ + "/gone.txt", "old line\n");
  ASSERT_EQ(mknod((upper_ + "/gone.txt").c_str(), S_IFCHR | 0000, makedev(0, 0)), 0) << strerror(errno);
  write(lower_ + "/same.txt", "same\n");
  write(upper_ + "/same.txt", "same\n");  // copied up, content unchanged

  const json result = patches();
  EXPECT_EQ(result.at("totals"), (json{{"added", 1}, {"modified", 2}, {"deleted", 1}}));
  EXPECT_EQ(result.at("modified").size(), 2u);  // the listing is to_json()'s
  EXPECT_FALSE(result.contains("patches_omitted"));
  ASSERT_EQ(result.at("patches").size(), 4u);
  EXPECT_EQ(result.at("patches")[0].at("path"), "gone.txt");  // sorted by path across statuses

  EXPECT_EQ(entry(result, "mod.txt"), (json{{"path", "mod.txt"}, {"status", "modified"}, {"binary", false},
                                             {"patch", "--- a/mod.txt\n+++ b/mod.txt\n@@ -1,3 +1,3 @@\n one\n-two\n+2\n three\n"}}));
  EXPECT_EQ(entry(result, "new.txt").at("patch"), "--- /dev/null\n+++ b/new.txt\n@@ -0,0 +1 @@\n+fresh\n");
  EXPECT_EQ(entry(result, "new.txt").at("status"), "added");
  EXPECT_EQ(entry(result, "gone.txt").at("patch"), "--- a/gone.txt\n+++ /dev/null\n@@ -1 +0,0 @@\n-old line\n");
  EXPECT_EQ(entry(result, "gone.txt").at("status"), "deleted");
  EXPECT_EQ(entry(result, "same.txt").at("patch"), "");
}

TEST_F(DiffPatchesTest, DeletedDirectoryContentComesFromLower) {
  write(lower_ + "/dir/a.txt", "a\n");
  write(lower_ + "/dir/sub/b.txt", "b\n");
  ASSERT_EQ(mknod((upper_ + "/dir").c_str(), S_IFCHR | 0000, makedev(0, 0)), 0) << strerror(errno);
  fs::create_directories(upper_ + "/emptydir");

  const json result = patches();
  EXPECT_EQ(entry(result, "dir/a.txt").at("patch"), "--- a/dir/a.txt\n+++ /dev/null\n@@ -1 +0,0 @@\n-a\n");
  EXPECT_EQ(entry(result, "dir/sub/b.txt").at("patch"), "--- a/dir/sub/b.txt\n+++ /dev/null\n@@ -1 +0,0 @@\n-b\n");
  EXPECT_TRUE(entry(result, "emptydir/").is_null());  // listed, but a directory has no patch
  EXPECT_EQ(result.at("added")[0].at("path"), "emptydir/");
}

TEST_F(DiffPatchesTest, BinaryFilesAreMarkedWithoutText) {
  write(lower_ + "/blob.bin", std::string("\x7f" "ELF\0\0\1", 7));
  write(upper_ + "/blob.bin", std::string("\x7f" "ELF\0\0\2", 7));
  write(upper_ + "/latin1.txt", "caf\xe9\n");
  const json result = patches();
  EXPECT_EQ(entry(result, "blob.bin"), (json{{"path", "blob.bin"}, {"status", "modified"}, {"binary", true}}));
  EXPECT_EQ(entry(result, "latin1.txt"), (json{{"path", "latin1.txt"}, {"status", "added"}, {"binary", true}}));
  EXPECT_NO_THROW(result.dump());  // all of it is valid UTF-8
}

TEST_F(DiffPatchesTest, PlantedFifoIsRefusedWithoutBlocking) {
  ASSERT_EQ(mkfifo((upper_ + "/pipe").c_str(), 0644), 0) << strerror(errno);
  write(lower_ + "/was_file", "x\n");
  ASSERT_EQ(mkfifo((upper_ + "/was_file").c_str(), 0644), 0) << strerror(errno);
  write(upper_ + "/after.txt", "after\n");

  const json result = patches();  // no writer ever opens the FIFOs: reading them would block forever
  EXPECT_EQ(entry(result, "pipe"), (json{{"path", "pipe"}, {"status", "added"}, {"binary", false},
                                          {"error", "a FIFO, not read"}}));
  EXPECT_EQ(entry(result, "was_file").at("error"), "a FIFO, not read");
  EXPECT_EQ(entry(result, "after.txt").at("patch"), "--- /dev/null\n+++ b/after.txt\n@@ -0,0 +1 @@\n+after\n");
}

TEST_F(DiffPatchesTest, SymlinkShowsItsTargetNeverWhatItPointsAt) {
  fs::create_symlink("/etc/passwd", upper_ + "/passwd_link");
  write(lower_ + "/was_text", "text\n");
  fs::create_symlink("/etc/passwd", upper_ + "/was_text");
  const json result = patches();
  EXPECT_EQ(entry(result, "passwd_link").at("patch"),
            "--- /dev/null\n+++ b/passwd_link\n@@ -0,0 +1 @@\n+/etc/passwd\n\\ No newline at end of file\n");
  EXPECT_EQ(entry(result, "was_text").at("patch"),
            "--- a/was_text\n+++ b/was_text\n@@ -1 +1 @@\n-text\n+/etc/passwd\n\\ No newline at end of file\n");
  EXPECT_EQ(result.dump().find("root:"), std::string::npos);
}

TEST_F(DiffPatchesTest, SymlinkedDirectoryOnTheWayIsNotFollowed) {
  // A listing naming a path through a symlinked directory (as if swapped in after the walk).
  fs::create_symlink("/etc", upper_ + "/etc_link");
  WorkspaceDiff diff;
  diff.added = {{"etc_link/passwd", 1}};
  const json result = diff_with_patches(diff, upper_, lower_, {});
  EXPECT_TRUE(entry(result, "etc_link/passwd").contains("error"));
  EXPECT_FALSE(entry(result, "etc_link/passwd").contains("patch"));
  EXPECT_EQ(result.dump().find("root:"), std::string::npos);
}

TEST_F(DiffPatchesTest, HostilePathsAreRefused) {
  write(dir_ + "/outside.txt", "secret\n");
  write(upper_ + "/a/b", "b\n");
  WorkspaceDiff diff;
  for (const char* path : {"../outside.txt", "a/../../outside.txt", "/etc/passwd", "a/./b", "a//b", "./a/b", "a/b/.."}) {
    diff.added.push_back({path, 1});
  }
  const json result = diff_with_patches(diff, upper_, lower_, {});
  ASSERT_EQ(result.at("patches").size(), diff.added.size());
  for (const auto& patch : result.at("patches")) {
    EXPECT_TRUE(patch.contains("error")) << patch.dump();
    EXPECT_FALSE(patch.contains("patch")) << patch.dump();
  }
  EXPECT_EQ(result.dump().find("secret"), std::string::npos);
}

TEST_F(DiffPatchesTest, FilesPastTheSizeLimitAreTooLarge) {
  write(upper_ + "/big.txt", std::string(200, 'a'));
  write(upper_ + "/big.bin", std::string(100, 'a') + std::string(1, '\0') + std::string(100, 'a'));
  write(upper_ + "/small.txt", std::string(50, 'a'));
  PatchLimits limits;
  limits.text.max_input_bytes = 150;
  const json result = patches(limits);
  EXPECT_EQ(entry(result, "big.txt"), (json{{"path", "big.txt"}, {"status", "added"}, {"binary", false},
                                             {"too_large", true}, {"reason", "over 150 bytes"}}));
  EXPECT_EQ(entry(result, "big.bin").at("binary"), true);  // binary wins: no too_large
  EXPECT_FALSE(entry(result, "big.bin").contains("too_large"));
  EXPECT_TRUE(entry(result, "small.txt").contains("patch"));

  limits = {};
  limits.text.max_edit_distance = 2;
  write(upper_ + "/three.txt", "1\n2\n3\n");
  EXPECT_EQ(entry(patches(limits), "three.txt").at("reason"), "more than 2 changed lines");
}

TEST_F(DiffPatchesTest, PatchesPastTheTotalAreOmitted) {
  for (const char* name : {"a.txt", "b.txt", "c.txt", "d.txt"}) write(upper_ + "/" + name, std::string(40, 'x') + "\n");
  const std::size_t one = json(patches().at("patches")[0].at("patch")).get<std::string>().size();

  PatchLimits limits;
  limits.max_total_patch_bytes = 2 * one + 1;
  json result = patches(limits);
  EXPECT_TRUE(entry(result, "a.txt").contains("patch"));
  EXPECT_TRUE(entry(result, "b.txt").contains("patch"));
  EXPECT_EQ(entry(result, "c.txt"), (json{{"path", "c.txt"}, {"status", "added"}, {"binary", false}, {"omitted", true}}));
  EXPECT_EQ(entry(result, "d.txt").at("omitted"), true);
  EXPECT_EQ(result.at("patches_omitted"), 2);

  limits = {};
  limits.max_total_read_bytes = 41;  // reached after the first file: the rest are not read
  result = patches(limits);
  EXPECT_TRUE(entry(result, "a.txt").contains("patch"));
  EXPECT_EQ(entry(result, "b.txt").at("omitted"), true);
  EXPECT_EQ(result.at("patches_omitted"), 3);
}

TEST_F(DiffPatchesTest, PathsThatCouldForgeHeaderLinesAreQuoted) {
  write(upper_ + "/evil\n+++ b/x", "y\n");
  const json result = patches();
  EXPECT_EQ(result.at("patches")[0].at("patch"), "--- /dev/null\n+++ \"b/evil\\n+++ b/x\"\n@@ -0,0 +1 @@\n+y\n");
}

// The descriptor form reads the "-" side from the directory behind the descriptor, not what its path names now.
TEST_F(DiffPatchesTest, DescriptorRootsAreReadWhateverTheirPathsNowName) {
  write(lower_ + "/a.txt", "old\n");
  write(upper_ + "/a.txt", "new\n");
  const base::UniqueFd upper(::open(upper_.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
  const base::UniqueFd lower(::open(lower_.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
  ASSERT_TRUE(upper && lower);
  const WorkspaceDiff diff = diff_upper(upper.get(), lower.get());
  fs::rename(lower_, dir_ + "/moved");
  write(lower_ + "/a.txt", "planted\n");
  const json result = diff_with_patches(diff, upper.get(), lower.get());
  EXPECT_EQ(entry(result, "a.txt").at("patch"), "--- a/a.txt\n+++ b/a.txt\n@@ -1 +1 @@\n-old\n+new\n") << result;
}

TEST_F(DiffPatchesTest, MissingRootThrows) {
  EXPECT_THROW(diff_with_patches(WorkspaceDiff{}, dir_ + "/nope", lower_, {}), base::Error);
}

}  // namespace
}  // namespace capsule::daemon
