// Fixture builders for the image tests: libarchive writes the tars, nlohmann/json (via oci_image's
// writers) the documents; OCI layouts are assembled in scratch directories.
#include "tests/images/fixtures.h"

#include <archive.h>
#include <archive_entry.h>
#include <stdlib.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/xattr.h>
#include <unistd.h>

#include <fstream>
#include <sstream>
#include <stdexcept>

namespace capsule::images::testing {
namespace fs = std::filesystem;
namespace {

la_ssize_t append(struct archive*, void* out, const void* data, size_t size) {
  static_cast<std::string*>(out)->append(static_cast<const char*>(data), size);
  return static_cast<la_ssize_t>(size);
}

void must(struct archive* a, int status, const char* what) {
  if (status < ARCHIVE_WARN) throw std::runtime_error(std::string(what) + ": " + archive_error_string(a));
}

}  // namespace

std::string make_tar(const std::vector<TarEntry>& entries, Compression compression) {
  std::string out;
  struct archive* a = archive_write_new();
  must(a, archive_write_set_format_pax_restricted(a), "format");
  if (compression == Compression::kGzip) {
    must(a, archive_write_add_filter_gzip(a), "gzip");
    // Without it the gzip header holds the current second: equal layers built across a second boundary differ.
    must(a, archive_write_set_options(a, "gzip:!timestamp"), "gzip options");
  }
  if (compression == Compression::kZstd) must(a, archive_write_add_filter_zstd(a), "zstd");
  // No zero padding after a compressed stream (zstd readers take it for a broken frame).
  if (compression != Compression::kNone) must(a, archive_write_set_bytes_in_last_block(a, 1), "block");
  must(a, archive_write_open(a, &out, nullptr, append, nullptr), "open");
  for (const auto& spec : entries) {
    struct archive_entry* entry = archive_entry_new();
    archive_entry_set_pathname(entry, spec.path.c_str());
    archive_entry_set_perm(entry, spec.mode);
    archive_entry_set_uid(entry, spec.uid);
    archive_entry_set_gid(entry, spec.gid);
    archive_entry_set_mtime(entry, spec.mtime, 0);
    for (const auto& [name, value] : spec.xattrs) {
      archive_entry_xattr_add_entry(entry, name.c_str(), value.data(), value.size());
    }
    switch (spec.type) {
      case 'f': archive_entry_set_filetype(entry, AE_IFREG); archive_entry_set_size(entry, static_cast<la_int64_t>(spec.data.size())); break;
      case 'd': archive_entry_set_filetype(entry, AE_IFDIR); break;
      case 'l': archive_entry_set_filetype(entry, AE_IFLNK); archive_entry_set_symlink(entry, spec.link.c_str()); break;
      case 'h': archive_entry_set_filetype(entry, AE_IFREG); archive_entry_set_hardlink(entry, spec.link.c_str()); archive_entry_set_size(entry, 0); break;
      case 'c': archive_entry_set_filetype(entry, AE_IFCHR); archive_entry_set_rdev(entry, makedev(1, 3)); break;
      case 'b': archive_entry_set_filetype(entry, AE_IFBLK); archive_entry_set_rdev(entry, makedev(8, 0)); break;
      case 'p': archive_entry_set_filetype(entry, AE_IFIFO); break;
      default: throw std::runtime_error("bad fixture type");
    }
    must(a, archive_write_header(a, entry), "header");
    if (spec.type == 'f' && !spec.data.empty()) {
      if (archive_write_data(a, spec.data.data(), spec.data.size()) < 0) must(a, ARCHIVE_FATAL, "data");
    }
    archive_entry_free(entry);
  }
  must(a, archive_write_close(a), "close");
  archive_write_free(a);
  return out;
}

std::string gunzip_or_same(const std::string& bytes) {
  struct archive* a = archive_read_new();
  archive_read_support_filter_all(a);
  archive_read_support_format_raw(a);
  must(a, archive_read_open_memory(a, bytes.data(), bytes.size()), "open");
  struct archive_entry* entry = nullptr;
  must(a, archive_read_next_header(a, &entry), "header");
  std::string out;
  char buffer[65536];
  for (la_ssize_t n; (n = archive_read_data(a, buffer, sizeof buffer)) > 0;) out.append(buffer, static_cast<size_t>(n));
  archive_read_free(a);
  return out;
}

void write_file(const fs::path& path, const std::string& bytes) {
  std::ofstream file(path, std::ios::binary | std::ios::trunc);
  file << bytes;
  if (!file) throw std::runtime_error("cannot write " + path.string());
}

std::string read_file(const fs::path& path) {
  std::ifstream file(path, std::ios::binary);
  std::stringstream text;
  text << file.rdbuf();
  return text.str();
}

TempDir::TempDir() {
  std::string pattern = "/tmp/capsule-images-test-XXXXXX";
  if (mkdtemp(pattern.data()) == nullptr) throw std::runtime_error("mkdtemp");
  path_ = pattern;
}

TempDir::~TempDir() {
  std::error_code ignored;
  fs::remove_all(path_, ignored);
}

LayoutBuilder::LayoutBuilder(fs::path dir) : dir_(std::move(dir)) {
  fs::create_directories(dir_ / "blobs" / "sha256");
  write_file(dir_ / "oci-layout", "{\"imageLayoutVersion\": \"1.0.0\"}");
}

fs::path LayoutBuilder::blob_path(const store::Digest& digest) const { return dir_ / "blobs" / "sha256" / digest.hex(); }

Descriptor LayoutBuilder::add_blob(const std::string& bytes, const std::string& media_type) {
  Descriptor descriptor;
  descriptor.media_type = media_type;
  descriptor.digest = store::sha256_of(bytes);
  descriptor.size = bytes.size();
  write_file(blob_path(descriptor.digest), bytes);
  return descriptor;
}

Descriptor LayoutBuilder::add_image(const std::vector<std::vector<TarEntry>>& layers, ImageConfig config,
                                    Compression compression) {
  ImageManifest manifest;
  config.diff_ids.clear();
  for (const auto& entries : layers) {
    const std::string blob = make_tar(entries, compression);
    config.diff_ids.push_back(store::sha256_of(gunzip_or_same(blob)));
    const char* type = compression == Compression::kGzip   ? "application/vnd.oci.image.layer.v1.tar+gzip"
                       : compression == Compression::kZstd ? "application/vnd.oci.image.layer.v1.tar+zstd"
                                                           : "application/vnd.oci.image.layer.v1.tar";
    manifest.layers.push_back(add_blob(blob, type));
  }
  if (config.os.empty()) config.os = "linux";
  if (config.architecture.empty()) config.architecture = host_platform().architecture;
  manifest.config = add_blob(config_json(config, "2024-01-01T00:00:00Z"), std::string(media_type::kOciConfig));
  Descriptor descriptor = add_blob(manifest_json(manifest), std::string(media_type::kOciManifest));
  return descriptor;
}

void LayoutBuilder::write_index(const std::vector<Descriptor>& manifests) {
  write_file(dir_ / "index.json", index_json(ImageIndex{manifests}));
}

std::vector<std::vector<TarEntry>> three_layers() {
  return {
      {
          {.path = "data/", .type = 'd', .mode = 0755},
          {.path = "data/kept", .data = "base"},
          {.path = "data/gone", .data = "to be whited out"},
          {.path = "data/replaced", .data = "old"},
          {.path = "data/dir/hidden", .data = "hidden by the opaque dir above"},
          {.path = "data/root-owned", .data = "root", .mode = 0600, .uid = 0, .gid = 0},
          {.path = "data/user-owned", .data = "user", .mode = 0640, .uid = 1000, .gid = 1000},
      },
      {
          {.path = "data/.wh.gone"},
          {.path = "data/dir/", .type = 'd', .mode = 0755},
          {.path = "data/dir/.wh..wh..opq"},
          {.path = "data/dir/top", .data = "top"},
          {.path = "data/replaced", .data = "new"},
      },
      {
          {.path = "data/added", .data = "added"},
      },
  };
}

void make_rootfs_tree(const fs::path& root) {
  fs::create_directories(root / "etc");
  fs::create_directories(root / "home/user");
  fs::create_directories(root / "usr/bin");
  fs::create_directories(root / "run");
  fs::create_directories(root / "tmp");
  write_file(root / "etc/hostname", "capsule\n");
  if (setxattr((root / "etc/hostname").c_str(), "user.capsule", "x", 1, 0) != 0) throw std::runtime_error("setxattr");
  write_file(root / "home/user/notes", "notes");
  if (chown((root / "home/user/notes").c_str(), 1000, 1000) != 0) throw std::runtime_error("chown");
  if (chown((root / "home/user").c_str(), 1000, 1000) != 0) throw std::runtime_error("chown");
  write_file(root / "usr/bin/tool", "#!/bin/sh\n");
  if (chmod((root / "usr/bin/tool").c_str(), 04755) != 0) throw std::runtime_error("chmod");
  fs::create_hard_link(root / "usr/bin/tool", root / "usr/bin/tool-link");
  fs::create_symlink("usr/bin", root / "bin");
  if (chmod((root / "tmp").c_str(), 01777) != 0) throw std::runtime_error("chmod");
  if (mkfifo((root / "run/fifo").c_str(), 0600) != 0) throw std::runtime_error("mkfifo");
}

void touch_all(const fs::path& root, std::int64_t mtime) {
  const struct timespec times[2] = {{mtime, 0}, {mtime, 0}};
  for (const auto& entry : fs::recursive_directory_iterator(root)) {
    if (utimensat(AT_FDCWD, entry.path().c_str(), times, AT_SYMLINK_NOFOLLOW) != 0) throw std::runtime_error("utimensat");
  }
}

std::size_t count_entries(const fs::path& dir) {
  std::error_code error;
  std::size_t count = 0;
  for (fs::directory_iterator it(dir, error), end; !error && it != end; it.increment(error)) ++count;
  return count;
}

}  // namespace capsule::images::testing
