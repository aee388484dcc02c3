// The contents of image_bench's two test images: a 5-layer image that runs /bin/sh (host shell closure, then
// layers exercising overrides, whiteouts and opaque dirs) and large mixed-size layers for import throughput.
#pragma once

#include <cstdint>

#include "image_bench/content.h"
#include "image_bench/layout_writer.h"

namespace capsule::bench::image_bench {

// Layer `index` (0..4) of the 5-layer start-up image; index 0 is the base with /bin/sh and its libraries.
void fill_small_image(LayerFile& layer, int index, Content& content);

// A throughput layer of about `target_bytes` of file data: small, medium and large files, half random, half text.
void fill_big_layer(LayerFile& layer, int index, std::uint64_t target_bytes, Content& content);

}  // namespace capsule::bench::image_bench
