// refs.json reading and writing with nlohmann/json: {"refs": {"name:tag": "sha256:..."}}.
// Every key is re-validated as a canonical name:tag ImageRef and every value as a Digest on load.
#include "images/ref_table.h"

#include <fcntl.h>

#include <cerrno>
#include <nlohmann/json.hpp>

#include "images/error.h"
#include "base/file_util.h"
#include "images/image_ref.h"

namespace capsule::images {

RefTable load_refs(const std::filesystem::path& file) {
  base::UniqueFd fd(open(file.c_str(), O_RDONLY | O_CLOEXEC | O_NOFOLLOW));
  if (!fd) {
    if (errno == ENOENT) return {};
    throw_image_errno("refs", file.string(), "open");
  }
  const std::string text = base::read_fd(fd.get(), 64ull << 20, "refs", file.string());
  const nlohmann::json document = nlohmann::json::parse(text, nullptr, false);
  if (document.is_discarded() || !document.is_object() || !document.contains("refs") || !document["refs"].is_object()) {
    throw_image_error("refs", file.string(), "malformed (expected {\"refs\": {\"name:tag\": \"sha256:...\"}})");
  }
  RefTable refs;
  for (const auto& [key, value] : document["refs"].items()) {
    const ImageRef ref = ImageRef::parse(key);
    if (ref.by_digest() || ref.str() != key) throw_image_error("refs", file.string(), "bad ref key " + key);
    if (!value.is_string()) throw_image_error("refs", file.string(), "ref " + key + " has a non-string digest");
    refs[key] = store::Digest::parse(value.get<std::string>());
  }
  return refs;
}

void save_refs(const std::filesystem::path& file, const RefTable& refs) {
  nlohmann::json table = nlohmann::json::object();
  for (const auto& [ref, digest] : refs) table[ref] = digest.str();
  const nlohmann::json document = {{"refs", table}};
  base::write_file_atomic(file, document.dump(2) + "\n", "refs", 0600);
}

}  // namespace capsule::images
