// tar_in_root: a tree packed and unpacked elsewhere comes back the same, a large tree streams through a pipe,
// and no archive entry (names, symlinks, hard links, special files, limits) gets outside its destination.
#include "sandbox/tar_in_root.h"

#include <archive.h>
#include <archive_entry.h>
#include <fcntl.h>
#include <gtest/gtest.h>
#include <sched.h>
#include <sys/mount.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <filesystem>
#include <map>
#include <memory>
#include <set>
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
using testing::read_host_file;
using testing::reader_of;
using testing::write_host_file;

constexpr UnpackLimits kRoomy{1ull << 30};

struct TarEntry {
  std::string name;
  unsigned type = AE_IFREG;
  std::string content;
  std::string symlink;   // AE_IFLNK target
  std::string hardlink;  // a hard link to this earlier name
  unsigned mode = 0644;
};

TarEntry file(std::string name, std::string content, unsigned mode = 0644) {
  return TarEntry{std::move(name), AE_IFREG, std::move(content), "", "", mode};
}
TarEntry directory(std::string name, unsigned mode = 0755) {
  return TarEntry{std::move(name), AE_IFDIR, "", "", "", mode};
}
TarEntry symlink_to(std::string name, std::string target) {
  return TarEntry{std::move(name), AE_IFLNK, "", std::move(target), "", 0777};
}
TarEntry hard_link(std::string name, std::string existing) {
  return TarEntry{std::move(name), AE_IFREG, "", "", std::move(existing), 0644};
}
TarEntry special(std::string name, unsigned type) { return TarEntry{std::move(name), type, "", "", "", 0644}; }

// An uncompressed pax tar of exactly these entries, built with libarchive as any client would.
std::string make_tar(const std::vector<TarEntry>& entries) {
  std::string out;
  std::unique_ptr<struct archive, int (*)(struct archive*)> tar(archive_write_new(), archive_write_free);
  archive_write_set_format_pax_restricted(tar.get());
  archive_write_open(
      tar.get(), &out, nullptr,
      [](struct archive*, void* self, const void* data, std::size_t size) -> la_ssize_t {
        static_cast<std::string*>(self)->append(static_cast<const char*>(data), size);
        return static_cast<la_ssize_t>(size);
      },
      nullptr);
  for (const TarEntry& spec : entries) {
    std::unique_ptr<struct archive_entry, void (*)(struct archive_entry*)> entry(archive_entry_new(),
                                                                                 archive_entry_free);
    archive_entry_set_pathname(entry.get(), spec.name.c_str());
    archive_entry_set_filetype(entry.get(), spec.type);
    archive_entry_set_perm(entry.get(), spec.mode);
    archive_entry_set_mtime(entry.get(), 1600000000, 0);
    if (spec.type == AE_IFREG && spec.hardlink.empty()) archive_entry_set_size(entry.get(), spec.content.size());
    if (!spec.symlink.empty()) archive_entry_set_symlink(entry.get(), spec.symlink.c_str());
    if (!spec.hardlink.empty()) archive_entry_set_hardlink(entry.get(), spec.hardlink.c_str());
    if (spec.type == AE_IFCHR) archive_entry_set_rdev(entry.get(), makedev(1, 3));
    EXPECT_EQ(archive_write_header(tar.get(), entry.get()), ARCHIVE_OK) << archive_error_string(tar.get());
    if (!spec.content.empty()) archive_write_data(tar.get(), spec.content.data(), spec.content.size());
  }
  archive_write_close(tar.get());
  return out;
}

// The entry names of a tar, in order.
std::vector<std::string> tar_names(const std::string& tar_bytes) {
  std::vector<std::string> names;
  std::unique_ptr<struct archive, int (*)(struct archive*)> tar(archive_read_new(), archive_read_free);
  archive_read_support_format_tar(tar.get());
  EXPECT_EQ(archive_read_open_memory(tar.get(), tar_bytes.data(), tar_bytes.size()), ARCHIVE_OK);
  struct archive_entry* entry = nullptr;
  while (archive_read_next_header(tar.get(), &entry) == ARCHIVE_OK) names.emplace_back(archive_entry_pathname(entry));
  return names;
}

std::string pack_to_string(int root_fd, const std::string& path, TreeCounts* counts = nullptr,
                           const PackLimits& limits = {}) {
  std::string out;
  const TreeCounts got = pack_tree(root_fd, path, [&](std::string_view chunk) { out.append(chunk); }, limits);
  if (counts != nullptr) *counts = got;
  return out;
}

TreeCounts unpack_string(int root_fd, const std::string& dest, const std::string& tar_bytes,
                         const UnpackLimits& limits = kRoomy) {
  return unpack_tree(root_fd, dest, reader_of(tar_bytes, 1000), kOwner, limits);
}

// Every path under `dir` with its type, permission bits, and content and mtime (files) or target (symlinks).
std::string describe_tree(const fs::path& dir) {
  std::set<std::string> lines;
  for (const auto& entry : fs::recursive_directory_iterator(dir)) {
    struct stat st {};
    EXPECT_EQ(lstat(entry.path().c_str(), &st), 0);
    std::ostringstream line;
    line << entry.path().lexically_relative(dir).string() << " type " << (st.st_mode & S_IFMT) << " perm " << std::oct
         << (st.st_mode & 07777) << std::dec;
    if (S_ISREG(st.st_mode)) line << " mtime " << st.st_mtim.tv_sec << " content " << read_host_file(entry.path());
    if (S_ISLNK(st.st_mode)) line << " target " << fs::read_symlink(entry.path()).string();
    lines.insert(line.str());
  }
  std::string text;
  for (const auto& line : lines) text += line + "\n";
  return text;
}

void set_mode(const fs::path& path, mode_t mode) { ASSERT_EQ(chmod(path.c_str(), mode), 0) << path; }

TEST(TarInRoot, TreeRoundTripKeepsModesSymlinksAndEmptyDirs) {
  FakeRoot box;
  const fs::path src = box.root() / "src";
  fs::create_directories(src / "bin");
  fs::create_directories(src / "empty");
  fs::create_directories(src / "a/b/c");
  write_host_file(src / "bin/tool", "#!/bin/sh\necho hi\n");
  write_host_file(src / "secret.key", std::string("\0binary\xff\x01 bytes\0", 17));
  write_host_file(src / "a/b/c/deep.txt", "deep");
  set_mode(src / "bin/tool", 0755);
  set_mode(src / "secret.key", 0600);
  set_mode(src / "empty", 0700);
  fs::create_symlink("../secret.key", src / "bin/relative_link");
  fs::create_symlink("/etc/passwd", src / "absolute_link");
  fs::create_symlink("missing", src / "dangling");

  TreeCounts packed;
  const std::string tar_bytes = pack_to_string(box.fd(), "/src", &packed);
  EXPECT_EQ(packed.files, 3u);
  EXPECT_EQ(packed.dirs, 5u);
  EXPECT_EQ(packed.symlinks, 3u);
  EXPECT_EQ(packed.bytes, 17u + 18u + 4u);
  EXPECT_EQ(packed.skipped, 0u);

  const TreeCounts unpacked = unpack_string(box.fd(), "/restored/here", tar_bytes);
  EXPECT_EQ(unpacked.files, packed.files);
  EXPECT_EQ(unpacked.dirs, packed.dirs);
  EXPECT_EQ(unpacked.symlinks, packed.symlinks);
  EXPECT_EQ(unpacked.bytes, packed.bytes);
  EXPECT_EQ(describe_tree(box.root() / "restored/here"), describe_tree(src));
  for (const auto& entry : fs::recursive_directory_iterator(box.root() / "restored")) {
    struct stat st {};
    ASSERT_EQ(lstat(entry.path().c_str(), &st), 0);
    EXPECT_EQ(st.st_uid, kOwner.uid) << entry.path();
    EXPECT_EQ(st.st_gid, kOwner.gid) << entry.path();
  }
}

// The tar a session serves names owners as the box sees them, as a run's kept layer does (sandbox root 0:0, an id
// outside the box nobody), and carries no setuid or setgid bit for whoever unpacks it to inherit.
TEST(TarInRoot, PackNamesOwnersAsTheBoxSeesThemWithoutSetuidOrSetgid) {
  FakeRoot box;
  const fs::path out = box.root() / "out";
  fs::create_directories(out / "shared");
  write_host_file(out / "suid", "x");
  write_host_file(out / "users", "y");
  write_host_file(out / "foreign", "z");
  ASSERT_EQ(::chown(out.c_str(), 100000, 100000), 0);
  ASSERT_EQ(::chown((out / "suid").c_str(), 100000, 100000), 0);
  ASSERT_EQ(::chown((out / "shared").c_str(), 100000, 101000), 0);
  ASSERT_EQ(::chown((out / "users").c_str(), 101000, 101000), 0);
  ASSERT_EQ(::chown((out / "foreign").c_str(), 5, 5), 0);
  set_mode(out / "suid", 06755);
  set_mode(out / "shared", 03775);
  set_mode(out / "users", 0640);

  struct Shown {
    std::int64_t uid, gid;
    unsigned perm;
  };
  const auto shown = [](const std::string& bytes) {
    std::map<std::string, Shown> entries;
    std::unique_ptr<struct archive, int (*)(struct archive*)> tar(archive_read_new(), archive_read_free);
    archive_read_support_format_tar(tar.get());
    EXPECT_EQ(archive_read_open_memory(tar.get(), bytes.data(), bytes.size()), ARCHIVE_OK);
    struct archive_entry* entry = nullptr;
    while (archive_read_next_header(tar.get(), &entry) == ARCHIVE_OK) {
      const char* user = archive_entry_uname(entry);
      EXPECT_TRUE(user == nullptr || *user == '\0') << "numeric owners only: " << user;
      std::string name = archive_entry_pathname(entry);
      if (name.ends_with('/')) name.pop_back();
      entries[name] = Shown{archive_entry_uid(entry), archive_entry_gid(entry), archive_entry_perm(entry)};
    }
    return entries;
  };
  std::string bytes;
  pack_tree(box.fd(), "out", [&](std::string_view chunk) { bytes.append(chunk); }, {}, IdRange{100000, 65536});
  auto entries = shown(bytes);
  ASSERT_EQ(entries.size(), 4u) << bytes.size();
  EXPECT_EQ(entries["suid"].uid, 0);
  EXPECT_EQ(entries["suid"].gid, 0);
  EXPECT_EQ(entries["suid"].perm, 0755u);
  EXPECT_EQ(entries["shared"].uid, 0);
  EXPECT_EQ(entries["shared"].gid, 1000);
  EXPECT_EQ(entries["shared"].perm, 01775u) << "the sticky bit grants nothing: it stays";
  EXPECT_EQ(entries["users"].uid, 1000);
  EXPECT_EQ(entries["users"].perm, 0640u);
  EXPECT_EQ(entries["foreign"].uid, 65534);
  EXPECT_EQ(entries["foreign"].gid, 65534);

  bytes.clear();  // without a range: host ids as they are, the bits cleared all the same
  pack_tree(box.fd(), "out", [&](std::string_view chunk) { bytes.append(chunk); });
  entries = shown(bytes);
  EXPECT_EQ(entries["suid"].uid, 100000);
  EXPECT_EQ(entries["suid"].perm, 0755u);
  EXPECT_EQ(entries["foreign"].uid, 5);
}

TEST(TarInRoot, PackOfAFileIsOneEntryNamedByIt) {
  FakeRoot box;
  fs::create_directories(box.root() / "work");
  write_host_file(box.root() / "work/report.xml", "<ok/>");
  const std::string tar_bytes = pack_to_string(box.fd(), "work/report.xml");
  EXPECT_EQ(tar_names(tar_bytes), std::vector<std::string>{"report.xml"});
  unpack_string(box.fd(), "copy", tar_bytes);
  EXPECT_EQ(read_host_file(box.root() / "copy/report.xml"), "<ok/>");
}

TEST(TarInRoot, PackStoresSymlinksUnfollowedAndSkipsSpecialFiles) {
  FakeRoot box;
  const fs::path tree = box.root() / "tree";
  fs::create_directories(tree);
  write_host_file(tree / "plain", "p");
  fs::create_symlink(box.outside(), tree / "to_outside");
  fs::create_symlink(box.outside() / "secret", tree / "to_secret");
  ASSERT_EQ(mkfifo((tree / "fifo").c_str(), 0644), 0);
  ASSERT_EQ(mknod((tree / "null").c_str(), S_IFCHR | 0666, makedev(1, 3)), 0);

  TreeCounts counts;
  const std::string tar_bytes = pack_to_string(box.fd(), "tree", &counts);  // a FIFO read would hang here
  std::vector<std::string> names = tar_names(tar_bytes);
  std::sort(names.begin(), names.end());
  EXPECT_EQ(names, (std::vector<std::string>{"plain", "to_outside", "to_secret"}));
  EXPECT_EQ(counts.skipped, 2u);
  EXPECT_EQ(counts.symlinks, 2u);
  EXPECT_EQ(tar_bytes.find("outside bytes"), std::string::npos);
}

// In a child with a mount namespace of its own (the proc mount vanishes with it): mounts proc at <root>/proc
// and packs "/". 0 when the archive lists the proc directory but nothing in it; 10 or 11 when the setup failed.
int pack_root_with_proc_mounted(const FakeRoot& box) {
  if (unshare(CLONE_NEWNS) != 0 || mount(nullptr, "/", nullptr, MS_REC | MS_PRIVATE, nullptr) != 0 ||
      mount("proc", (box.root() / "proc").c_str(), "proc", 0, nullptr) != 0) {
    return 10;
  }
  // Opened after the mount: a descriptor from before still walks the parent namespace's mounts.
  const base::UniqueFd root(open(box.root().c_str(), O_PATH | O_DIRECTORY | O_CLOEXEC));
  if (!root) return 11;
  TreeCounts counts;
  const std::vector<std::string> names = tar_names(pack_to_string(root.get(), "/", &counts));
  const bool proc_listed = std::count(names.begin(), names.end(), "proc/") == 1;  // a directory's name ends in /
  const bool proc_content = std::any_of(names.begin(), names.end(), [](const std::string& name) {
    return name.rfind("proc/", 0) == 0 && name != "proc/";
  });
  const bool kept = std::count(names.begin(), names.end(), "kept") == 1;
  return proc_listed && !proc_content && kept && counts.skipped == 1 ? 0 : 1;
}

// The sandbox's /proc is a kernel interface, not files: a pack of "/" lists the directory, not its content.
TEST(TarInRoot, PackLeavesKernelFilesystemsOut) {
  FakeRoot box;
  fs::create_directories(box.root() / "proc");
  write_host_file(box.root() / "kept", "k");
  EXPECT_EXIT(_exit(pack_root_with_proc_mounted(box)), ::testing::ExitedWithCode(0), "");
}

TEST(TarInRoot, PackLimitsEntriesAndDepth) {
  FakeRoot box;
  fs::create_directories(box.root() / "t/1/2/3");
  write_host_file(box.root() / "t/f", "f");
  EXPECT_EQ(error_code([&] { pack_to_string(box.fd(), "t", nullptr, PackLimits{128, 3}); }), "payload_too_large");
  EXPECT_EQ(error_code([&] { pack_to_string(box.fd(), "t", nullptr, PackLimits{2, 100}); }), "payload_too_large");
  EXPECT_EQ(error_code([&] { pack_to_string(box.fd(), "t", nullptr, PackLimits{3, 5}); }), "no error");
  EXPECT_EQ(error_code([&] { pack_to_string(box.fd(), "../t"); }), "invalid_path");
  ASSERT_EQ(mkfifo((box.root() / "fifo").c_str(), 0644), 0);
  EXPECT_EQ(error_code([&] { pack_to_string(box.fd(), "fifo"); }), "not_a_file");
}

// A 150 MB file is packed into a pipe by one thread and unpacked from it by another: both sides work chunk by
// chunk, so neither the tree nor the archive is ever whole in memory.
TEST(TarInRoot, LargeTreeStreamsThroughAPipe) {
  FakeRoot box;
  constexpr std::uint64_t kSize = 150ull << 20;
  auto byte_at = [](std::uint64_t i) { return static_cast<char>((i * 197 + (i >> 10) * 3 + (i >> 19)) & 0xff); };
  std::vector<char> chunk(64 << 10);
  std::uint64_t produced = 0;
  write_file(
      box.fd(), "big/data.bin",
      [&]() -> std::string_view {
        const std::size_t n = static_cast<std::size_t>(std::min<std::uint64_t>(chunk.size(), kSize - produced));
        for (std::size_t i = 0; i < n; ++i) chunk[i] = byte_at(produced + i);
        produced += n;
        return {chunk.data(), n};
      },
      0640, kOwner, kSize);
  write_host_file(box.root() / "big/small", "s");

  struct rusage before {};
  getrusage(RUSAGE_SELF, &before);
  int pipe_fds[2];  // a socket pair: a send after the reader gave up fails with EPIPE instead of SIGPIPE
  ASSERT_EQ(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, pipe_fds), 0);
  base::UniqueFd read_end(pipe_fds[0]);
  base::UniqueFd write_end(pipe_fds[1]);
  std::string pack_error;
  std::thread packer([&] {
    pack_error = error_code([&] {
      pack_tree(box.fd(), "big", [&](std::string_view piece) {
        while (!piece.empty()) {
          const ssize_t n = send(write_end.get(), piece.data(), piece.size(), MSG_NOSIGNAL);
          if (n < 0) throw std::runtime_error("pipe write");
          piece.remove_prefix(static_cast<std::size_t>(n));
        }
      });
    });
    write_end.reset();
  });
  std::vector<char> buffer(64 << 10);
  TreeCounts counts;
  const std::string unpack_error = error_code([&] {
    counts = unpack_tree(box.fd(), "copy", [&]() -> std::string_view {
      const ssize_t n = read(read_end.get(), buffer.data(), buffer.size());
      if (n < 0) throw std::runtime_error("pipe read");
      return {buffer.data(), static_cast<std::size_t>(n)};
    }, kOwner, UnpackLimits{kSize + 1});
  });
  read_end.reset();
  packer.join();
  EXPECT_EQ(pack_error, "no error");
  EXPECT_EQ(unpack_error, "no error");
  EXPECT_EQ(counts.files, 2u);
  EXPECT_EQ(counts.bytes, kSize + 1);

  const base::UniqueFd copy(open((box.root() / "copy/data.bin").c_str(), O_RDONLY | O_CLOEXEC));
  ASSERT_TRUE(copy);
  std::uint64_t offset = 0;
  std::uint64_t mismatches = 0;
  for (ssize_t n; (n = read(copy.get(), buffer.data(), buffer.size())) > 0;) {
    for (std::size_t i = 0; i < static_cast<std::size_t>(n); ++i) mismatches += buffer[i] != byte_at(offset + i);
    offset += static_cast<std::uint64_t>(n);
  }
  EXPECT_EQ(offset, kSize);
  EXPECT_EQ(mismatches, 0u);
  struct rusage after {};
  getrusage(RUSAGE_SELF, &after);
  EXPECT_LT(after.ru_maxrss - before.ru_maxrss, 64 * 1024) << "KiB of peak memory grown while streaming 150 MB";
}

TEST(TarInRootEscape, EntryNamesCannotLeaveTheDestination) {
  FakeRoot box;
  const std::string before = box.outside_state();
  for (const std::string name : {"../outside/evil", "/outside/evil", "a/../../outside/evil", "./../evil", "/etc/x"}) {
    EXPECT_EQ(error_code([&] { unpack_string(box.fd(), "dest", make_tar({file(name, "x")})); }), "invalid_path")
        << name;
    EXPECT_EQ(error_code([&] { unpack_string(box.fd(), "dest", make_tar({file("h", "x"), hard_link("l", name)})); }),
              "invalid_path")
        << "hard link to " << name;
  }
  EXPECT_EQ(box.outside_state(), before);
  EXPECT_FALSE(fs::exists(box.root() / "dest/evil"));
  EXPECT_FALSE(fs::exists(box.root() / "outside"));
  EXPECT_FALSE(fs::exists(box.root() / "etc"));
}

TEST(TarInRootEscape, NoEntryGoesThroughASymlinkAnEarlierEntryMade) {
  FakeRoot box;
  const std::string before = box.outside_state();
  EXPECT_EQ(error_code([&] {
              unpack_string(box.fd(), "dest",
                            make_tar({symlink_to("a", box.outside().string()), file("a/b", "through the link")}));
            }),
            "not_a_file");
  EXPECT_EQ(error_code([&] {
              unpack_string(box.fd(), "dest", make_tar({symlink_to("c", "../../../outside"), directory("c/d")}));
            }),
            "not_a_file");
  EXPECT_EQ(error_code([&] {
              unpack_string(box.fd(), "dest",
                            make_tar({symlink_to("e", box.outside().string()), hard_link("f", "e/secret")}));
            }),
            "not_a_file");
  EXPECT_EQ(box.outside_state(), before);
  EXPECT_TRUE(fs::is_symlink(box.root() / "dest/a")) << "the symlink itself was made, as given";
  EXPECT_EQ(fs::read_symlink(box.root() / "dest/a"), box.outside());
}

TEST(TarInRootEscape, SymlinksAlreadyInTheSandboxAreNotFollowedEither) {
  FakeRoot box;
  const std::string before = box.outside_state();
  fs::create_directories(box.root() / "dest");
  fs::create_symlink(box.outside(), box.root() / "dest/planted");
  fs::create_symlink(box.outside() / "secret", box.root() / "dest/secret_link");
  fs::create_symlink(box.outside(), box.root() / "dest_link");

  EXPECT_EQ(error_code([&] { unpack_string(box.fd(), "dest", make_tar({file("planted/x", "x")})); }),
            "not_a_file");
  // An entry named like the planted link replaces the link; nothing is written through it.
  unpack_string(box.fd(), "dest", make_tar({file("secret_link", "mine")}));
  EXPECT_EQ(read_host_file(box.root() / "dest/secret_link"), "mine");
  EXPECT_FALSE(fs::is_symlink(box.root() / "dest/secret_link"));
  // The destination itself resolves inside the root, where that link dangles.
  EXPECT_EQ(error_code([&] { unpack_string(box.fd(), "dest_link", make_tar({file("x", "x")})); }),
            "not_found");
  EXPECT_EQ(box.outside_state(), before);
}

TEST(TarInRootEscape, HardLinksOnlyToEntriesInside) {
  FakeRoot box;
  const TreeCounts counts =
      unpack_string(box.fd(), "dest", make_tar({file("sub/f", "shared"), hard_link("again/h", "sub/f")}));
  EXPECT_EQ(counts.files, 2u);
  struct stat original {};
  struct stat link {};
  ASSERT_EQ(lstat((box.root() / "dest/sub/f").c_str(), &original), 0);
  ASSERT_EQ(lstat((box.root() / "dest/again/h").c_str(), &link), 0);
  EXPECT_EQ(original.st_ino, link.st_ino);
  EXPECT_EQ(error_code([&] { unpack_string(box.fd(), "dest2", make_tar({directory("d"), hard_link("h", "d")})); }),
            "not_a_file");
  EXPECT_EQ(error_code([&] { unpack_string(box.fd(), "dest3", make_tar({hard_link("h", "missing")})); }),
            "not_found");
}

TEST(TarInRootEscape, DevicesAndFifosAreRefused) {
  FakeRoot box;
  EXPECT_EQ(error_code([&] { unpack_string(box.fd(), "d", make_tar({special("fifo", AE_IFIFO)})); }),
            "invalid_archive");
  EXPECT_EQ(error_code([&] { unpack_string(box.fd(), "d", make_tar({special("null", AE_IFCHR)})); }),
            "invalid_archive");
  EXPECT_EQ(error_code([&] { unpack_string(box.fd(), "d", make_tar({special("sda", AE_IFBLK)})); }),
            "invalid_archive");
  EXPECT_TRUE(fs::is_empty(box.root() / "d"));
}

TEST(TarInRootEscape, ModesAreMaskedAndTheOwnerApplied) {
  FakeRoot box;
  unpack_string(box.fd(), "/",
                make_tar({file("setuid", "x", 04755), directory("sticky", 01777), directory("setgid_dir/", 02750),
                          symlink_to("setgid_dir/link", "/bin/sh")}));
  struct stat st {};
  ASSERT_EQ(lstat((box.root() / "setuid").c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 07777, 0755u);
  EXPECT_EQ(st.st_uid, kOwner.uid);
  EXPECT_EQ(st.st_mtim.tv_sec, 1600000000);
  ASSERT_EQ(lstat((box.root() / "sticky").c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 07777, 0777u);
  ASSERT_EQ(lstat((box.root() / "setgid_dir").c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 07777, 0750u);
  ASSERT_EQ(lstat((box.root() / "setgid_dir/link").c_str(), &st), 0);
  EXPECT_EQ(st.st_uid, kOwner.uid);
  EXPECT_EQ(st.st_gid, kOwner.gid);
}

TEST(TarInRootEscape, BrokenArchivesAreInvalid) {
  FakeRoot box;
  const std::string good = make_tar({file("file", std::string(5000, 'z'))});
  EXPECT_EQ(error_code([&] { unpack_string(box.fd(), "d", "this is not a tar archive at all"); }),
            "invalid_archive");
  EXPECT_EQ(error_code([&] { unpack_string(box.fd(), "d", std::string(3000, '\x07')); }), "invalid_archive");
  EXPECT_EQ(error_code([&] { unpack_string(box.fd(), "d", ""); }), "invalid_archive");
  EXPECT_EQ(error_code([&] { unpack_string(box.fd(), "d", good.substr(0, 512 + 2000)); }), "invalid_archive")
      << "cut inside the file's data";
  EXPECT_TRUE(fs::is_empty(box.root() / "d")) << "a cut file is never renamed into place";
  EXPECT_EQ(error_code([&] { unpack_string(box.fd(), "d", good); }), "no error");
}

TEST(TarInRootEscape, LimitsOnBytesEntriesAndNames) {
  FakeRoot box;
  const std::string three = make_tar({file("a", "1234"), file("b", "5678"), file("c", "9")});
  EXPECT_EQ(error_code([&] { unpack_string(box.fd(), "bytes", three, UnpackLimits{8}); }), "payload_too_large");
  EXPECT_EQ(std::distance(fs::directory_iterator(box.root() / "bytes"), fs::directory_iterator{}), 2)
      << "the files within the limit, and no partial one";
  EXPECT_EQ(error_code([&] { unpack_string(box.fd(), "entries", three, UnpackLimits{100, 2}); }),
            "payload_too_large");
  EXPECT_EQ(error_code([&] { unpack_string(box.fd(), "exact", three, UnpackLimits{9, 3}); }), "no error");
  EXPECT_EQ(error_code([&] {
              unpack_string(box.fd(), "names", make_tar({file(std::string(40, 'n'), "x")}),
                            UnpackLimits{100, 10, 32});
            }),
            "invalid_path");
  EXPECT_EQ(error_code([&] {
              unpack_string(box.fd(), "targets", make_tar({symlink_to("l", std::string(40, 't'))}),
                            UnpackLimits{100, 10, 32});
            }),
            "invalid_path");
}

// While a thread swaps a directory with a symlink to the outside, packs of the root never contain the
// outside's bytes and unpacks into the directory never change the outside.
TEST(TarInRootRace, SwappedDirectoryNeverReachesOutside) {
  FakeRoot box;
  fs::create_directories(box.root() / "dir");
  write_host_file(box.root() / "dir/f", "inside");
  fs::create_symlink(box.outside(), box.root() / "link");
  const std::string before = box.outside_state();
  const std::string archive = make_tar({file("f", "unpacked"), file("sub/g", "unpacked")});

  std::atomic<bool> stop{false};
  std::atomic<std::uint64_t> swaps{0};
  std::thread swapper([&] {
    while (!stop.load()) {
      if (renameat2(box.fd(), "dir", box.fd(), "link", RENAME_EXCHANGE) == 0) ++swaps;
    }
  });
  std::vector<std::string> unexpected;
  for (int i = 0; i < 500; ++i) {
    std::string packed;
    const std::string pack_code = error_code([&] { packed = pack_to_string(box.fd(), "/"); });
    if (pack_code != "no error") unexpected.push_back("pack: " + pack_code);
    if (packed.find("outside bytes") != std::string::npos) unexpected.push_back("pack read the outside");
    const std::string unpack_code = error_code([&] { unpack_string(box.fd(), "dir", archive); });
    if (unpack_code != "no error" && unpack_code != "not_found") unexpected.push_back("unpack: " + unpack_code);
  }
  stop = true;
  swapper.join();

  EXPECT_EQ(box.outside_state(), before);
  EXPECT_TRUE(unexpected.empty()) << unexpected.size() << " unexpected, first: " << unexpected.front();
  EXPECT_GT(swaps.load(), 0u);
}

TEST(TarInRoot, ReaderErrorsPropagate) {
  FakeRoot box;
  EXPECT_EQ(error_code([&] {
              unpack_tree(
                  box.fd(), "d", []() -> std::string_view { throw base::Error("conflict", "client went away"); },
                  kOwner, kRoomy);
            }),
            "conflict");
}

}  // namespace
}  // namespace capsule::sandbox
