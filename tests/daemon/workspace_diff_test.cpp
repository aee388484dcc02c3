// diff_upper: hand-built upper dirs (0:0 whiteouts, xattr whiteouts, opaque dirs, type changes, symlinks,
// mounts below the root), and a real overlayfs mounted in a private mount namespace to check this kernel.
#include "daemon/record/workspace_diff.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <sched.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/wait.h>
#include <sys/xattr.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <filesystem>
#include <fstream>
#include <functional>
#include <thread>

#include "base/error.h"
#include "base/unique_fd.h"

namespace capsule::daemon {
namespace {

namespace fs = std::filesystem;

class WorkspaceDiffTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char pattern[] = "/tmp/capsule-diff-XXXXXX";
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
  static void whiteout(const std::string& path) {
    ASSERT_EQ(mknod(path.c_str(), S_IFCHR | 0000, makedev(0, 0)), 0) << path << ": " << strerror(errno);
  }
  static void set_xattr(const std::string& path, const std::string& name, const std::string& value) {
    ASSERT_EQ(lsetxattr(path.c_str(), name.c_str(), value.data(), value.size(), 0), 0)
        << path << " " << name << ": " << strerror(errno);
  }

  std::string dir_, lower_, upper_;
};

// "path=size" per entry, for readable failure messages.
std::vector<std::string> show(const std::vector<DiffEntry>& entries) {
  std::vector<std::string> out;
  for (const auto& entry : entries) out.push_back(entry.path + "=" + std::to_string(entry.size));
  return out;
}
using Lines = std::vector<std::string>;

TEST_F(WorkspaceDiffTest, HandBuiltUpper) {
  write(lower_ + "/keep.txt", "keep!");
  write(lower_ + "/mod.txt", "old");
  write(lower_ + "/gone.txt", "0123456789");
  write(lower_ + "/gonedir/a", "a");
  write(lower_ + "/gonedir/sub/b", "bb");
  fs::create_directories(lower_ + "/gonedir/emptysub");
  write(lower_ + "/opq/old1", "old1");
  write(lower_ + "/opq/keep_name", "abc");
  write(lower_ + "/opq/deep/x", "xxxxxx");
  write(lower_ + "/file2dir", "a file!");
  write(lower_ + "/dir2file/inner", "12345678");
  fs::create_symlink("keep.txt", lower_ + "/link");
  write(lower_ + "/x_gone", "123456789");
  write(lower_ + "/shared/only_lower", "ol");
  write(lower_ + "/shared/deeper/same", "s");

  write(upper_ + "/mod.txt", "newer!");
  whiteout(upper_ + "/gone.txt");
  whiteout(upper_ + "/gonedir");
  write(upper_ + "/opq/keep_name", "fresh");
  write(upper_ + "/opq/new1", "1");
  set_xattr(upper_ + "/opq", "trusted.overlay.opaque", "y");
  write(upper_ + "/file2dir/c", "ccc");
  set_xattr(upper_ + "/file2dir", "trusted.overlay.opaque", "y");
  write(upper_ + "/dir2file", "four");
  fs::create_directories(upper_ + "/newdir");
  write(upper_ + "/newtree/sub/f", "ff");
  fs::create_directories(upper_ + "/newtree/empty/inner");
  fs::create_symlink("elsewhere", upper_ + "/link");
  fs::create_symlink("/etc/passwd", upper_ + "/newlink");
  write(upper_ + "/x_gone", "");
  set_xattr(upper_ + "/x_gone", "user.overlay.whiteout", "");
  write(upper_ + "/shared/n", "n");
  fs::create_directories(upper_ + "/shared/deeper");  // copied-up directory, nothing changed below

  const WorkspaceDiff diff = diff_upper(upper_, lower_);
  EXPECT_EQ(show(diff.added), (Lines{"dir2file=4", "file2dir/c=3", "newdir/=0", "newlink=11", "newtree/empty/inner/=0",
                                     "newtree/sub/f=2", "opq/new1=1", "shared/n=1"}));
  EXPECT_EQ(show(diff.modified), (Lines{"link=9", "mod.txt=6", "opq/keep_name=5"}));
  EXPECT_EQ(show(diff.deleted), (Lines{"dir2file/inner=8", "file2dir=7", "gone.txt=10", "gonedir/a=1",
                                       "gonedir/emptysub/=0", "gonedir/sub/b=2", "opq/deep/x=6", "opq/old1=4",
                                       "x_gone=9"}));

  // Deterministic, and the JSON shape the run record uses.
  EXPECT_EQ(diff_upper(upper_, lower_).to_json(), diff.to_json());
  const nlohmann::json j = diff.to_json();
  EXPECT_EQ(j["modified"][1], nlohmann::json({{"path", "mod.txt"}, {"size", 6}}));
  EXPECT_EQ(j["deleted"].size(), 9u);
}

TEST_F(WorkspaceDiffTest, UserNamespaceXattrsAndOpaqueOnlyWhenY) {
  write(lower_ + "/a/one", "1");
  write(lower_ + "/b/two", "22");
  write(lower_ + "/b/three", "333");
  write(upper_ + "/a/new", "n");
  set_xattr(upper_ + "/a", "user.overlay.opaque", "y");
  write(upper_ + "/b/new", "n");
  set_xattr(upper_ + "/b", "user.overlay.opaque", "x");  // "has xattr whiteouts", not opaque

  const WorkspaceDiff diff = diff_upper(upper_, lower_);
  EXPECT_EQ(show(diff.added), (Lines{"a/new=1", "b/new=1"}));
  EXPECT_TRUE(diff.modified.empty());
  EXPECT_EQ(show(diff.deleted), (Lines{"a/one=1"}));
}

TEST_F(WorkspaceDiffTest, NeverFollowsSymlinks) {
  fs::create_symlink("/etc", lower_ + "/ln");  // lower has a symlink where upper has a directory
  write(upper_ + "/ln/passwd", "mine");
  set_xattr(upper_ + "/ln", "trusted.overlay.opaque", "y");
  whiteout(upper_ + "/ln/hostname");          // would hide /etc/hostname if the link were followed
  fs::create_symlink("/etc", upper_ + "/up"); // a symlink to a directory in upper is just a symlink

  const WorkspaceDiff diff = diff_upper(upper_, lower_);
  EXPECT_EQ(show(diff.added), (Lines{"ln/passwd=4", "up=4"}));
  EXPECT_TRUE(diff.modified.empty());
  EXPECT_EQ(show(diff.deleted), (Lines{"ln=4"}));
}

TEST_F(WorkspaceDiffTest, EmptyUpperAndErrors) {
  write(lower_ + "/a", "a");
  const WorkspaceDiff empty = diff_upper(upper_, lower_);
  EXPECT_TRUE(empty.added.empty() && empty.modified.empty() && empty.deleted.empty());
  EXPECT_EQ(empty.to_json(), nlohmann::json::parse(R"({"added":[],"modified":[],"deleted":[],"truncated":false,
                                                        "totals":{"added":0,"modified":0,"deleted":0}})"));

  try {
    diff_upper(dir_ + "/nope", lower_);
    FAIL();
  } catch (const base::Error& e) {
    EXPECT_EQ(e.cause().path, dir_ + "/nope");
    EXPECT_EQ(e.cause().errno_value, ENOENT);
    EXPECT_NE(std::string(e.what()).find("open " + dir_ + "/nope: No such file"), std::string::npos) << e.what();
  }
  EXPECT_THROW(diff_upper(upper_, lower_ + "/a"), base::Error);  // lower is a file

  // A renamed directory is an error of that entry only: the rest of the diff is still there.
  fs::create_directories(upper_ + "/moved");
  set_xattr(upper_ + "/moved", "trusted.overlay.redirect", "/orig");
  write(upper_ + "/new.txt", "n");
  const WorkspaceDiff diff = diff_upper(upper_, lower_);
  EXPECT_EQ(show(diff.added), (Lines{"new.txt=1"}));
  EXPECT_TRUE(diff.truncated);
  ASSERT_EQ(diff.errors.size(), 1u);
  EXPECT_EQ(diff.errors[0], "moved: renamed directory (overlay redirect xattr) is not supported");
  EXPECT_EQ(diff.to_json()["errors"], nlohmann::json({diff.errors[0]}));
}

// A chain of directories whose path is far past PATH_MAX: walked through descriptors, listed with its path
// cut, and the entries past the depth limit are one error, not the end of the diff.
// A non-root caller's workspace is a descriptor opened as that caller (its path only a /proc/self/fd link): the
// descriptor form reads the directories behind the descriptors, whatever their paths now name, and each of
// several diffs of one descriptor lists it whole (each reads it through a description of its own).
TEST_F(WorkspaceDiffTest, DescriptorsAreDiffedWhateverTheirPathsNowName) {
  write(lower_ + "/gone.txt", "bye");
  write(lower_ + "/kept.txt", "kept");
  whiteout(upper_ + "/gone.txt");
  write(upper_ + "/added.txt", "new");
  const base::UniqueFd upper(::open(upper_.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
  const base::UniqueFd lower(::open(lower_.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
  ASSERT_TRUE(upper && lower);
  fs::rename(lower_, dir_ + "/moved");
  fs::create_directories(lower_);
  write(lower_ + "/added.txt", "planted");  // would make added.txt "modified" and hide gone.txt's deletion
  for (int round = 0; round < 2; ++round) {
    const WorkspaceDiff diff = diff_upper(upper.get(), lower.get());
    EXPECT_EQ(show(diff.added), (std::vector<std::string>{"added.txt=3"})) << round;
    EXPECT_EQ(show(diff.deleted), (std::vector<std::string>{"gone.txt=3"})) << round;
    EXPECT_TRUE(diff.modified.empty()) << round;
  }
  // The path form never follows a root's last component: the magic link of that descriptor is refused.
  EXPECT_THROW(diff_upper(upper_, "/proc/self/fd/" + std::to_string(lower.get())), base::Error);
}

TEST_F(WorkspaceDiffTest, DirectoryChainPastPathMax) {
  write(upper_ + "/first.txt", "1");
  const std::string name(200, 'd');
  int fd = ::open(upper_.c_str(), O_RDONLY | O_DIRECTORY);
  for (int depth = 0; depth < 60; ++depth) {  // 60 * 201 bytes: three times PATH_MAX
    ASSERT_EQ(::mkdirat(fd, name.c_str(), 0755), 0) << depth << ": " << strerror(errno);
    const int next = ::openat(fd, name.c_str(), O_RDONLY | O_DIRECTORY);
    ::close(fd);
    fd = next;
  }
  const int file = ::openat(fd, "deep.txt", O_WRONLY | O_CREAT, 0644);
  ASSERT_GE(file, 0);
  ASSERT_EQ(::write(file, "deep", 4), 4);
  ::close(file);
  ::close(fd);
  write(upper_ + "/zlast.txt", "22");

  const WorkspaceDiff diff = diff_upper(upper_, lower_);
  ASSERT_EQ(diff.added.size(), 3u) << nlohmann::json(show(diff.added));
  EXPECT_EQ(diff.total_added, 3u);
  EXPECT_TRUE(diff.errors.empty()) << nlohmann::json(diff.errors);
  const auto deep = std::find_if(diff.added.begin(), diff.added.end(),
                                 [](const DiffEntry& e) { return e.path.starts_with("dddd"); });
  ASSERT_NE(deep, diff.added.end());
  EXPECT_EQ(deep->size, 4u);
  EXPECT_EQ(deep->path.size(), DiffLimits{}.max_path_bytes + 3) << "cut, ending in ...";
  EXPECT_TRUE(deep->path.ends_with("..."));
  EXPECT_TRUE(diff.truncated);

  DiffLimits shallow;
  shallow.max_depth = 10;
  const WorkspaceDiff limited = diff_upper(upper_, lower_, shallow);
  EXPECT_EQ(show(limited.added), (Lines{"first.txt=1", "zlast.txt=2"}));
  ASSERT_EQ(limited.errors.size(), 1u);
  EXPECT_NE(limited.errors[0].find("deeper than 10 directories; not walked"), std::string::npos) << limited.errors[0];
  EXPECT_TRUE(limited.truncated);
}

// Lists stop at the limits; totals count everything; names that are not UTF-8 stay valid JSON.
TEST_F(WorkspaceDiffTest, ListsAreBoundedTotalsAreNotAndNamesAreValidJson) {
  for (int i = 0; i < 50; ++i) write(upper_ + "/f" + std::to_string(100 + i), "x");
  for (int i = 0; i < 5; ++i) write(lower_ + "/gone" + std::to_string(i), "yy");
  for (int i = 0; i < 5; ++i) whiteout(upper_ + "/gone" + std::to_string(i));
  write(upper_ + "/bad\xff\x01name", "z");
  DiffLimits limits;
  limits.max_entries = 20;
  const WorkspaceDiff diff = diff_upper(upper_, lower_, limits);
  EXPECT_EQ(diff.total_added, 51u);
  EXPECT_EQ(diff.total_deleted, 5u);
  EXPECT_EQ(diff.added.size() + diff.modified.size() + diff.deleted.size(), 20u);
  EXPECT_TRUE(diff.truncated);
  const nlohmann::json j = diff.to_json();
  EXPECT_EQ(j["totals"], nlohmann::json({{"added", 51}, {"modified", 0}, {"deleted", 5}}));
  EXPECT_EQ(j["truncated"], true);
  EXPECT_NO_THROW(j.dump());  // strict dump: every path is valid UTF-8
  EXPECT_EQ(j["added"][0]["path"], "bad\xEF\xBF\xBD\x01name");

  limits = DiffLimits{};
  limits.max_listed_bytes = 40;  // the 9-byte bad name and seven 4-byte names
  EXPECT_EQ(diff_upper(upper_, lower_, limits).added.size(), 8u);
}

TEST_F(WorkspaceDiffTest, DoesNotEnterOtherFilesystems) {
  write(upper_ + "/real", "r");
  fs::create_directories(upper_ + "/mnt");
  // A thread with its own fs struct and mount namespace, so the tmpfs is invisible to the rest of the test.
  std::string outcome;
  std::thread([&] {
    if (unshare(CLONE_FS | CLONE_NEWNS) != 0) {
      outcome = std::string("unshare: ") + strerror(errno);
      return;
    }
    if (mount(nullptr, "/", nullptr, MS_REC | MS_PRIVATE, nullptr) != 0 ||
        mount("tmpfs", (upper_ + "/mnt").c_str(), "tmpfs", 0, "size=1m") != 0) {
      outcome = std::string("mount: ") + strerror(errno);
      return;
    }
    write(upper_ + "/mnt/inside", "should not be listed");
    try {
      outcome = nlohmann::json(show(diff_upper(upper_, lower_).added)).dump();
    } catch (const std::exception& e) {
      outcome = e.what();
    }
    umount((upper_ + "/mnt").c_str());
  }).join();
  EXPECT_EQ(outcome, R"(["real=1"])");
}

// Runs `body` in a forked child inside a private mount namespace; the child only makes raw system calls.
// Returns 0 on success, else the step number `body` failed at (or 100+ for the namespace setup).
int in_private_mount_namespace(const std::function<int()>& body) {
  const pid_t pid = fork();
  if (pid == 0) {
    if (unshare(CLONE_NEWNS) != 0) _exit(100);
    if (mount(nullptr, "/", nullptr, MS_REC | MS_PRIVATE, nullptr) != 0) _exit(101);
    _exit(body());
  }
  int status = 0;
  if (pid < 0 || waitpid(pid, &status, 0) != pid) return 102;
  return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

int write_file(const char* path, const char* text, int flags) {
  const int fd = open(path, O_WRONLY | O_CLOEXEC | flags, 0644);
  if (fd < 0) return -1;
  const ssize_t n = ::write(fd, text, strlen(text));
  close(fd);
  return n == static_cast<ssize_t>(strlen(text)) ? 0 : -1;
}

TEST_F(WorkspaceDiffTest, RealOverlayfs) {
  write(lower_ + "/a.txt", "alpha\n");
  write(lower_ + "/b.txt", "bravo\n");
  write(lower_ + "/d/x", "x");
  write(lower_ + "/d/y", "yy");
  write(lower_ + "/e/f", "fff");
  write(lower_ + "/keep", "unchanged");
  write(lower_ + "/sub/touched", "t");
  const std::string work = dir_ + "/work", merged = dir_ + "/merged";
  fs::create_directories(work);
  fs::create_directories(merged);
  const std::string options = "lowerdir=" + lower_ + ",upperdir=" + upper_ + ",workdir=" + work;
  auto m = [&](const char* rel) { return merged + "/" + rel; };
  // Every path is built before fork: the child does not allocate.
  const std::string new_txt = m("new.txt"), a_txt = m("a.txt"), b_txt = m("b.txt"), d_x = m("d/x"), d_y = m("d/y"),
                    d = m("d"), e_f = m("e/f"), e = m("e"), e_g = m("e/g"), empty = m("empty"), lnk = m("lnk"),
                    sub_new = m("sub/new");

  const int failed_step = in_private_mount_namespace([&] {
    if (mount("overlay", merged.c_str(), "overlay", 0, options.c_str()) != 0) return 1;
    int step = 2;
    if (write_file(new_txt.c_str(), "new\n", O_CREAT | O_EXCL) != 0) return step;
    ++step;
    if (write_file(a_txt.c_str(), "more\n", O_APPEND) != 0) return step;  // 6 + 5 bytes
    ++step;
    if (unlink(b_txt.c_str()) != 0) return step;
    ++step;
    if (unlink(d_x.c_str()) != 0 || unlink(d_y.c_str()) != 0 || rmdir(d.c_str()) != 0) return step;
    ++step;
    if (unlink(e_f.c_str()) != 0 || rmdir(e.c_str()) != 0 || mkdir(e.c_str(), 0755) != 0) return step;
    ++step;
    if (write_file(e_g.c_str(), "g", O_CREAT | O_EXCL) != 0) return step;
    ++step;
    if (mkdir(empty.c_str(), 0755) != 0 || symlink("a.txt", lnk.c_str()) != 0) return step;
    ++step;
    if (write_file(sub_new.c_str(), "sn", O_CREAT | O_EXCL) != 0) return step;
    ++step;
    if (umount(merged.c_str()) != 0) return step;
    return 0;
  });
  ASSERT_EQ(failed_step, 0) << "overlay step " << failed_step << " failed";

  const WorkspaceDiff diff = diff_upper(upper_, lower_);
  EXPECT_EQ(show(diff.added), (Lines{"e/g=1", "empty/=0", "lnk=5", "new.txt=4", "sub/new=2"}));
  EXPECT_EQ(show(diff.modified), (Lines{"a.txt=11"}));
  EXPECT_EQ(show(diff.deleted), (Lines{"b.txt=6", "d/x=1", "d/y=2", "e/f=3"}));
}

}  // namespace
}  // namespace capsule::daemon
