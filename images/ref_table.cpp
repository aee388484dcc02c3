// refs.json reading and writing with nlohmann/json: {"refs": {"name:tag": {"digest", "owner", "public",
// "group"}}}. Every key is re-validated as a canonical name:tag ImageRef and every value on load; the older
// form {"name:tag": "sha256:..."} still reads (as a system ref).
#include "images/ref_table.h"

#include <fcntl.h>

#include <algorithm>
#include <cerrno>
#include <nlohmann/json.hpp>

#include "base/file_util.h"
#include "images/error.h"
#include "images/image_ref.h"

namespace capsule::images {

bool RefViewer::may_see(const RefAccess& access) const {
  if (sees_all || access.is_public || access.owner == uid) return true;
  return access.group && std::find(groups.begin(), groups.end(), *access.group) != groups.end();
}

namespace {

template <typename T>
T id_field(const nlohmann::json& entry, const char* key, const std::string& file, const std::string& ref) {
  const nlohmann::json& value = entry[key];
  if (!value.is_number_unsigned() || value.get<std::uint64_t>() > 0xfffffffeULL) {
    throw_image_error("refs", file, "ref " + ref + " has a bad " + key);
  }
  return static_cast<T>(value.get<std::uint64_t>());
}

RefEntry parse_entry(const nlohmann::json& value, const std::string& file, const std::string& ref) {
  if (value.is_string()) return RefEntry{store::Digest::parse(value.get<std::string>()), RefAccess{}};
  if (!value.is_object() || !value.contains("digest") || !value["digest"].is_string() || !value.contains("owner") ||
      !value.contains("public") || !value["public"].is_boolean()) {
    throw_image_error("refs", file, "ref " + ref + " is not {\"digest\", \"owner\", \"public\"[, \"group\"]}");
  }
  RefEntry entry{store::Digest::parse(value["digest"].get<std::string>()), {}};
  entry.access.owner = id_field<uid_t>(value, "owner", file, ref);
  entry.access.is_public = value["public"].get<bool>();
  if (value.contains("group")) entry.access.group = id_field<gid_t>(value, "group", file, ref);
  return entry;
}

}  // namespace

RefTable load_refs(const std::filesystem::path& file) {
  base::UniqueFd fd(open(file.c_str(), O_RDONLY | O_CLOEXEC | O_NOFOLLOW));
  if (!fd) {
    if (errno == ENOENT) return {};
    throw_image_errno("refs", file.string(), "open");
  }
  const std::string text = base::read_fd(fd.get(), 64ull << 20, "refs", file.string());
  const nlohmann::json document = nlohmann::json::parse(text, nullptr, false);
  if (document.is_discarded() || !document.is_object() || !document.contains("refs") || !document["refs"].is_object()) {
    throw_image_error("refs", file.string(), "malformed (expected {\"refs\": {\"name:tag\": {\"digest\": ...}}})");
  }
  RefTable refs;
  for (const auto& [key, value] : document["refs"].items()) {
    const ImageRef ref = ImageRef::parse(key);
    if (ref.by_digest() || ref.str() != key) throw_image_error("refs", file.string(), "bad ref key " + key);
    refs[key] = parse_entry(value, file.string(), key);
  }
  return refs;
}

void save_refs(const std::filesystem::path& file, const RefTable& refs) {
  nlohmann::json table = nlohmann::json::object();
  for (const auto& [ref, entry] : refs) {
    nlohmann::json row = {{"digest", entry.digest.str()}, {"owner", entry.access.owner}, {"public", entry.access.is_public}};
    if (entry.access.group) row["group"] = *entry.access.group;
    table[ref] = row;
  }
  const nlohmann::json document = {{"refs", table}};
  base::write_file_atomic(file, document.dump(2) + "\n", "refs", 0600);
}

}  // namespace capsule::images
