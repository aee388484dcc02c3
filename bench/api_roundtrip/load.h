// Concurrent load for api_roundtrip: a fixed number of calls shared among client threads, timed one by one,
// used for the throughput phase (capsule and bwrap alike) and for the batches of runs between RSS readings.
#pragma once

#include <functional>
#include <vector>

#include "http/unix_client.h"

namespace capsule::bench::api_roundtrip {

struct Load {
  double seconds = 0;
  std::vector<double> latency_ms;
};

// Runs `total` calls of `one(index)` from `clients` threads; returns seconds and per-call latencies (ms).
// The first exception stops every thread and the benchmark.
Load run_load(int clients, int total, const std::function<void(int)>& one);

// Runs `true` through the daemon `count` times from `clients` threads, no measurement kept.
void capsule_batch(const http::HttpClient& client, int clients, int count);

}  // namespace capsule::bench::api_roundtrip
