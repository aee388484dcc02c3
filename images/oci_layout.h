// OCI image layout directories (oci-layout, index.json, blobs/sha256/<hex>): reading one safely (no path
// in it may leave the directory or use a symlink) and writing one for export.
#pragma once

#include <filesystem>
#include <utility>
#include <vector>

#include "store/digest.h"
#include "images/oci_image.h"
#include "base/unique_fd.h"

namespace capsule::images {

class OciLayoutReader {
 public:
  // Opens the directory and checks its oci-layout file (imageLayoutVersion 1.x). Throws ImageError{"layout"}.
  explicit OciLayoutReader(const std::filesystem::path& dir);

  ImageIndex index() const;                              // index.json, parsed and validated
  base::UniqueFd open_blob(const store::Digest& digest) const;  // blobs/sha256/<hex>: a regular file, read-only

 private:
  std::filesystem::path dir_;
  base::UniqueFd fd_;
};

// Writes a layout into the existing, empty directory `dir`: oci-layout, index.json (as given) and a copy of
// each blob (digest, file in a store). Files get mode 0644, directories 0755.
void write_layout(const std::filesystem::path& dir, const std::string& index_json,
                  const std::vector<std::pair<store::Digest, std::filesystem::path>>& blobs);

}  // namespace capsule::images
