// Parsing and validation of OCI / Docker v2 image documents with nlohmann/json, and canonical writers.
// Validation is strict about what capsule relies on (digests, sizes, media types, diff_ids) only.
#include "images/oci_image.h"

#include <nlohmann/json.hpp>

#include "images/error.h"

namespace capsule::images {
namespace {

using json = nlohmann::json;

constexpr std::string_view kLayerTypes[] = {
    media_type::kOciLayerTar,
    media_type::kOciLayerGzip,
    media_type::kOciLayerZstd,
    "application/vnd.oci.image.layer.nondistributable.v1.tar",
    "application/vnd.oci.image.layer.nondistributable.v1.tar+gzip",
    "application/vnd.oci.image.layer.nondistributable.v1.tar+zstd",
    media_type::kDockerLayerGzip,
    "application/vnd.docker.image.rootfs.foreign.diff.tar.gzip",
};

// Where a document is being read, so every error names the step and the source.
struct Reader {
  const char* step;
  const std::string& source;

  [[noreturn]] void fail(const std::string& detail) const { throw_image_error(step, source, detail); }

  json parse(std::string_view text) const {
    json document = json::parse(text, nullptr, false);
    if (document.is_discarded()) fail("not valid JSON");
    if (!document.is_object()) fail("not a JSON object");
    return document;
  }

  // A member that must be a string (or, when optional, absent or null).
  std::string string(const json& object, const char* key, bool required) const {
    auto it = object.find(key);
    if (it == object.end() || it->is_null()) {
      if (required) fail(std::string("missing \"") + key + "\"");
      return {};
    }
    if (!it->is_string()) fail(std::string("\"") + key + "\" is not a string");
    return it->get<std::string>();
  }

  store::Digest digest(const json& value, const std::string& what) const {
    if (!value.is_string()) fail(what + " is not a string");
    auto digest = store::Digest::try_parse(value.get<std::string>());
    if (!digest) fail(what + " is not a sha256 digest: " + value.get<std::string>().substr(0, 100));
    return *digest;
  }

  std::map<std::string, std::string> string_map(const json& object, const char* key) const {
    std::map<std::string, std::string> values;
    auto it = object.find(key);
    if (it == object.end() || it->is_null()) return values;
    if (!it->is_object()) fail(std::string("\"") + key + "\" is not an object");
    for (const auto& [name, value] : it->items()) {
      if (!value.is_string()) fail(std::string("\"") + key + "." + name + "\" is not a string");
      values[name] = value.get<std::string>();
    }
    return values;
  }

  void schema_version_2(const json& document) const {
    auto it = document.find("schemaVersion");
    if (it == document.end() || !it->is_number_integer()) fail("missing integer \"schemaVersion\"");
    if (it->get<long long>() != 2) {
      fail("schemaVersion " + std::to_string(it->get<long long>()) + " is not supported (only 2)");
    }
  }

  Descriptor descriptor(const json& value, const std::string& what) const {
    if (!value.is_object()) fail(what + " is not an object");
    Descriptor descriptor;
    descriptor.media_type = string(value, "mediaType", true);
    auto digest = value.find("digest");
    if (digest == value.end()) fail(what + " has no digest");
    descriptor.digest = this->digest(*digest, what + " digest");
    auto size = value.find("size");
    if (size == value.end() || !size->is_number_integer() || size->get<long long>() < 0) {
      fail(what + " has no valid size");
    }
    descriptor.size = size->get<std::uint64_t>();
    auto platform = value.find("platform");
    if (platform != value.end() && !platform->is_null()) {
      if (!platform->is_object()) fail(what + " platform is not an object");
      descriptor.platform = Platform{string(*platform, "os", true), string(*platform, "architecture", true),
                                     string(*platform, "variant", false)};
    }
    descriptor.annotations = string_map(value, "annotations");
    return descriptor;
  }
};

// Compact dump; strings that are not UTF-8 (e.g. in caller-supplied labels) are an ImageError.
std::string dump(const json& document, const char* what) {
  try {
    return document.dump();
  } catch (const json::exception& e) {
    throw_image_error(what, "", std::string("cannot be written as JSON: ") + e.what());
  }
}

json descriptor_json(const Descriptor& descriptor) {
  json value = {{"mediaType", descriptor.media_type},
                {"digest", descriptor.digest.str()},
                {"size", descriptor.size}};
  if (descriptor.platform) {
    value["platform"] = {{"os", descriptor.platform->os}, {"architecture", descriptor.platform->architecture}};
    if (!descriptor.platform->variant.empty()) value["platform"]["variant"] = descriptor.platform->variant;
  }
  if (!descriptor.annotations.empty()) value["annotations"] = descriptor.annotations;
  return value;
}

}  // namespace

bool is_index_media_type(std::string_view type) {
  return type == media_type::kOciIndex || type == media_type::kDockerManifestList;
}

bool is_manifest_media_type(std::string_view type) {
  return type == media_type::kOciManifest || type == media_type::kDockerManifest;
}

bool is_layer_media_type(std::string_view type) {
  for (std::string_view known : kLayerTypes) {
    if (type == known) return true;
  }
  return false;
}

ImageIndex parse_index(std::string_view text, const std::string& source) {
  const Reader reader{"index", source};
  const json document = reader.parse(text);
  reader.schema_version_2(document);
  const std::string type = reader.string(document, "mediaType", false);
  if (!type.empty() && !is_index_media_type(type)) reader.fail("mediaType " + type + " is not an image index");
  auto manifests = document.find("manifests");
  if (manifests == document.end() || !manifests->is_array()) reader.fail("missing \"manifests\" array");
  ImageIndex index;
  for (std::size_t i = 0; i < manifests->size(); ++i) {
    index.manifests.push_back(reader.descriptor((*manifests)[i], "manifests[" + std::to_string(i) + "]"));
  }
  return index;
}

ImageManifest parse_manifest(std::string_view text, const std::string& source) {
  const Reader reader{"manifest", source};
  const json document = reader.parse(text);
  reader.schema_version_2(document);
  ImageManifest manifest;
  manifest.media_type = reader.string(document, "mediaType", false);
  if (is_index_media_type(manifest.media_type)) reader.fail("is an image index, not an image manifest");
  if (!manifest.media_type.empty() && !is_manifest_media_type(manifest.media_type)) {
    reader.fail("mediaType " + manifest.media_type + " is not an image manifest");
  }
  auto config = document.find("config");
  if (config == document.end()) reader.fail("missing \"config\"");
  manifest.config = reader.descriptor(*config, "config");
  if (manifest.config.media_type != media_type::kOciConfig && manifest.config.media_type != media_type::kDockerConfig) {
    reader.fail("config mediaType " + manifest.config.media_type + " is not a container image config");
  }
  auto layers = document.find("layers");
  if (layers == document.end() || !layers->is_array()) reader.fail("missing \"layers\" array");
  for (std::size_t i = 0; i < layers->size(); ++i) {
    Descriptor layer = reader.descriptor((*layers)[i], "layers[" + std::to_string(i) + "]");
    if (!is_layer_media_type(layer.media_type)) {
      reader.fail("layers[" + std::to_string(i) + "] has the unsupported mediaType " + layer.media_type);
    }
    manifest.layers.push_back(std::move(layer));
  }
  return manifest;
}

ImageConfig parse_config(std::string_view text, const std::string& source) {
  const Reader reader{"config", source};
  const json document = reader.parse(text);
  ImageConfig config;
  config.os = reader.string(document, "os", false);
  config.architecture = reader.string(document, "architecture", false);
  auto section = document.find("config");
  if (section != document.end() && !section->is_null()) {
    if (!section->is_object()) reader.fail("\"config\" is not an object");
    auto env = section->find("Env");
    if (env != section->end() && !env->is_null()) {
      if (!env->is_array()) reader.fail("\"config.Env\" is not an array");
      for (const auto& item : *env) {
        if (!item.is_string()) reader.fail("\"config.Env\" holds a non-string");
        const std::string entry = item.get<std::string>();
        if (entry.empty() || entry.front() == '=' || entry.find('=') == std::string::npos) {
          reader.fail("\"config.Env\" entry is not KEY=value: " + entry.substr(0, 100));
        }
        config.env.push_back(entry);
      }
    }
    config.working_dir = reader.string(*section, "WorkingDir", false);
    config.user = reader.string(*section, "User", false);
    config.labels = reader.string_map(*section, "Labels");
  }
  auto rootfs = document.find("rootfs");
  if (rootfs == document.end() || !rootfs->is_object()) reader.fail("missing \"rootfs\" object");
  if (reader.string(*rootfs, "type", true) != "layers") reader.fail("rootfs.type is not \"layers\"");
  auto diff_ids = rootfs->find("diff_ids");
  if (diff_ids == rootfs->end() || !diff_ids->is_array()) reader.fail("missing \"rootfs.diff_ids\" array");
  for (std::size_t i = 0; i < diff_ids->size(); ++i) {
    config.diff_ids.push_back(reader.digest((*diff_ids)[i], "rootfs.diff_ids[" + std::to_string(i) + "]"));
  }
  return config;
}

std::string config_json(const ImageConfig& config, const std::string& created) {
  json section = json::object();
  if (!config.env.empty()) section["Env"] = config.env;
  if (!config.working_dir.empty()) section["WorkingDir"] = config.working_dir;
  if (!config.user.empty()) section["User"] = config.user;
  if (!config.labels.empty()) section["Labels"] = config.labels;
  json diff_ids = json::array();
  for (const auto& digest : config.diff_ids) diff_ids.push_back(digest.str());
  json document = {{"architecture", config.architecture},
                   {"os", config.os},
                   {"created", created},
                   {"config", section},
                   {"rootfs", {{"type", "layers"}, {"diff_ids", diff_ids}}}};
  return dump(document, "config");
}

std::string manifest_json(const ImageManifest& manifest) {
  json layers = json::array();
  for (const auto& layer : manifest.layers) layers.push_back(descriptor_json(layer));
  json document = {{"schemaVersion", 2},
                   {"mediaType", media_type::kOciManifest},
                   {"config", descriptor_json(manifest.config)},
                   {"layers", layers}};
  return dump(document, "manifest");
}

std::string index_json(const ImageIndex& index) {
  json manifests = json::array();
  for (const auto& descriptor : index.manifests) manifests.push_back(descriptor_json(descriptor));
  json document = {{"schemaVersion", 2}, {"mediaType", media_type::kOciIndex}, {"manifests", manifests}};
  return dump(document, "index");
}

Platform host_platform() {
#if defined(__x86_64__)
  return Platform{"linux", "amd64", ""};
#elif defined(__aarch64__)
  return Platform{"linux", "arm64", ""};
#else
  return Platform{"linux", "unknown", ""};
#endif
}

}  // namespace capsule::images
