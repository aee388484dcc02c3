// Layer unpacking: what lands on disk (content, owners, modes, times, xattrs, links, whiteouts), and
// every hostile layer being refused with nothing left behind.
#include <gtest/gtest.h>

#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/xattr.h>

#include "images/error.h"
#include "images/layer_unpack.h"
#include "tests/images/fixtures.h"

namespace capsule::images {
namespace {

namespace fs = std::filesystem;
using testing::Compression;
using testing::count_entries;
using testing::make_tar;
using testing::TarEntry;
using testing::TempDir;

struct stat entry_stat(const fs::path& path) {
  struct stat st {};
  EXPECT_EQ(lstat(path.c_str(), &st), 0) << path;
  return st;
}

std::string xattr_of(const fs::path& path, const char* name) {
  char value[256];
  ssize_t n = lgetxattr(path.c_str(), name, value, sizeof value);
  return n < 0 ? std::string("<none>") : std::string(value, static_cast<std::size_t>(n));
}

class LayerUnpack : public ::testing::Test {
 protected:
  // Writes the tar as a blob and unpacks it to <tmp>/layer.
  UnpackResult unpack(const std::vector<TarEntry>& entries, const UnpackLimits& limits = {},
                      Compression compression = Compression::kGzip) {
    testing::write_file(blob(), make_tar(entries, compression));
    return unpack_layer(blob(), layer(), limits);
  }
  // Expects refusal with `reason` in the message, and nothing left in the parent directory but the blob.
  void expect_refused(const std::vector<TarEntry>& entries, const std::string& reason, const UnpackLimits& limits = {},
                      Compression compression = Compression::kGzip) {
    try {
      unpack(entries, limits, compression);
      ADD_FAILURE() << "not refused: expected " << reason;
    } catch (const base::Error& e) {
      EXPECT_EQ(e.cause().step, "unpack");
      EXPECT_NE(std::string(e.what()).find(reason), std::string::npos) << e.what();
    }
    EXPECT_FALSE(fs::exists(layer()));
    EXPECT_EQ(count_entries(dir_.path()), 1u) << "a partial unpack was left behind";
  }
  fs::path blob() const { return dir_ / "layer.blob"; }
  fs::path layer() const { return dir_ / "layer"; }

  TempDir dir_;
};

TEST_F(LayerUnpack, ContentOwnersModesTimesAndLinks) {
  const UnpackResult result = unpack({
      {.path = "./", .type = 'd', .mode = 0755},
      {.path = "etc/", .type = 'd', .mode = 0750, .uid = 0, .gid = 4, .mtime = 1600000000},
      {.path = "etc/root-file", .data = "root", .mode = 0600, .uid = 0, .gid = 0},
      {.path = "home/user/owned", .data = "mine", .mode = 0640, .uid = 1000, .gid = 1000, .mtime = 1500000000},
      {.path = "usr/bin/su", .data = "setuid", .mode = 04755},
      {.path = "usr/bin/wall", .data = "setgid", .mode = 02755, .gid = 5},
      {.path = "tmp", .type = 'd', .mode = 01777},
      {.path = "bin", .type = 'l', .link = "usr/bin", .uid = 1000, .gid = 1000},
      {.path = "etc/absolute-link", .type = 'l', .link = "/etc/shadow"},  // a symlink may point anywhere
      {.path = "usr/bin/su-again", .type = 'h', .link = "usr/bin/su"},
      {.path = "etc/caps", .data = "x", .xattrs = {{"user.capsule.test", "value"}}},
  });
  EXPECT_EQ(result.entries, 11u);
  EXPECT_EQ(testing::read_file(layer() / "etc/root-file"), "root");
  EXPECT_EQ(entry_stat(layer() / "etc/root-file").st_uid, 0u);
  EXPECT_EQ(entry_stat(layer() / "etc/root-file").st_mode & 07777, 0600u);
  const struct stat owned = entry_stat(layer() / "home/user/owned");
  EXPECT_EQ(owned.st_uid, 1000u);
  EXPECT_EQ(owned.st_gid, 1000u);
  EXPECT_EQ(owned.st_mode & 07777, 0640u);
  EXPECT_EQ(owned.st_mtim.tv_sec, 1500000000);
  EXPECT_EQ(entry_stat(layer() / "home").st_mode & 07777, 0755u);  // implied parent
  EXPECT_EQ(entry_stat(layer() / "usr/bin/su").st_mode & 07777, 04755u);
  EXPECT_EQ(entry_stat(layer() / "usr/bin/wall").st_mode & 07777, 02755u);
  EXPECT_EQ(entry_stat(layer() / "usr/bin/wall").st_gid, 5u);
  EXPECT_EQ(entry_stat(layer() / "tmp").st_mode & 07777, 01777u);
  const struct stat etc = entry_stat(layer() / "etc");
  EXPECT_EQ(etc.st_mode & 07777, 0750u);
  EXPECT_EQ(etc.st_gid, 4u);
  EXPECT_EQ(etc.st_mtim.tv_sec, 1600000000);  // kept although files were created in it afterwards
  EXPECT_TRUE(S_ISLNK(entry_stat(layer() / "bin").st_mode));
  EXPECT_EQ(fs::read_symlink(layer() / "bin"), "usr/bin");
  EXPECT_EQ(entry_stat(layer() / "bin").st_uid, 1000u);
  EXPECT_EQ(fs::read_symlink(layer() / "etc/absolute-link"), "/etc/shadow");
  EXPECT_EQ(entry_stat(layer() / "usr/bin/su-again").st_ino, entry_stat(layer() / "usr/bin/su").st_ino);
  EXPECT_EQ(xattr_of(layer() / "etc/caps", "user.capsule.test"), "value");
}

TEST_F(LayerUnpack, WhiteoutsBecomeOverlayfsWhiteouts) {
  unpack({
      {.path = "gone-file", .type = 'f'},  // replaced by the whiteout below (later entries win)
      {.path = ".wh.gone-file"},
      {.path = "dir/.wh.gone-dir"},
      {.path = "opaque/", .type = 'd', .mode = 0755},
      {.path = "opaque/.wh..wh..opq"},
      {.path = "opaque/new", .data = "new"},
      {.path = ".wh..wh.plnk/123", .data = "aufs bookkeeping"},
  });
  for (const char* name : {"gone-file", "dir/gone-dir"}) {
    const struct stat st = entry_stat(layer() / name);
    EXPECT_TRUE(S_ISCHR(st.st_mode)) << name;
    EXPECT_EQ(st.st_rdev, makedev(0, 0)) << name;
  }
  EXPECT_FALSE(fs::exists(layer() / ".wh.gone-file"));
  EXPECT_EQ(xattr_of(layer() / "opaque", "trusted.overlay.opaque"), "y");
  EXPECT_EQ(xattr_of(layer() / "opaque", "user.overlay.opaque"), "y");
  EXPECT_FALSE(fs::exists(layer() / "opaque/.wh..wh..opq"));
  EXPECT_EQ(testing::read_file(layer() / "opaque/new"), "new");
  EXPECT_FALSE(fs::exists(layer() / ".wh..wh.plnk"));
}

TEST_F(LayerUnpack, PlainGzipAndZstdTarsAndDiffId) {
  const std::vector<TarEntry> entries = {{.path = "a", .data = "alpha"}};
  for (Compression compression : {Compression::kNone, Compression::kGzip, Compression::kZstd}) {
    const std::string blob_bytes = make_tar(entries, compression);
    testing::write_file(blob(), blob_bytes);
    const std::string plain = testing::gunzip_or_same(blob_bytes);
    const UnpackResult result = unpack_layer(blob(), layer());
    EXPECT_EQ(result.diff_id, store::sha256_of(plain));  // the digest of the uncompressed stream
    EXPECT_EQ(result.unpacked_bytes, plain.size());
    EXPECT_EQ(testing::read_file(layer() / "a"), "alpha");
    fs::remove_all(layer());
  }
}

TEST_F(LayerUnpack, WrongDiffIdIsRefused) {
  testing::write_file(blob(), make_tar({{.path = "a", .data = "alpha"}}));
  EXPECT_THROW(unpack_layer(blob(), layer(), {}, store::sha256_of("something else")), ImageError);
  EXPECT_FALSE(fs::exists(layer()));
  EXPECT_EQ(count_entries(dir_.path()), 1u);
}

TEST_F(LayerUnpack, RefusesAbsolutePaths) {
  expect_refused({{.path = "ok", .data = "x"}, {.path = "/etc/evil", .data = "x"}}, "absolute path");
}

TEST_F(LayerUnpack, RefusesDotDot) {
  expect_refused({{.path = "a/../../escape", .data = "x"}}, "'..'");
  expect_refused({{.path = "..", .type = 'd'}}, "'..'");
}

TEST_F(LayerUnpack, RefusesWritingThroughASymlink) {
  TempDir outside;
  expect_refused({{.path = "evil", .type = 'l', .link = outside.path().string()}, {.path = "evil/pwned", .data = "x"}},
                 "writes through the symlink evil");
  EXPECT_EQ(count_entries(outside.path()), 0u);
  // Also through a relative symlink inside the layer, and through one made a directory's parent.
  expect_refused({{.path = "real", .type = 'd'}, {.path = "alias", .type = 'l', .link = "real"},
                  {.path = "alias/file", .data = "x"}},
                 "writes through the symlink alias");
  expect_refused({{.path = "up", .type = 'l', .link = ".."}, {.path = "up/x/y", .type = 'd'}}, "symlink up");
}

TEST_F(LayerUnpack, RefusesHardLinksLeavingTheLayerOrToNonRegularFiles) {
  expect_refused({{.path = "passwd", .type = 'h', .link = "/etc/passwd"}}, "absolute path");
  expect_refused({{.path = "passwd", .type = 'h', .link = "../../etc/passwd"}}, "'..'");
  expect_refused({{.path = "passwd", .type = 'h', .link = "etc/passwd"}}, "not in this layer");
  expect_refused({{.path = "l", .type = 'l', .link = "/etc/passwd"}, {.path = "passwd", .type = 'h', .link = "l"}},
                 "not a regular file");
  expect_refused({{.path = "d", .type = 'd'}, {.path = "dl", .type = 'h', .link = "d"}}, "not a regular file");
  expect_refused({{.path = ".wh.w"}, {.path = "wl", .type = 'h', .link = "w"}}, "not a regular file");
  TempDir outside;
  testing::write_file(outside / "target", "host file");
  expect_refused({{.path = "dir", .type = 'l', .link = outside.path().string()},
                  {.path = "stolen", .type = 'h', .link = "dir/target"}},
                 "symlink dir");
}

TEST_F(LayerUnpack, RefusesDevicesAndFifos) {
  expect_refused({{.path = "dev/null", .type = 'c'}}, "device nodes");
  expect_refused({{.path = "dev/sda", .type = 'b'}}, "device nodes");
  expect_refused({{.path = "pipe", .type = 'p'}}, "fifos");
}

TEST_F(LayerUnpack, RefusesOverlayXattrsFromTheArchive) {
  expect_refused({{.path = "d", .type = 'd', .xattrs = {{"trusted.overlay.redirect", "/etc"}}}}, "overlayfs xattr");
}

TEST_F(LayerUnpack, RefusesFilesAboveTheSizeLimit) {
  UnpackLimits limits;
  limits.max_file_bytes = 1 << 20;
  expect_refused({{.path = "small", .data = "x"}, {.path = "huge", .data = std::string(2 << 20, 'x')}},
                 "per-file limit", limits);
  limits.max_file_bytes = 8ull << 30;
  limits.max_total_bytes = 1 << 20;
  expect_refused({{.path = "a", .data = std::string(600 << 10, 'a')}, {.path = "b", .data = std::string(600 << 10, 'b')}},
                 "exceeds the limit", limits);
}

TEST_F(LayerUnpack, RefusesZipBombs) {
  UnpackLimits limits;
  limits.max_ratio = 10;
  limits.ratio_floor_bytes = 1 << 20;
  expect_refused({{.path = "zeros", .data = std::string(16 << 20, '\0')}}, "zip-bomb", limits);
  // Below the floor, a high ratio is fine (small, very compressible layers are normal).
  EXPECT_NO_THROW(unpack({{.path = "zeros", .data = std::string(512 << 10, '\0')}}, limits));
}

TEST_F(LayerUnpack, RefusesGarbageAndExistingTargets) {
  testing::write_file(blob(), "this is not a tar");
  EXPECT_THROW(unpack_layer(blob(), layer()), ImageError);
  EXPECT_EQ(count_entries(dir_.path()), 1u);
  fs::create_directory(layer());
  testing::write_file(blob(), make_tar({{.path = "a", .data = "x"}}));
  EXPECT_THROW(unpack_layer(blob(), layer()), ImageError);
}

}  // namespace
}  // namespace capsule::images
