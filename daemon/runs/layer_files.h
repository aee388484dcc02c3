// Reading one path out of a kept output layer (a plain OCI layer tar, run_outputs.h): a file's bytes, a tar of
// a directory's subtree, or a symlink as a one-entry tar; nothing is ever extracted to disk or followed.
#pragma once

#include <cstdint>
#include <filesystem>
#include <functional>
#include <optional>
#include <string>
#include <string_view>

namespace capsule::daemon {

enum class LayerEntryKind { kFile, kDirectory, kSymlink };

struct LayerEntry {
  LayerEntryKind kind = LayerEntryKind::kFile;
  std::uint64_t size = 0;  // a file's bytes
};

using LayerSink = std::function<void(std::string_view chunk)>;

// `path` ("a/b", no leading '/', no "." or ".." components; "" is the layer's root directory) in the layer tar at
// `layer`; nullopt when the layer has no such entry (or only its whiteout). Throws base::Error for a broken tar.
std::optional<LayerEntry> find_in_layer(const std::filesystem::path& layer, const std::string& path);

// Writes what find_in_layer found at `path` to `sink`: a file's bytes (a hard link's from the entry it links
// to); for a directory, a pax tar of everything below it named relative to it (the directory itself has no
// entry; whiteouts and opaque markers are left out, as are hard links to files outside it); for a symlink, a
// tar of that one link named by its last component. Exceptions from `sink` propagate.
void write_from_layer(const std::filesystem::path& layer, const std::string& path, const LayerEntry& entry,
                      const LayerSink& sink);

}  // namespace capsule::daemon
