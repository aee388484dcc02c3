// The JSON summary image_bench prints for every sample series (p50, p90, p99, mean, min, n), one shape for
// the start-up and the import parts so the final JSON line reads the same everywhere.
#pragma once

#include <nlohmann/json.hpp>
#include <vector>

namespace capsule::bench::image_bench {

nlohmann::json summary(const std::vector<double>& values);

}  // namespace capsule::bench::image_bench
