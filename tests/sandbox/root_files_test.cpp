// root_files: round trips through write_file / open_for_read, and every way a hostile path or a hostile
// sandbox tree might reach outside the root ("..", planted symlinks, FIFOs, a dir swapped for a symlink).
#include "sandbox/root_files.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/un.h>
#include <unistd.h>

#include <atomic>
#include <cstdio>
#include <filesystem>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "base/error.h"
#include "tests/sandbox/root_fixture.h"

namespace capsule::sandbox {
namespace {

namespace fs = std::filesystem;
using testing::error_code;
using testing::FakeRoot;
using testing::kOwner;
using testing::read_fd_to_end;
using testing::read_host_file;
using testing::reader_of;
using testing::write_host_file;

constexpr std::uint64_t kNoLimit = UINT64_MAX;

std::string all_byte_values() {
  std::string bytes;
  for (int round = 0; round < 3; ++round) {
    for (int value = 0; value < 256; ++value) bytes.push_back(static_cast<char>(value));
  }
  return bytes;
}

struct stat lstat_of(const fs::path& path) {
  struct stat st {};
  EXPECT_EQ(lstat(path.c_str(), &st), 0) << path;
  return st;
}

std::string read_in_root(int root_fd, const std::string& path) {
  OpenedFile opened = open_for_read(root_fd, path);
  return read_fd_to_end(opened.fd.get());
}

TEST(RootFilesPath, NormalizesToARelativePath) {
  EXPECT_EQ(normalize_sandbox_path("/a//b/./c"), "a/b/c");
  EXPECT_EQ(normalize_sandbox_path("a/b/"), "a/b");
  EXPECT_EQ(normalize_sandbox_path("./a"), "a");
  EXPECT_EQ(normalize_sandbox_path("/"), ".");
  EXPECT_EQ(normalize_sandbox_path("//./"), ".");
  EXPECT_EQ(normalize_sandbox_path("a..b/...") , "a..b/...");
}

TEST(RootFilesPath, RefusesDotDotNulEmptyAndOverlong) {
  for (const std::string path : {"", "..", "/../etc", "a/../../b", "a/..", "/work/../../etc/passwd"}) {
    EXPECT_EQ(error_code([&] { normalize_sandbox_path(path); }), "invalid_path") << path;
  }
  EXPECT_EQ(error_code([] { normalize_sandbox_path(std::string("a\0b", 3)); }), "invalid_path");
  EXPECT_EQ(error_code([] { normalize_sandbox_path(std::string(PATH_MAX, 'a')); }), "invalid_path");
  EXPECT_EQ(error_code([] { normalize_sandbox_path(std::string(NAME_MAX + 1, 'a')); }), "invalid_path");
  EXPECT_EQ(error_code([] { normalize_sandbox_path("x/" + std::string(NAME_MAX, 'a')); }), "no error");
  try {
    normalize_sandbox_path("/work/../etc");
    FAIL() << "no error";
  } catch (const base::Error& error) {
    EXPECT_NE(std::string(error.what()).find("/work/../etc"), std::string::npos) << error.what();
  }
}

TEST(RootFiles, BinaryRoundTripWithModeAndOwner) {
  FakeRoot box;
  const std::string bytes = all_byte_values();
  EXPECT_EQ(write_file(box.fd(), "/work/deep/er/data.bin", reader_of(bytes), 04750, kOwner, kNoLimit),
            bytes.size());

  EXPECT_EQ(read_in_root(box.fd(), "work/deep/er/data.bin"), bytes);
  const struct stat file = lstat_of(box.root() / "work/deep/er/data.bin");
  EXPECT_EQ(file.st_mode & 07777, 0750u) << "setuid is never kept";
  EXPECT_EQ(file.st_uid, kOwner.uid);
  EXPECT_EQ(file.st_gid, kOwner.gid);
  for (const char* dir : {"work", "work/deep", "work/deep/er"}) {
    const struct stat st = lstat_of(box.root() / dir);
    EXPECT_TRUE(S_ISDIR(st.st_mode)) << dir;
    EXPECT_EQ(st.st_mode & 07777, 0755u) << dir;
    EXPECT_EQ(st.st_uid, kOwner.uid) << dir;
  }
  // Nothing but the file is left in its directory (no temporary name).
  EXPECT_EQ(std::distance(fs::directory_iterator(box.root() / "work/deep/er"), fs::directory_iterator{}), 1);
}

TEST(RootFiles, ReplacingKeepsNoOldBytesAndAnEmptySourceMakesAnEmptyFile) {
  FakeRoot box;
  write_file(box.fd(), "f", reader_of("a longer first version"), 0644, kOwner, kNoLimit);
  write_file(box.fd(), "f", reader_of("short"), 0600, kOwner, kNoLimit);
  EXPECT_EQ(read_in_root(box.fd(), "/f"), "short");
  EXPECT_EQ(lstat_of(box.root() / "f").st_mode & 0777, 0600u);
  EXPECT_EQ(write_file(box.fd(), "empty", reader_of(""), 0644, kOwner, kNoLimit), 0u);
  EXPECT_EQ(read_in_root(box.fd(), "empty"), "");
}

TEST(RootFiles, SetsTheGivenMtime) {
  FakeRoot box;
  write_file(box.fd(), "old", reader_of("x"), 0644, kOwner, kNoLimit, timespec{1000000000, 5});
  EXPECT_EQ(lstat_of(box.root() / "old").st_mtim.tv_sec, 1000000000);
}

TEST(RootFiles, OpenForReadGivesADirectoryToo) {
  FakeRoot box;
  make_dirs(box.fd(), "/a/b", kOwner);
  OpenedFile opened = open_for_read(box.fd(), "/a");
  EXPECT_TRUE(S_ISDIR(opened.st.st_mode));
  struct stat st {};
  ASSERT_EQ(fstatat(opened.fd.get(), "b", &st, 0), 0) << "a usable directory descriptor";
  EXPECT_TRUE(S_ISDIR(open_for_read(box.fd(), "/").st.st_mode));
}

TEST(RootFiles, LimitIsEnforcedAndLeavesNothingBehind) {
  FakeRoot box;
  write_host_file(box.root() / "kept", "old");
  EXPECT_EQ(error_code([&] { write_file(box.fd(), "kept", reader_of("12345678901"), 0644, kOwner, 10); }),
            "payload_too_large");
  EXPECT_EQ(error_code([&] { write_file(box.fd(), "new", reader_of("12345678901"), 0644, kOwner, 10); }),
            "payload_too_large");
  EXPECT_EQ(read_host_file(box.root() / "kept"), "old");
  EXPECT_FALSE(fs::exists(box.root() / "new"));
  EXPECT_EQ(std::distance(fs::directory_iterator(box.root()), fs::directory_iterator{}), 1);
  EXPECT_EQ(write_file(box.fd(), "exact", reader_of("1234567890"), 0644, kOwner, 10), 10u);
}

TEST(RootFiles, ErrorsForMissingAndWrongKinds) {
  FakeRoot box;
  make_dirs(box.fd(), "dir", kOwner);
  write_host_file(box.root() / "file", "x");
  fs::create_symlink("nowhere", box.root() / "dangling");
  EXPECT_EQ(error_code([&] { open_for_read(box.fd(), "missing"); }), "not_found");
  EXPECT_EQ(error_code([&] { open_for_read(box.fd(), "dangling"); }), "not_found");
  EXPECT_EQ(error_code([&] { open_for_read(box.fd(), "file/x"); }), "not_a_file");
  EXPECT_EQ(error_code([&] { write_file(box.fd(), "dir", reader_of("x"), 0644, kOwner, kNoLimit); }), "not_a_file");
  EXPECT_EQ(error_code([&] { write_file(box.fd(), "/", reader_of("x"), 0644, kOwner, kNoLimit); }), "not_a_file");
  EXPECT_EQ(error_code([&] { write_file(box.fd(), "file/x", reader_of("x"), 0644, kOwner, kNoLimit); }),
            "not_a_file");
  EXPECT_EQ(error_code([&] { make_dirs(box.fd(), "file", kOwner); }), "not_a_file");
  EXPECT_EQ(error_code([&] { make_dirs(box.fd(), "dangling/sub", kOwner); }), "not_found")
      << "a dangling symlink's target is not created";
  EXPECT_EQ(error_code([&] { write_file(box.fd(), "a/../b", reader_of("x"), 0644, kOwner, kNoLimit); }),
            "invalid_path");
}

TEST(RootFiles, SymlinkLoopIsNotAFile) {
  FakeRoot box;
  fs::create_symlink("loop", box.root() / "loop");
  EXPECT_EQ(error_code([&] { open_for_read(box.fd(), "loop"); }), "not_a_file");
  EXPECT_EQ(error_code([&] { make_dirs(box.fd(), "loop/x", kOwner); }), "not_a_file");
}

TEST(RootFilesEscape, DotDotNeverResolves) {
  FakeRoot box;
  const std::string before = box.outside_state();
  for (const std::string path : {"../outside/secret", "/../outside/secret", "/../../etc/passwd", "a/../../outside"}) {
    EXPECT_EQ(error_code([&] { open_for_read(box.fd(), path); }), "invalid_path") << path;
    EXPECT_EQ(error_code([&] { write_file(box.fd(), path, reader_of("x"), 0644, kOwner, kNoLimit); }),
              "invalid_path")
        << path;
    EXPECT_EQ(error_code([&] { make_dirs(box.fd(), path, kOwner); }), "invalid_path") << path;
  }
  EXPECT_EQ(box.outside_state(), before);
  EXPECT_TRUE(fs::is_empty(box.root()));
}

TEST(RootFilesEscape, PlantedSymlinkToHostEtcResolvesInsideTheRoot) {
  FakeRoot box;
  fs::create_symlink("/etc", box.root() / "etc_link");
  fs::create_symlink("../../../../../../../../etc/passwd", box.root() / "passwd_link");
  fs::create_symlink("/proc/self/root/etc/passwd", box.root() / "via_proc");
  EXPECT_EQ(error_code([&] { open_for_read(box.fd(), "etc_link/passwd"); }), "not_found");
  EXPECT_EQ(error_code([&] { open_for_read(box.fd(), "passwd_link"); }), "not_found");
  EXPECT_EQ(error_code([&] { open_for_read(box.fd(), "via_proc"); }), "not_found");

  fs::create_directories(box.root() / "etc");
  write_host_file(box.root() / "etc/passwd", "the sandbox's passwd");
  EXPECT_EQ(read_in_root(box.fd(), "etc_link/passwd"), "the sandbox's passwd");
  EXPECT_EQ(read_in_root(box.fd(), "passwd_link"), "the sandbox's passwd");
}

TEST(RootFilesEscape, WritesThroughPlantedSymlinksStayInsideTheRoot) {
  FakeRoot box;
  const std::string before = box.outside_state();
  fs::create_symlink(box.outside(), box.root() / "absolute");
  fs::create_symlink("../outside", box.root() / "relative");
  fs::create_symlink(box.outside() / "secret", box.root() / "secret_link");

  // The links dangle inside the root, and a dangling link's target is never created.
  for (const char* path : {"absolute/new", "relative/new"}) {
    EXPECT_EQ(error_code([&] { write_file(box.fd(), path, reader_of("in"), 0644, kOwner, kNoLimit); }), "not_found")
        << path;
  }
  EXPECT_EQ(error_code([&] { make_dirs(box.fd(), "absolute/made", kOwner); }), "not_found");
  // With the targets' names made inside the root, that is where the writes land.
  const fs::path inside_absolute = box.root() / box.outside().relative_path();
  fs::create_directories(inside_absolute);
  fs::create_directories(box.root() / "outside");
  write_file(box.fd(), "absolute/new", reader_of("in"), 0644, kOwner, kNoLimit);
  write_file(box.fd(), "relative/new", reader_of("in"), 0644, kOwner, kNoLimit);
  make_dirs(box.fd(), "absolute/made/dirs", kOwner);
  // The last component is replaced by the rename, never written through.
  write_file(box.fd(), "secret_link", reader_of("replaced"), 0644, kOwner, kNoLimit);

  EXPECT_EQ(box.outside_state(), before);
  EXPECT_EQ(read_host_file(inside_absolute / "new"), "in");
  EXPECT_TRUE(fs::is_directory(inside_absolute / "made/dirs"));
  EXPECT_EQ(read_host_file(box.root() / "outside/new"), "in") << "\"..\" from the root stays at the root";
  EXPECT_TRUE(S_ISREG(lstat_of(box.root() / "secret_link").st_mode));
  EXPECT_EQ(read_host_file(box.root() / "secret_link"), "replaced");
}

TEST(RootFilesEscape, FifoSocketAndDeviceAreRefusedWithoutOpeningThem) {
  FakeRoot box;
  ASSERT_EQ(mkfifo((box.root() / "fifo").c_str(), 0644), 0);
  ASSERT_EQ(mknod((box.root() / "null").c_str(), S_IFCHR | 0666, makedev(1, 3)), 0);
  const base::UniqueFd listener(socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0));
  sockaddr_un address{};
  address.sun_family = AF_UNIX;
  const std::string socket_path = (box.root() / "sock").string();
  ASSERT_LT(socket_path.size(), sizeof address.sun_path);
  socket_path.copy(address.sun_path, socket_path.size());
  ASSERT_EQ(bind(listener.get(), reinterpret_cast<sockaddr*>(&address), sizeof address), 0);
  fs::create_symlink("fifo", box.root() / "to_fifo");

  // A FIFO without a writer would block a plain open forever: this returns at once with the error.
  for (const char* path : {"fifo", "to_fifo", "null", "sock"}) {
    EXPECT_EQ(error_code([&] { open_for_read(box.fd(), path); }), "not_a_file") << path;
  }
  // A write replaces the FIFO's name with a regular file; nothing is written into the FIFO.
  write_file(box.fd(), "fifo", reader_of("now a file"), 0644, kOwner, kNoLimit);
  EXPECT_TRUE(S_ISREG(lstat_of(box.root() / "fifo").st_mode));
  EXPECT_EQ(read_in_root(box.fd(), "to_fifo"), "now a file");
}

// Where the first cgroup (v1 or v2) hierarchy is mounted, from /proc/self/mounts.
std::string cgroup_mount_point() {
  std::istringstream mounts(read_host_file("/proc/self/mounts"));
  std::string device, point, type, rest;
  while (mounts >> device >> point >> type && std::getline(mounts, rest)) {
    if (type == "cgroup" || type == "cgroup2") return point;
  }
  return "";
}

TEST(RootFilesEscape, KernelFilesystemsAreForbidden) {
  const base::UniqueFd proc(open("/proc", O_PATH | O_DIRECTORY | O_CLOEXEC));
  ASSERT_TRUE(proc);
  EXPECT_EQ(error_code([&] { open_for_read(proc.get(), "cpuinfo"); }), "forbidden");
  EXPECT_EQ(error_code([&] { open_for_read(proc.get(), "self"); }), "forbidden");
  EXPECT_EQ(error_code([&] { open_for_read(proc.get(), "self/root"); }), "not_a_file")
      << "a magic link is not followed";
  EXPECT_EQ(error_code([&] { write_file(proc.get(), "sys/x", reader_of("1"), 0644, kOwner, kNoLimit); }),
            "forbidden");
  // In a cgroup filesystem a mkdir would create a cgroup: refused before it is tried.
  const std::string cgroup = cgroup_mount_point();
  ASSERT_FALSE(cgroup.empty()) << "no cgroup or cgroup2 mount";
  const base::UniqueFd cgroup_fd(open(cgroup.c_str(), O_PATH | O_DIRECTORY | O_CLOEXEC));
  ASSERT_TRUE(cgroup_fd);
  EXPECT_EQ(error_code([&] { make_dirs(cgroup_fd.get(), "capsule-root-files-test", kOwner); }), "forbidden");
  EXPECT_FALSE(fs::exists(cgroup + "/capsule-root-files-test"));
}

// A 200 MB file generated chunk by chunk goes in and comes back byte for byte, never whole in memory.
TEST(RootFiles, LargeFileStreamsInConstantMemory) {
  FakeRoot box;
  constexpr std::uint64_t kSize = 200ull << 20;
  constexpr std::size_t kChunk = 64 << 10;
  auto byte_at = [](std::uint64_t i) { return static_cast<char>((i * 131 + (i >> 9) * 7 + (i >> 17)) & 0xff); };
  std::vector<char> chunk(kChunk);
  std::uint64_t produced = 0;
  const ByteReader generator = [&]() -> std::string_view {
    const std::size_t n = static_cast<std::size_t>(std::min<std::uint64_t>(kChunk, kSize - produced));
    for (std::size_t i = 0; i < n; ++i) chunk[i] = byte_at(produced + i);
    produced += n;
    return {chunk.data(), n};
  };
  struct rusage before {};
  getrusage(RUSAGE_SELF, &before);
  EXPECT_EQ(write_file(box.fd(), "/big/file", generator, 0644, kOwner, kSize), kSize);

  OpenedFile opened = open_for_read(box.fd(), "big/file");
  EXPECT_EQ(static_cast<std::uint64_t>(opened.st.st_size), kSize);
  std::uint64_t offset = 0;
  std::uint64_t mismatches = 0;
  for (;;) {
    const ssize_t n = read(opened.fd.get(), chunk.data(), chunk.size());
    ASSERT_GE(n, 0);
    if (n == 0) break;
    for (std::size_t i = 0; i < static_cast<std::size_t>(n); ++i) mismatches += chunk[i] != byte_at(offset + i);
    offset += static_cast<std::uint64_t>(n);
  }
  EXPECT_EQ(offset, kSize);
  EXPECT_EQ(mismatches, 0u);
  struct rusage after {};
  getrusage(RUSAGE_SELF, &after);
  EXPECT_LT(after.ru_maxrss - before.ru_maxrss, 64 * 1024) << "KiB of peak memory grown while streaming 200 MB";
}

// A thread swaps a directory with a symlink to the outside (absolute and relative in turn) while writes and
// reads go through it 2000 times each: whatever they hit, nothing outside is ever read or changed.
TEST(RootFilesRace, DirectorySwappedForSymlinkNeverReachesOutside) {
  FakeRoot box;
  fs::create_directories(box.root() / "dir");
  write_host_file(box.root() / "dir/f", "inside");
  fs::create_symlink(box.outside(), box.root() / "absolute");
  fs::create_symlink("../outside", box.root() / "relative");
  const std::string before = box.outside_state();

  std::atomic<bool> stop{false};
  std::atomic<std::uint64_t> swaps{0};
  std::thread swapper([&] {
    const int root = box.fd();
    while (!stop.load()) {
      const char* link = swaps.load() % 4 < 2 ? "absolute" : "relative";
      if (renameat2(root, "dir", root, link, RENAME_EXCHANGE) == 0) ++swaps;
    }
  });

  std::vector<std::string> unexpected;
  std::uint64_t writes_ok = 0;
  std::uint64_t reads_ok = 0;
  for (int i = 0; i < 2000; ++i) {
    const std::string write_code = error_code([&] {
      write_file(box.fd(), i % 2 == 0 ? "dir/f" : "dir/sub/g", reader_of("inside"), 0644, kOwner, kNoLimit);
    });
    if (write_code == "no error") ++writes_ok;
    else if (write_code != "not_found") unexpected.push_back("write: " + write_code);

    std::string content;
    const std::string read_code = error_code([&] { content = read_in_root(box.fd(), "dir/f"); });
    if (read_code == "no error") {
      ++reads_ok;
      if (content != "inside") unexpected.push_back("read: " + content);
    } else if (read_code != "not_found") {
      unexpected.push_back("read: " + read_code);
    }
  }
  stop = true;
  swapper.join();

  EXPECT_EQ(box.outside_state(), before);
  EXPECT_TRUE(unexpected.empty()) << unexpected.size() << " unexpected, first: " << unexpected.front();
  EXPECT_GT(swaps.load(), 0u);
  EXPECT_GT(writes_ok + reads_ok, 0u);
  EXPECT_FALSE(fs::exists(box.root() / "outside")) << "the relative link resolved at the root, never created";
}

}  // namespace
}  // namespace capsule::sandbox
