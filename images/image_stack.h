// ImageStack: images composed at run time — a base image with layer images (a toolchain under /opt, ...) on
// top — as one root with one merged config, and the toolchain candidates such stacks offer.
#pragma once

#include <cstddef>
#include <string_view>
#include <vector>

#include "images/image_store.h"
#include "images/oci_image.h"
#include "images/toolchain_select.h"

namespace capsule::images {

// Label of a toolchain layer image: the ref ("name:tag", "name@sha256:..." or "sha256:...") of the image it
// is stacked on when toolchain selection picks it.
inline constexpr std::string_view kLayerBaseLabel = "org.capsule.layer.base";

// Most filesystem layers one run's root may stack (Docker's limit is 125; overlayfs's own is 500).
inline constexpr std::size_t kMaxStackLayers = 128;

// `top`'s config over `below`'s. Env: per variable, `top` wins, except PATH: `top`'s entries first, then
// `below`'s not already listed (empty entries dropped). Labels: per key, `top` wins. WorkingDir and User:
// `top`'s when it sets them. os and architecture stay `below`'s; diff_ids are concatenated.
ImageConfig merge_configs(const ImageConfig& below, const ImageConfig& top);

struct ImageStack {
  std::vector<store::Digest> digests;          // manifest digests, base first
  ImageConfig config;                   // merge_configs folded from the base up
  std::vector<std::string> layer_dirs;  // every image's unpacked layers, topmost first: SandboxSpec::rootfs_layers
};

// `images` (base first, at least one) as one root filesystem. ImageError (step "stack") when they hold more
// than kMaxStackLayers distinct layers.
ImageStack stack_images(const std::vector<ImageInfo>& images);

// What toolchain selection chooses from: one candidate per installed image. An image labelled
// kLayerBaseLabel is a toolchain layer: its candidate carries the base (found among `installed` by ref or
// digest) and the stack's merged labels, or says why it is unusable (label not a ref, base not installed,
// base itself a layer).
std::vector<ImageCandidate> toolchain_candidates(const std::vector<ImageInfo>& installed);

}  // namespace capsule::images
