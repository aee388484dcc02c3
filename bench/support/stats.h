// Statistics and timing shared by the benchmarks: nearest-rank percentiles, means and medians of samples in ms,
// wall-clock timing, and the load average printed around each measurement (noise shifts absolute numbers).
#pragma once

#include <chrono>
#include <functional>
#include <string>
#include <vector>

namespace capsule::bench {

using Clock = std::chrono::steady_clock;

// Nearest-rank percentile (p in 0..100); 0 for no samples.
double percentile(std::vector<double> values, double p);

// The middle value, or the mean of the two middle values for an even count; 0 for no samples.
double median(std::vector<double> values);

double mean(const std::vector<double>& values);

double ms_since(Clock::time_point start);
double time_ms(const std::function<void()>& fn);

// First three fields of /proc/loadavg, space-separated.
std::string load_average();

}  // namespace capsule::bench
