// The proxy's worker queue: one client's blocked tasks hold at most its share of the workers, clients are
// served in turn, and join() runs what is queued.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <future>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "proxy/fair_queue.h"

namespace capsule::proxy {
namespace {

using namespace std::chrono_literals;

TEST(FairQueue, ASlowClientLeavesWorkersForOthers) {
  FairQueue queue(4, 2);
  int slow_client = 0;
  int quick_client = 0;
  std::promise<void> release;
  std::shared_future<void> released = release.get_future().share();
  std::atomic<int> slow_started{0};
  for (int i = 0; i < 10; ++i) {
    queue.post(&slow_client, [&, released] {
      ++slow_started;
      released.wait();  // an upstream that does not answer
    });
  }
  std::promise<void> quick_done;
  queue.post(&quick_client, [&] { quick_done.set_value(); });
  // Without the per-client cap all four workers would be stuck behind the slow client and this never ends.
  EXPECT_EQ(quick_done.get_future().wait_for(60s), std::future_status::ready);
  // Round-robin may start the quick task before the slow client's second one: wait for that second one, then
  // let a second quick task through, which gives every idle worker a turn at the slow client's queue.
  for (int i = 0; i < 6000 && slow_started.load() < 2; ++i) std::this_thread::sleep_for(10ms);
  std::promise<void> quick_again;
  queue.post(&quick_client, [&] { quick_again.set_value(); });
  EXPECT_EQ(quick_again.get_future().wait_for(60s), std::future_status::ready);
  EXPECT_EQ(slow_started.load(), 2) << "the slow client holds its share of the workers, no more";
  EXPECT_EQ(queue.pending(&slow_client), 10u);
  release.set_value();
  queue.join();
  EXPECT_EQ(slow_started.load(), 10);
  EXPECT_EQ(queue.pending(&slow_client), 0u);
}

TEST(FairQueue, ClientsAreServedInTurn) {
  FairQueue queue(1, 1);
  int a = 0, b = 0, blocker = 0;
  std::promise<void> go;
  std::shared_future<void> started = go.get_future().share();
  queue.post(&blocker, [started] { started.wait(); });
  std::mutex mutex;
  std::string order;
  for (int i = 0; i < 3; ++i) {
    queue.post(&a, [&] { std::lock_guard lock(mutex); order += 'a'; });
  }
  for (int i = 0; i < 3; ++i) {
    queue.post(&b, [&] { std::lock_guard lock(mutex); order += 'b'; });
  }
  go.set_value();
  queue.join();
  // Whichever comes first, neither client waits for all of the other's tasks.
  EXPECT_TRUE(order == "ababab" || order == "bababa") << order;
}

TEST(FairQueue, ANullKeyIsAClientLikeAnyOther) {
  FairQueue queue(2, 1);
  std::promise<void> done;
  queue.post(nullptr, [&] { done.set_value(); });
  EXPECT_EQ(done.get_future().wait_for(60s), std::future_status::ready);
}

TEST(FairQueue, ATaskThatThrowsDoesNotStopItsWorker) {
  FairQueue queue(1, 1);
  int client = 0;
  std::atomic<int> ran{0};
  queue.post(&client, [] { throw std::runtime_error("boom"); });
  queue.post(&client, [&] { ++ran; });
  queue.join();
  EXPECT_EQ(ran.load(), 1);
}

}  // namespace
}  // namespace capsule::proxy
