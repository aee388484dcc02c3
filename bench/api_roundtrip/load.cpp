// Concurrent load for api_roundtrip (see load.h): threads take the next call index from one atomic counter,
// so the calls spread over the clients however long each takes; latencies are merged at the end.
#include "api_roundtrip/load.h"

#include <atomic>
#include <exception>
#include <mutex>
#include <string>
#include <thread>

#include "api_roundtrip/daemon.h"
#include "support/fail.h"
#include "support/stats.h"

namespace capsule::bench::api_roundtrip {

Load run_load(int clients, int total, const std::function<void(int)>& one) {
  std::atomic<int> next{0};
  std::atomic<bool> failed{false};
  std::mutex mutex;
  std::string error;
  Load load;
  std::vector<std::thread> threads;
  const auto start = Clock::now();
  for (int c = 0; c < clients; ++c) {
    threads.emplace_back([&] {
      std::vector<double> mine;
      for (int i; !failed && (i = next++) < total;) {
        const auto t0 = Clock::now();
        try {
          one(i);
        } catch (const std::exception& e) {
          std::lock_guard lock(mutex);
          if (!failed.exchange(true)) error = e.what();
          break;
        }
        mine.push_back(ms_since(t0));
      }
      std::lock_guard lock(mutex);
      load.latency_ms.insert(load.latency_ms.end(), mine.begin(), mine.end());
    });
  }
  for (auto& t : threads) t.join();
  load.seconds = ms_since(start) / 1000;
  if (failed) die(error);
  return load;
}

void capsule_batch(const http::HttpClient& client, int clients, int count) {
  if (count > 0) run_load(clients, count, [&](int) { capsule_true(client); });
}

}  // namespace capsule::bench::api_roundtrip
