// Part 1 of image_bench: sandbox start-up on a 5-layer image imported into an ImageStore vs. the built-in host
// image and vs. the base layer alone, round-robin, plus a fresh store's import and first runs.
#pragma once

#include <filesystem>
#include <nlohmann/json.hpp>
#include <string>

#include "image_bench/options.h"
#include "sandbox/launcher.h"

namespace capsule::bench::image_bench {

// Builds the image under `tmp`, prints its tables and returns the "startup" part of the JSON line.
nlohmann::json startup_bench(const Options& options, const std::filesystem::path& tmp, const std::string& profile,
                             sandbox::Launcher& launcher);

}  // namespace capsule::bench::image_bench
