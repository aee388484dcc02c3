// An overlayfs upper dir (what a run or session wrote over its image or workspace) packed as an OCI layer tar
// into a blob store: whiteouts and opaque dirs in OCI form, owners as the sandbox saw them, bounded in size.
#pragma once

#include <cstdint>
#include <filesystem>
#include <functional>
#include <map>
#include <optional>
#include <string>

#include "images/error.h"
#include "store/blob_store.h"
#include "store/digest.h"

namespace capsule::images {

struct UpperLayerOptions {
  std::uint32_t id_base = 0;    // host id of sandbox id 0 (LauncherOptions::host_id_base)
  std::uint32_t id_count = 65536;
  std::int64_t epoch = 0;       // mtimes later than this are clamped to it
  std::uint64_t max_bytes = 0;  // tar bytes; past it LayerTooLarge is thrown and nothing is stored; 0: no cap
  // When set, only entries it accepts are packed (see PackOptions::include).
  std::function<bool(const std::string& path, bool is_dir)> include{};
  // Host dirs packed at a path in place of the upper's (see PackOptions::grafts): writable binds, e.g. ~/.m2.
  std::map<std::string, std::filesystem::path> grafts{};
};

struct UpperLayer {
  store::Digest digest;     // the uncompressed tar's sha256: the blob's digest and the layer's diff_id alike
  std::uint64_t size = 0;   // tar bytes
  std::uint64_t files = 0;  // tar entries (whiteouts and opaque markers included)
};

// A layer past UpperLayerOptions::max_bytes.
class LayerTooLarge : public ImageError {
 public:
  LayerTooLarge(const std::string& upper, std::uint64_t max_bytes)
      : ImageError("pack", upper, "larger than the cap of " + std::to_string(max_bytes) + " bytes") {}
};

// Packs `upper` (walked by descriptors, symlinks never followed; see pack_directory) as an uncompressed,
// deterministic OCI layer tar and stores it in `blobs`. nullopt when nothing is packed (an empty upper, or
// nothing accepted by `include`). Throws LayerTooLarge past the cap, ImageError for other failures.
std::optional<UpperLayer> pack_upper_layer(const std::filesystem::path& upper, store::BlobStore& blobs,
                                           const UpperLayerOptions& options);

}  // namespace capsule::images
