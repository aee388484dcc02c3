// Unpacked layers stacked by a real overlayfs: whiteouts hide, opaque directories hide, upper files win.
// Checked with a plain mount (trusted.* xattrs), a user-namespace mount with userxattr, and a real sandbox.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <sched.h>
#include <sys/mount.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstring>

#include "images/image_store.h"
#include "sandbox/launcher.h"
#include "tests/images/fixtures.h"
#include "tests/support/test_support.h"

namespace capsule::images {
namespace {

namespace fs = std::filesystem;
using testing::LayoutBuilder;
using testing::TempDir;

// A path in the merged view and what it must hold (nullptr: must not exist).
struct Expectation {
  std::string path;
  const char* content;
};

const std::vector<Expectation> kStacked = {
    {"data/kept", "base"},         {"data/gone", nullptr},      {"data/replaced", "new"},
    {"data/dir/top", "top"},       {"data/dir/hidden", nullptr}, {"data/added", "added"},
    {"data/root-owned", "root"},
};

bool write_proc(const char* file, const char* text) {
  int fd = open(file, O_WRONLY | O_CLOEXEC);
  if (fd < 0) return false;
  const bool ok = write(fd, text, strlen(text)) == static_cast<ssize_t>(strlen(text));
  close(fd);
  return ok;
}

// Forks a child that mounts an overlay of `layers` (topmost first) at `target` in a private mount namespace
// (inside a user namespace with `userxattr` when asked) and checks every expectation. Returns the failures
// (as text) or a setup error. The child only makes system calls: everything is prepared before fork().
std::string mount_and_check(const std::vector<std::string>& layers, const fs::path& target, bool in_userns) {
  std::string options = in_userns ? "userxattr,lowerdir=" : "lowerdir=";
  for (std::size_t i = 0; i < layers.size(); ++i) options += (i ? ":" : "") + layers[i];
  std::vector<std::string> paths;
  for (const auto& expectation : kStacked) paths.push_back((target / expectation.path).string());
  const std::string mount_point = target.string();

  pid_t pid = fork();
  if (pid < 0) return "fork failed";
  if (pid == 0) {
    if (in_userns) {
      if (unshare(CLONE_NEWUSER | CLONE_NEWNS) != 0) _exit(101);
      if (!write_proc("/proc/self/setgroups", "deny") || !write_proc("/proc/self/uid_map", "0 0 1\n") ||
          !write_proc("/proc/self/gid_map", "0 0 1\n")) {
        _exit(102);
      }
    } else if (unshare(CLONE_NEWNS) != 0) {
      _exit(101);
    }
    if (mount(nullptr, "/", nullptr, MS_REC | MS_PRIVATE, nullptr) != 0) _exit(103);
    if (mount("overlay", mount_point.c_str(), "overlay", MS_RDONLY, options.c_str()) != 0) _exit(104);
    int failures = 0;
    for (std::size_t i = 0; i < paths.size(); ++i) {
      int fd = open(paths[i].c_str(), O_RDONLY | O_CLOEXEC);
      const char* expected = kStacked[i].content;
      if (expected == nullptr) {
        if (fd >= 0) failures |= 1 << i;
      } else {
        char buffer[64] = {};
        if (fd < 0 || read(fd, buffer, sizeof buffer - 1) != static_cast<ssize_t>(strlen(expected)) ||
            strcmp(buffer, expected) != 0) {
          failures |= 1 << i;
        }
      }
      if (fd >= 0) close(fd);
    }
    _exit(failures);
  }
  int status = 0;
  if (waitpid(pid, &status, 0) != pid || !WIFEXITED(status)) return "child did not exit normally";
  const int code = WEXITSTATUS(status);
  if (code > 100) return "setup step " + std::to_string(code) + " failed";
  std::string failed;
  for (std::size_t i = 0; i < kStacked.size(); ++i) {
    if (code & (1 << i)) failed += kStacked[i].path + (kStacked[i].content ? " (missing or wrong) " : " (visible) ");
  }
  return failed;
}

class OverlayStacking : public ::testing::Test {
 protected:
  void SetUp() override {
    LayoutBuilder layout(tmp_ / "layout");
    layout.write_index({layout.add_image(testing::three_layers())});
    ImageStore store(tmp_ / "store");
    store.import_layout(layout.dir(), "stack:1");
    info_ = store.inspect("stack:1");
    fs::create_directories(tmp_ / "mnt");
  }

  TempDir tmp_;
  ImageInfo info_;
};

TEST_F(OverlayStacking, PlainOverlayMountHonoursWhiteoutsAndOpaqueDirs) {
  EXPECT_EQ(mount_and_check(info_.layer_dirs, tmp_ / "mnt", false), "");
}

TEST_F(OverlayStacking, UserNamespaceOverlayWithUserxattrHonoursThemToo) {
  EXPECT_EQ(mount_and_check(info_.layer_dirs, tmp_ / "mnt", true), "");
}

// The daemon's path: ImageInfo::layer_dirs as SandboxSpec::rootfs_layers (here above the host image's
// skeleton, which provides /bin/sh through its /usr bind).
TEST_F(OverlayStacking, LayerDirsServeAsSandboxRootfsLayers) {
  sandbox::SandboxSpec spec = capsule::testing::host_spec(
      {"/bin/sh", "-c",
       "cat /data/kept /data/replaced /data/added; echo; test -e /data/gone || echo gone-hidden; "
       "stat -c '%u:%g %a' /data/root-owned /data/user-owned"});
  std::vector<std::string> layers = info_.layer_dirs;
  layers.insert(layers.end(), spec.rootfs_layers.begin(), spec.rootfs_layers.end());
  spec.rootfs_layers = layers;
  const sandbox::Result result = capsule::testing::shared_launcher().run(spec);
  EXPECT_EQ(result.status, sandbox::Status::kSucceeded) << result.reason << result.stderr_capture.head;
  EXPECT_EQ(result.stdout_capture.head, "basenewadded\ngone-hidden\n0:0 600\n1000:1000 640\n");
}

}  // namespace
}  // namespace capsule::images
