// Reading and writing OCI image layout directories. Reads go through open_beneath (openat2), so a layout
// cannot point the importer at host files through symlinks or "..".
#include "images/oci_layout.h"

#include <fcntl.h>
#include <sys/stat.h>

#include <cerrno>

#include <nlohmann/json.hpp>

#include "images/error.h"
#include "base/file_util.h"

namespace capsule::images {
namespace fs = std::filesystem;

OciLayoutReader::OciLayoutReader(const fs::path& dir) : dir_(dir), fd_(base::open_directory(dir, "layout")) {
  struct stat st;
  if (fstatat(fd_.get(), "oci-layout", &st, AT_SYMLINK_NOFOLLOW) != 0 && errno == ENOENT) {
    throw_image_error("layout", dir_.string(),
                      "not an OCI image layout: no oci-layout file (docker-save archives without one are not supported)");
  }
  base::UniqueFd marker = base::open_beneath(fd_.get(), "oci-layout", O_RDONLY, "layout", (dir_ / "oci-layout").string());
  const std::string text = base::read_fd(marker.get(), 64 << 10, "layout", (dir_ / "oci-layout").string());
  const nlohmann::json document = nlohmann::json::parse(text, nullptr, false);
  if (document.is_discarded() || !document.is_object() || !document.contains("imageLayoutVersion") ||
      !document["imageLayoutVersion"].is_string()) {
    throw_image_error("layout", (dir_ / "oci-layout").string(), "no imageLayoutVersion");
  }
  const std::string version = document["imageLayoutVersion"].get<std::string>();
  if (version.rfind("1.", 0) != 0) {
    throw_image_error("layout", (dir_ / "oci-layout").string(), "unsupported imageLayoutVersion " + version);
  }
}

ImageIndex OciLayoutReader::index() const {
  const std::string shown = (dir_ / "index.json").string();
  base::UniqueFd fd = base::open_beneath(fd_.get(), "index.json", O_RDONLY, "layout", shown);
  base::require_regular_file(fd.get(), "layout", shown);
  return parse_index(base::read_fd(fd.get(), kMaxImageDocument, "layout", shown), shown);
}

base::UniqueFd OciLayoutReader::open_blob(const store::Digest& digest) const {
  const std::string relative = "blobs/sha256/" + digest.hex();
  const std::string shown = (dir_ / relative).string();
  base::UniqueFd fd = base::open_beneath(fd_.get(), relative, O_RDONLY, "layout", shown);
  base::require_regular_file(fd.get(), "layout", shown);
  return fd;
}

void write_layout(const fs::path& dir, const std::string& index_json,
                  const std::vector<std::pair<store::Digest, fs::path>>& blobs) {
  const fs::path blob_dir = dir / "blobs" / "sha256";
  base::make_dir(dir / "blobs", 0755, "save");
  base::make_dir(blob_dir, 0755, "save");
  base::write_file_atomic(dir / "oci-layout", "{\"imageLayoutVersion\":\"1.0.0\"}", "save", 0644);
  base::write_file_atomic(dir / "index.json", index_json, "save", 0644);
  for (const auto& [digest, source] : blobs) {
    const fs::path target = blob_dir / digest.hex();
    std::error_code error;
    fs::copy_file(source, target, fs::copy_options::overwrite_existing, error);
    if (error) throw ImageError("save", target.string(), "copy blob " + digest.str(), error.value());
    if (chmod(target.c_str(), 0644) != 0) throw_image_errno("save", target.string(), "chmod");
  }
}

}  // namespace capsule::images
