// Writes OCI image layouts for image_bench: tar+gzip layers built through libarchive and hashed on the way
// out, then the config, manifest and index, so the benchmark imports an image built the way registries ship them.
#pragma once

#include <archive.h>

#include <cstdint>
#include <filesystem>
#include <functional>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "images/oci_image.h"
#include "store/digest.h"

namespace capsule::bench::image_bench {

struct LayerBlob {
  images::Descriptor descriptor;  // the gzip'd blob
  store::Digest diff_id;          // sha256 of the uncompressed tar
  std::uint64_t tar_bytes = 0;
};

// A tar+gzip layer written straight into a layout's blob dir through libarchive, hashed on the way out.
class LayerFile {
 public:
  explicit LayerFile(std::filesystem::path temp);
  ~LayerFile();
  LayerFile(const LayerFile&) = delete;
  LayerFile& operator=(const LayerFile&) = delete;

  void dir(const std::string& path, unsigned mode = 0755);
  void file(const std::string& path, const std::string& data, unsigned mode = 0644);
  void symlink(const std::string& path, const std::string& target);
  void whiteout(const std::string& path);  // ".wh.NAME", ".wh..wh..opq"

  // Closes the archive and moves the blob to <blobs>/<hex>.
  LayerBlob finish(const std::filesystem::path& blobs_dir);

 private:
  static la_ssize_t on_write(struct archive*, void* self, const void* data, size_t size);
  void check(int status, const char* what);
  void add(const std::string& path, unsigned type, unsigned mode, const std::string& data, const std::string& link);

  std::filesystem::path temp_;
  int fd_ = -1;
  struct archive* archive_ = nullptr;
  store::Sha256 hash_;
  std::uint64_t bytes_ = 0;
  std::set<std::string> dirs_;
};

// Writes an OCI layout at `dir`: one image of `count` layers, each filled by fill(layer, index).
std::vector<LayerBlob> write_layout(const std::filesystem::path& dir, int count,
                                    const std::function<void(LayerFile&, int)>& fill);

}  // namespace capsule::bench::image_bench
