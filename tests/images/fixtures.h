// Test fixtures for images/: tar layers built in memory with libarchive, OCI layouts written from them,
// and scratch directories. Nothing is downloaded; every image a test imports is made here.
#pragma once

#include <cstdint>
#include <filesystem>
#include <map>
#include <ostream>
#include <string>
#include <vector>

#include "images/oci_image.h"

namespace capsule::images {
// Digests print as "sha256:..." in test failures.
inline void PrintTo(const store::Digest& digest, std::ostream* out) { *out << digest.str(); }
}  // namespace capsule::images

namespace capsule::images::testing {

struct TarEntry {
  std::string path{};
  char type = 'f';       // f file, d dir, l symlink, h hard link, c char device, b block device, p fifo
  std::string data{};    // file content
  std::string link{};    // symlink or hard-link target
  unsigned mode = 0644;  // permission bits (incl. setuid/setgid/sticky)
  std::int64_t uid = 0;
  std::int64_t gid = 0;
  std::int64_t mtime = 1700000000;
  std::map<std::string, std::string> xattrs{};
};

enum class Compression { kNone, kGzip, kZstd };

std::string make_tar(const std::vector<TarEntry>& entries, Compression compression = Compression::kGzip);
std::string gunzip_or_same(const std::string& bytes);  // the uncompressed tar (for diff_ids)

void write_file(const std::filesystem::path& path, const std::string& bytes);
std::string read_file(const std::filesystem::path& path);

// A directory under /tmp removed when the object goes away.
class TempDir {
 public:
  TempDir();
  ~TempDir();
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
  const std::filesystem::path& path() const { return path_; }
  std::filesystem::path operator/(const std::string& name) const { return path_ / name; }

 private:
  std::filesystem::path path_;
};

// Builds an OCI image layout directory.
class LayoutBuilder {
 public:
  explicit LayoutBuilder(std::filesystem::path dir);  // creates it with oci-layout and blobs/sha256

  Descriptor add_blob(const std::string& bytes, const std::string& media_type);
  // One image from its layers (base first); the config gets the layers' diff_ids.
  Descriptor add_image(const std::vector<std::vector<TarEntry>>& layers, ImageConfig config = {},
                       Compression compression = Compression::kGzip);
  // index.json listing these manifests.
  void write_index(const std::vector<Descriptor>& manifests);

  const std::filesystem::path& dir() const { return dir_; }
  std::filesystem::path blob_path(const store::Digest& digest) const;

 private:
  std::filesystem::path dir_;
};

// Three layers stacking over each other under /data: the base has kept, gone, replaced, dir/hidden, a
// root-owned and a uid-1000 file; the middle whites out `gone`, makes `dir` opaque (adding dir/top) and
// replaces `replaced`; the top adds `added`.
std::vector<std::vector<TarEntry>> three_layers();

// A small root filesystem on disk: etc/hostname (with a user xattr), home/user/notes owned by 1000:1000,
// setuid usr/bin/tool hard-linked as usr/bin/tool-link, bin -> usr/bin, a sticky tmp, and a fifo in run/.
void make_rootfs_tree(const std::filesystem::path& root);
// Sets every entry's mtime (symlinks included) below root to `mtime`.
void touch_all(const std::filesystem::path& root, std::int64_t mtime);

// Count of entries in a directory (0 if it does not exist).
std::size_t count_entries(const std::filesystem::path& dir);

}  // namespace capsule::images::testing
