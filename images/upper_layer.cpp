// pack_upper_layer: pack_directory in its overlay-upper mode, streamed into a blob writer that counts the
// bytes against the cap; the writer is dropped (its temporary removed) on any failure or an empty layer.
#include "images/upper_layer.h"

#include <system_error>

#include "images/tar_pack.h"

namespace capsule::images {

std::optional<UpperLayer> pack_upper_layer(const std::filesystem::path& upper, store::BlobStore& blobs,
                                           const UpperLayerOptions& options) {
  PackOptions pack;
  pack.epoch = options.epoch;
  pack.gzip = false;
  pack.overlay_upper = true;
  pack.id_base = options.id_base;
  pack.id_count = options.id_count;
  pack.include = options.include;
  pack.grafts = options.grafts;
  pack.max_tar_bytes = options.max_bytes;  // a file past the cap is refused before its data is read
  // Most runs leave an upper empty: known without the blob writer's temporary file and a tar's end blocks.
  std::error_code ec;
  if (options.grafts.empty() && std::filesystem::is_directory(std::filesystem::symlink_status(upper, ec)) &&
      std::filesystem::is_empty(upper, ec) && !ec) {
    return std::nullopt;
  }
  store::BlobWriter writer = blobs.writer();
  // Past the cap the bytes are dropped and the error thrown once packing ends: failing inside libarchive's write
  // callback leaves its archive fatal, and freeing a fatal writer leaks its block buffer.
  bool too_large = false;
  PackResult packed;
  try {
    packed = pack_directory(
        upper,
        [&](const void* data, std::size_t size) {
          if (too_large || (options.max_bytes != 0 && writer.size() + size > options.max_bytes)) {
            too_large = true;
            return;
          }
          writer.write(data, size);
        },
        pack);
  } catch (const TarTooLarge&) {
    too_large = true;
  }
  if (too_large) throw LayerTooLarge(upper.string(), options.max_bytes);
  if (packed.entries == 0) return std::nullopt;
  UpperLayer layer;
  layer.size = writer.size();
  layer.files = packed.entries;
  layer.digest = writer.commit();
  return layer;
}

}  // namespace capsule::images
