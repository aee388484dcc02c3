// pack_upper_layer: an overlayfs upper dir as an OCI layer tar — whiteouts, opaque dirs, symlinks kept as
// links, hard links, modes, owners shifted into the sandbox's view, the size cap and byte-for-byte determinism.
#include "images/upper_layer.h"

#include <fcntl.h>
#include <archive.h>
#include <archive_entry.h>
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/xattr.h>
#include <unistd.h>

#include <map>

#include "base/unique_fd.h"
#include "images/tar_pack.h"
#include "tests/images/fixtures.h"

namespace capsule::images {
namespace {

namespace fs = std::filesystem;
using testing::TempDir;
using testing::write_file;

struct Seen {
  char type = '?';
  unsigned mode = 0;
  std::int64_t uid = -1, gid = -1, mtime = 0;
  std::string data, link, hardlink;
};

// Every entry of a plain tar, by path.
std::map<std::string, Seen> entries_of(const fs::path& tar) {
  std::map<std::string, Seen> seen;
  struct archive* a = archive_read_new();
  archive_read_support_format_tar(a);
  EXPECT_EQ(archive_read_open_filename(a, tar.c_str(), 10240), ARCHIVE_OK);
  archive_entry* entry;
  while (archive_read_next_header(a, &entry) == ARCHIVE_OK) {
    Seen s;
    const auto type = archive_entry_filetype(entry);
    s.type = type == AE_IFDIR ? 'd' : type == AE_IFLNK ? 'l' : type == AE_IFREG ? 'f' : '?';
    s.mode = archive_entry_perm(entry);
    s.uid = archive_entry_uid(entry);
    s.gid = archive_entry_gid(entry);
    s.mtime = archive_entry_mtime(entry);
    if (archive_entry_symlink(entry)) s.link = archive_entry_symlink(entry);
    if (archive_entry_hardlink(entry)) s.hardlink = archive_entry_hardlink(entry);
    char buffer[4096];
    for (la_ssize_t n; (n = archive_read_data(a, buffer, sizeof buffer)) > 0;) s.data.append(buffer, n);
    std::string path = archive_entry_pathname(entry);
    if (path.ends_with('/')) path.pop_back();
    seen[path] = s;
  }
  archive_read_free(a);
  return seen;
}

class UpperLayerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    const fs::path u = upper_.path();
    fs::create_directories(u / "target/classes");
    write_file(u / "target/classes/A.class", "cafebabe");
    chmod((u / "target/classes/A.class").c_str(), 0640);
    write_file(u / "run.sh", "#!/bin/sh\n");
    chmod((u / "run.sh").c_str(), 0755);
    fs::create_symlink("/etc/shadow", u / "escape");
    fs::create_hard_link(u / "run.sh", u / "run-link.sh");
    ASSERT_EQ(mknod((u / "deleted").c_str(), S_IFCHR | 0000, makedev(0, 0)), 0);
    fs::create_directories(u / "replaced");
    write_file(u / "replaced/new", "n");
    ASSERT_EQ(setxattr((u / "replaced").c_str(), "trusted.overlay.opaque", "y", 1, 0), 0);
    // Owned by sandbox uid 1000 (host 101000) and by a host id outside the sandbox's range.
    ASSERT_EQ(lchown((u / "run.sh").c_str(), 101000, 101000), 0);
    ASSERT_EQ(lchown((u / "target").c_str(), 5, 5), 0);
  }

  UpperLayerOptions options() const {
    UpperLayerOptions o;
    o.id_base = 100000;
    o.id_count = 65536;
    o.epoch = 1700000000;
    return o;
  }

  TempDir upper_, store_dir_;
  store::BlobStore blobs_{store_dir_.path()};
};

TEST_F(UpperLayerTest, WhiteoutsOpaqueDirsLinksModesAndOwnersInOciForm) {
  const auto layer = pack_upper_layer(upper_.path(), blobs_, options());
  ASSERT_TRUE(layer);
  EXPECT_EQ(layer->size, blobs_.size(layer->digest));
  EXPECT_EQ(store::sha256_of(testing::read_file(blobs_.path(layer->digest))), layer->digest);
  const auto seen = entries_of(blobs_.path(layer->digest));
  EXPECT_EQ(layer->files, seen.size());

  ASSERT_TRUE(seen.count(".wh.deleted"));
  EXPECT_EQ(seen.at(".wh.deleted").type, 'f');
  EXPECT_EQ(seen.at(".wh.deleted").data, "");
  EXPECT_FALSE(seen.count("deleted"));
  ASSERT_TRUE(seen.count("replaced/.wh..wh..opq"));
  EXPECT_EQ(seen.at("replaced/new").data, "n");

  EXPECT_EQ(seen.at("escape").type, 'l');
  EXPECT_EQ(seen.at("escape").link, "/etc/shadow");  // stored as a link, never followed
  // Sorted bytewise, "run-link.sh" comes first and carries the data; "run.sh" links to it.
  EXPECT_EQ(seen.at("run-link.sh").data, "#!/bin/sh\n");
  EXPECT_EQ(seen.at("run.sh").hardlink, "run-link.sh");
  EXPECT_EQ(seen.at("run.sh").mode, 0755u);
  EXPECT_EQ(seen.at("target/classes/A.class").mode, 0640u);

  EXPECT_EQ(seen.at("run.sh").uid, 1000);  // host 101000 is sandbox uid 1000
  EXPECT_EQ(seen.at("run.sh").gid, 1000);
  EXPECT_EQ(seen.at("target").uid, 65534);  // outside the sandbox's range: nobody
  EXPECT_LE(seen.at("run.sh").mtime, 1700000000);
}

TEST_F(UpperLayerTest, TheSameTreeGivesTheSameDigest) {
  const auto first = pack_upper_layer(upper_.path(), blobs_, options());
  // Touching mtimes past the clamp and repacking changes nothing.
  const struct timespec later[2] = {{2000000000, 0}, {2000000000, 0}};
  ASSERT_EQ(utimensat(AT_FDCWD, (upper_.path() / "run.sh").c_str(), later, 0), 0);
  const auto second = pack_upper_layer(upper_.path(), blobs_, options());
  ASSERT_TRUE(first && second);
  EXPECT_EQ(first->digest, second->digest);
  EXPECT_EQ(blobs_.list().size(), 1u);
}

TEST_F(UpperLayerTest, AnEmptyUpperStoresNothing) {
  TempDir empty;
  EXPECT_FALSE(pack_upper_layer(empty.path(), blobs_, options()));
  EXPECT_TRUE(blobs_.list().empty());
}

TEST_F(UpperLayerTest, OverTheCapThrowsAndLeavesNoBlob) {
  write_file(upper_.path() / "big", std::string(200000, 'x'));
  UpperLayerOptions capped = options();
  capped.max_bytes = 100000;
  EXPECT_THROW(pack_upper_layer(upper_.path(), blobs_, capped), LayerTooLarge);
  EXPECT_TRUE(blobs_.list().empty());
}

// Many small files that together pass the cap: each fits, the sum does not.
TEST_F(UpperLayerTest, SmallFilesPastTheCapTogetherThrowAndLeaveNoBlob) {
  for (int i = 0; i < 40; ++i) write_file(upper_.path() / ("f" + std::to_string(i)), std::string(5000, 'x'));
  UpperLayerOptions capped = options();
  capped.max_bytes = 100000;
  EXPECT_THROW(pack_upper_layer(upper_.path(), blobs_, capped), LayerTooLarge);
  EXPECT_TRUE(blobs_.list().empty());
}

// A sandbox's sparse 1 TiB file is refused from its size alone: reading its zeros would take the daemon many
// minutes (the ctest timeout), and it used to write the cap's worth of tar before giving up.
TEST_F(UpperLayerTest, ASparseFilePastTheCapIsRefusedWithoutBeingRead) {
  write_file(upper_.path() / "a-small", "x");
  {
    base::UniqueFd fd(::open((upper_.path() / "sparse").c_str(), O_WRONLY | O_CREAT | O_CLOEXEC, 0644));
    ASSERT_TRUE(fd);
    ASSERT_EQ(::ftruncate(fd.get(), 1ll << 40), 0);
  }
  UpperLayerOptions capped = options();
  capped.max_bytes = 1 << 20;
  try {
    pack_upper_layer(upper_.path(), blobs_, capped);
    ADD_FAILURE() << "no LayerTooLarge";
  } catch (const LayerTooLarge& e) {
    EXPECT_NE(std::string(e.what()).find("larger than the cap of 1048576 bytes"), std::string::npos) << e.what();
  }
  EXPECT_TRUE(blobs_.list().empty());
}

// Many sparse files, each within the cap and together far past it (what a sandbox makes with `truncate` in a
// loop): the walk adds up their sizes first, so not one byte of their zeros is read or written.
TEST_F(UpperLayerTest, SparseFilesPastTheCapTogetherAreRefusedBeforeAnyDataIsRead) {
  for (int i = 0; i < 150; ++i) {
    base::UniqueFd fd(::open((upper_.path() / ("TEST-" + std::to_string(i) + ".xml")).c_str(),
                             O_WRONLY | O_CREAT | O_CLOEXEC, 0644));
    ASSERT_TRUE(fd);
    ASSERT_EQ(::ftruncate(fd.get(), 63ll << 20), 0);
  }
  PackOptions pack;
  pack.overlay_upper = true;
  pack.max_tar_bytes = 1ull << 30;
  std::uint64_t written = 0;
  try {
    pack_directory(upper_.path(), [&](const void*, std::size_t size) { written += size; }, pack);
    ADD_FAILURE() << "no TarTooLarge";
  } catch (const TarTooLarge& e) {
    EXPECT_NE(std::string(e.what()).find("nothing was read"), std::string::npos) << e.what();
  }
  EXPECT_EQ(written, 0u);
  UpperLayerOptions capped = options();
  capped.max_bytes = 1ull << 30;
  EXPECT_THROW(pack_upper_layer(upper_.path(), blobs_, capped), LayerTooLarge);
  EXPECT_TRUE(blobs_.list().empty());
}

TEST_F(UpperLayerTest, IncludeKeepsOnlyWhatItAccepts) {
  UpperLayerOptions only = options();
  only.include = [](const std::string& path, bool is_dir) {
    return is_dir ? std::string("target/classes").starts_with(path) : path == "target/classes/A.class";
  };
  const auto layer = pack_upper_layer(upper_.path(), blobs_, only);
  ASSERT_TRUE(layer);
  const auto seen = entries_of(blobs_.path(layer->digest));
  EXPECT_EQ(seen.size(), 3u);  // target, target/classes, the class file
  EXPECT_TRUE(seen.count("target/classes/A.class"));
}

}  // namespace
}  // namespace capsule::images
