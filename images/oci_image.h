// OCI image documents: index (index.json / manifest lists), image manifest and image config, in the OCI
// and Docker v2 media types. One parse point per type, validating as it goes; writers for the ones we emit.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "store/digest.h"

namespace capsule::images {

// The largest image document (index, manifest, config) read from a store or a layout.
inline constexpr std::uint64_t kMaxImageDocument = 8ull << 20;

namespace media_type {
inline constexpr std::string_view kOciIndex = "application/vnd.oci.image.index.v1+json";
inline constexpr std::string_view kOciManifest = "application/vnd.oci.image.manifest.v1+json";
inline constexpr std::string_view kOciConfig = "application/vnd.oci.image.config.v1+json";
inline constexpr std::string_view kOciLayerTar = "application/vnd.oci.image.layer.v1.tar";
inline constexpr std::string_view kOciLayerGzip = "application/vnd.oci.image.layer.v1.tar+gzip";
inline constexpr std::string_view kOciLayerZstd = "application/vnd.oci.image.layer.v1.tar+zstd";
inline constexpr std::string_view kDockerManifestList = "application/vnd.docker.distribution.manifest.list.v2+json";
inline constexpr std::string_view kDockerManifest = "application/vnd.docker.distribution.manifest.v2+json";
inline constexpr std::string_view kDockerConfig = "application/vnd.docker.container.image.v1+json";
inline constexpr std::string_view kDockerLayerGzip = "application/vnd.docker.image.rootfs.diff.tar.gzip";
}  // namespace media_type

bool is_index_media_type(std::string_view type);
bool is_manifest_media_type(std::string_view type);
bool is_layer_media_type(std::string_view type);  // tar, tar+gzip, tar+zstd, incl. non-distributable/foreign

struct Platform {
  std::string os;
  std::string architecture;
  std::string variant;
};

struct Descriptor {
  std::string media_type;
  store::Digest digest;
  std::uint64_t size = 0;
  std::optional<Platform> platform;
  std::map<std::string, std::string> annotations;
};

struct ImageIndex {
  std::vector<Descriptor> manifests;  // may point at manifests or nested indexes
};

struct ImageManifest {
  std::string media_type;          // as written; empty when the document omits it (OCI allows that)
  Descriptor config;
  std::vector<Descriptor> layers;  // base layer first
};

// The parts of an image config that capsule uses.
struct ImageConfig {
  std::string os;
  std::string architecture;
  std::vector<std::string> env;               // "KEY=value"
  std::string working_dir;
  std::string user;
  std::map<std::string, std::string> labels;  // e.g. the toolchains an image carries
  std::vector<store::Digest> diff_ids;               // rootfs.diff_ids, base layer first
};

// Each throws ImageError{step "index" | "manifest" | "config", path = source} naming the first problem.
ImageIndex parse_index(std::string_view json, const std::string& source);
ImageManifest parse_manifest(std::string_view json, const std::string& source);
ImageConfig parse_config(std::string_view json, const std::string& source);

// Canonical JSON (sorted keys, no whitespace), so equal inputs give equal digests.
// `created` is an RFC 3339 time written into the config.
std::string config_json(const ImageConfig& config, const std::string& created);
std::string manifest_json(const ImageManifest& manifest);  // OCI manifest media type
std::string index_json(const ImageIndex& index);           // OCI index media type

// The platform this host runs ("linux" / "amd64" on x86-64).
Platform host_platform();

}  // namespace capsule::images
