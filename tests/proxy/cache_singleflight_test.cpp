// Singleflight: concurrent callers of one key share one fetch (value or exception), different keys do not wait
// for each other, and a finished fetch is not reused.
#include "proxy/cache/singleflight.h"

#include <gtest/gtest.h>

#include <atomic>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

namespace capsule::proxy {
namespace {

constexpr std::size_t kThreads = 8;

// Spins until `condition` holds; the tests use it to hold a fetch open until every caller has joined it (or a
// second fetch has started, which fails the test instead of hanging it).
template <class Condition>
void wait_until(Condition condition) {
  while (!condition()) std::this_thread::yield();
}

TEST(Singleflight, ConcurrentCallersShareOneFetch) {
  Singleflight<std::string, std::string> flight;
  std::atomic<int> fetches{0};
  std::vector<std::string> results(kThreads);
  std::vector<std::thread> threads;
  for (std::size_t i = 0; i < kThreads; ++i) {
    threads.emplace_back([&, i] {
      results[i] = flight.run("numpy", [&] {
        ++fetches;
        wait_until([&] { return flight.waiters("numpy") == kThreads - 1 || fetches.load() > 1; });
        return std::string("page");
      });
    });
  }
  for (auto& thread : threads) thread.join();

  EXPECT_EQ(fetches.load(), 1);
  for (const auto& result : results) EXPECT_EQ(result, "page");
  EXPECT_EQ(flight.in_flight(), 0u);
  EXPECT_EQ(flight.waiters("numpy"), 0u);
}

TEST(Singleflight, ExceptionReachesEveryCaller) {
  Singleflight<std::string, int> flight;
  std::atomic<int> fetches{0};
  std::atomic<int> caught{0};
  std::vector<std::thread> threads;
  for (std::size_t i = 0; i < kThreads; ++i) {
    threads.emplace_back([&] {
      try {
        flight.run("broken", [&]() -> int {
          ++fetches;
          wait_until([&] { return flight.waiters("broken") == kThreads - 1 || fetches.load() > 1; });
          throw std::runtime_error("upstream down");
        });
      } catch (const std::runtime_error& e) {
        if (std::string(e.what()) == "upstream down") ++caught;
      }
    });
  }
  for (auto& thread : threads) thread.join();
  EXPECT_EQ(fetches.load(), 1);
  EXPECT_EQ(caught.load(), static_cast<int>(kThreads));
  EXPECT_EQ(flight.in_flight(), 0u);
}

TEST(Singleflight, LaterCallFetchesAgain) {
  Singleflight<std::string, int> flight;
  int fetches = 0;
  EXPECT_EQ(flight.run("a", [&] { return ++fetches; }), 1);
  EXPECT_EQ(flight.run("a", [&] { return ++fetches; }), 2);
  EXPECT_THROW(flight.run("a", [&]() -> int { throw std::logic_error("x"); }), std::logic_error);
  EXPECT_EQ(flight.run("a", [&] { return ++fetches; }), 3);
  EXPECT_EQ(flight.in_flight(), 0u);
}

TEST(Singleflight, DifferentKeysFetchIndependently) {
  Singleflight<std::string, std::string> flight;
  std::atomic<int> fetches{0};
  // Each fetch waits until both have started: this only finishes if neither key waits for the other.
  auto fetch_for = [&](const std::string& key) {
    return flight.run(key, [&, key] {
      ++fetches;
      wait_until([&] { return fetches.load() == 2; });
      return key + "-page";
    });
  };
  std::string a;
  std::string b;
  std::thread first([&] { a = fetch_for("a"); });
  std::thread second([&] { b = fetch_for("b"); });
  first.join();
  second.join();
  EXPECT_EQ(fetches.load(), 2);
  EXPECT_EQ(a, "a-page");
  EXPECT_EQ(b, "b-page");
}

}  // namespace
}  // namespace capsule::proxy
