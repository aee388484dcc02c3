// Part 2 of image_bench: ImageStore::import_layout throughput on large gzip layers vs. unpack_layer alone,
// `tar -xzf` of the same blobs and the blob copy alone, each followed by a timed sync().
#pragma once

#include <filesystem>
#include <nlohmann/json.hpp>

#include "image_bench/options.h"

namespace capsule::bench::image_bench {

// Builds the layers under `tmp`, prints the throughput table and returns the "import" part of the JSON line.
nlohmann::json import_bench(const Options& options, const std::filesystem::path& tmp);

}  // namespace capsule::bench::image_bench
