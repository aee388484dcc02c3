// image_bench's JSON summary of a sample series (see summary.h), built on the shared nearest-rank statistics.
// An empty series reports zeros rather than failing, as a skipped part has no samples.
#include "image_bench/summary.h"

#include <algorithm>

#include "support/stats.h"

namespace capsule::bench::image_bench {

nlohmann::json summary(const std::vector<double>& values) {
  return {{"p50", percentile(values, 50)}, {"p90", percentile(values, 90)}, {"p99", percentile(values, 99)},
          {"mean", mean(values)}, {"min", values.empty() ? 0 : *std::min_element(values.begin(), values.end())},
          {"n", values.size()}};
}

}  // namespace capsule::bench::image_bench
