// OCI layouts for image_bench (see layout_writer.h): each layer is streamed through libarchive into the blob
// dir while its digest is computed, then read back once for its diff_id; config, manifest and index follow.
#include "image_bench/layout_writer.h"

#include <archive_entry.h>
#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <fstream>
#include <tuple>

#include "images/host_image.h"
#include "support/fail.h"

namespace capsule::bench::image_bench {

namespace fs = std::filesystem;

namespace {

void write_file(const fs::path& path, const std::string& bytes) {
  std::ofstream file(path, std::ios::binary | std::ios::trunc);
  file << bytes;
  if (!file) die("cannot write " + path.string());
}

// sha256 and size of the tar inside a gzip'd blob.
std::pair<store::Digest, std::uint64_t> uncompressed_digest(const fs::path& blob) {
  struct archive* a = archive_read_new();
  archive_read_support_filter_gzip(a);
  archive_read_support_format_raw(a);
  struct archive_entry* entry = nullptr;
  if (archive_read_open_filename(a, blob.c_str(), 1 << 20) != ARCHIVE_OK ||
      archive_read_next_header(a, &entry) != ARCHIVE_OK) {
    die("read back " + blob.string() + ": " + archive_error_string(a));
  }
  store::Sha256 hash;
  std::uint64_t total = 0;
  std::vector<char> buffer(1 << 20);
  for (la_ssize_t n; (n = archive_read_data(a, buffer.data(), buffer.size())) != 0;) {
    if (n < 0) die("read back " + blob.string() + ": " + archive_error_string(a));
    hash.update(buffer.data(), static_cast<std::size_t>(n));
    total += static_cast<std::uint64_t>(n);
  }
  archive_read_free(a);
  return {hash.finish(), total};
}

}  // namespace

LayerFile::LayerFile(fs::path temp) : temp_(std::move(temp)) {
  fd_ = open(temp_.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd_ < 0) die("create " + temp_.string() + ": " + std::strerror(errno));
  archive_ = archive_write_new();
  check(archive_write_set_format_pax_restricted(archive_), "format");
  check(archive_write_add_filter_gzip(archive_), "gzip");
  check(archive_write_set_bytes_in_last_block(archive_, 1), "block");
  check(archive_write_open(archive_, this, nullptr, &LayerFile::on_write, nullptr), "open");
}

LayerFile::~LayerFile() {
  if (archive_ != nullptr) archive_write_free(archive_);
  if (fd_ >= 0) close(fd_);
}

void LayerFile::dir(const std::string& path, unsigned mode) { add(path, AE_IFDIR, mode, "", ""); }

void LayerFile::file(const std::string& path, const std::string& data, unsigned mode) {
  add(path, AE_IFREG, mode, data, "");
}

void LayerFile::symlink(const std::string& path, const std::string& target) { add(path, AE_IFLNK, 0777, "", target); }

void LayerFile::whiteout(const std::string& path) { add(path, AE_IFREG, 0644, "", ""); }

LayerBlob LayerFile::finish(const fs::path& blobs_dir) {
  check(archive_write_close(archive_), "close");
  archive_write_free(archive_);
  archive_ = nullptr;
  if (fsync(fd_) != 0 || close(fd_) != 0) die("finish " + temp_.string());
  fd_ = -1;
  LayerBlob blob;
  blob.descriptor.media_type = std::string(images::media_type::kOciLayerGzip);
  blob.descriptor.digest = hash_.finish();
  blob.descriptor.size = bytes_;
  const fs::path target = blobs_dir / blob.descriptor.digest.hex();
  fs::rename(temp_, target);
  std::tie(blob.diff_id, blob.tar_bytes) = uncompressed_digest(target);
  return blob;
}

la_ssize_t LayerFile::on_write(struct archive*, void* self, const void* data, size_t size) {
  auto* layer = static_cast<LayerFile*>(self);
  const char* bytes = static_cast<const char*>(data);
  for (size_t done = 0; done < size;) {
    const ssize_t n = write(layer->fd_, bytes + done, size - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return -1;
    done += static_cast<size_t>(n);
  }
  layer->hash_.update(data, size);
  layer->bytes_ += size;
  return static_cast<la_ssize_t>(size);
}

void LayerFile::check(int status, const char* what) {
  if (status < ARCHIVE_WARN) die(temp_.string() + ": " + what + ": " + archive_error_string(archive_));
}

// Parent directories not added yet get an entry (0755) first, as image builders write them.
void LayerFile::add(const std::string& path, unsigned type, unsigned mode, const std::string& data,
                    const std::string& link) {
  for (auto slash = path.find('/'); slash != std::string::npos; slash = path.find('/', slash + 1)) {
    if (!dirs_.count(path.substr(0, slash))) add(path.substr(0, slash), AE_IFDIR, 0755, "", "");
  }
  if (type == AE_IFDIR && !dirs_.insert(path).second) return;
  struct archive_entry* entry = archive_entry_new();
  archive_entry_set_pathname(entry, path.c_str());
  archive_entry_set_filetype(entry, type);
  archive_entry_set_perm(entry, mode);
  archive_entry_set_uid(entry, 0);
  archive_entry_set_gid(entry, 0);
  archive_entry_set_mtime(entry, 1700000000, 0);
  if (type == AE_IFREG) archive_entry_set_size(entry, static_cast<la_int64_t>(data.size()));
  if (type == AE_IFLNK) archive_entry_set_symlink(entry, link.c_str());
  check(archive_write_header(archive_, entry), "header");
  if (!data.empty() && archive_write_data(archive_, data.data(), data.size()) < 0) check(ARCHIVE_FATAL, "data");
  archive_entry_free(entry);
}

std::vector<LayerBlob> write_layout(const fs::path& dir, int count,
                                    const std::function<void(LayerFile&, int)>& fill) {
  const fs::path blobs = dir / "blobs" / "sha256";
  fs::create_directories(blobs);
  write_file(dir / "oci-layout", "{\"imageLayoutVersion\": \"1.0.0\"}");
  auto add_blob = [&](const std::string& bytes, std::string_view media_type) {
    images::Descriptor descriptor;
    descriptor.media_type = std::string(media_type);
    descriptor.digest = store::sha256_of(bytes);
    descriptor.size = bytes.size();
    write_file(blobs / descriptor.digest.hex(), bytes);
    return descriptor;
  };
  std::vector<LayerBlob> layers;
  images::ImageManifest manifest;
  images::ImageConfig config;
  config.os = "linux";
  config.architecture = images::host_platform().architecture;
  config.env = {"PATH=/usr/local/bin:/usr/bin:/bin"};
  for (int i = 0; i < count; ++i) {
    LayerFile layer(blobs / (".layer-" + std::to_string(i) + ".tmp"));
    fill(layer, i);
    layers.push_back(layer.finish(blobs));
    manifest.layers.push_back(layers.back().descriptor);
    config.diff_ids.push_back(layers.back().diff_id);
  }
  manifest.config = add_blob(images::config_json(config, "2024-01-01T00:00:00Z"), images::media_type::kOciConfig);
  const images::Descriptor top = add_blob(images::manifest_json(manifest), images::media_type::kOciManifest);
  write_file(dir / "index.json", images::index_json(images::ImageIndex{{top}}));
  return layers;
}

}  // namespace capsule::bench::image_bench
