// BlockingCalls, the API's worker pool: its bound (429 queue_full past it), one caller's share of it, stop()
// joining after the accepted tasks ran, a running task seeing stopping(), nothing accepted after stop (503).
#include "daemon/api/blocking_calls.h"

#include <gtest/gtest.h>

#include <atomic>
#include <future>

#include "http/response.h"

namespace capsule::daemon {
namespace {

std::string code_of_submit(BlockingCalls& calls, std::function<void()> task, uid_t owner = 0) {
  try {
    calls.submit(owner, std::move(task));
  } catch (const http::ApiError& e) {
    return e.code();
  }
  return "";
}

TEST(BlockingCalls, RefusesPastThreadsPlusWaitingAndTakesMoreOnceOneFinished) {
  BlockingCalls calls("test calls", 1, 1);
  std::promise<void> release;
  std::shared_future<void> released = release.get_future().share();
  std::promise<void> first_started;
  std::atomic<int> ran{0};
  calls.submit(0, [&] {
    first_started.set_value();
    released.wait();
    ++ran;
  });
  calls.submit(0, [&] { ++ran; });  // waits for the one thread
  first_started.get_future().wait();
  try {
    calls.submit(0, [&] { ++ran; });
    FAIL() << "a third task was accepted";
  } catch (const http::ApiError& e) {
    EXPECT_EQ(e.code(), "queue_full");
    EXPECT_NE(std::string(e.what()).find("more than 2 test calls"), std::string::npos) << e.what();
  }
  release.set_value();
  calls.stop();
  EXPECT_EQ(ran.load(), 2);
}

TEST(BlockingCalls, StopRunsWhatWasAcceptedJoinsAndRefusesLaterTasks) {
  BlockingCalls calls("test calls", 2, 8);
  std::promise<void> release;
  std::shared_future<void> released = release.get_future().share();
  std::atomic<int> ran{0};
  for (int i = 0; i < 6; ++i) {
    calls.submit(0, [&] {
      released.wait();
      ++ran;
    });
  }
  std::thread stopper([&] { calls.stop(); });
  while (!calls.stopping()) std::this_thread::yield();
  EXPECT_EQ(code_of_submit(calls, [&] { ++ran; }), "draining");
  release.set_value();
  stopper.join();
  EXPECT_EQ(ran.load(), 6);  // every accepted task ran before stop() returned
  EXPECT_EQ(code_of_submit(calls, [&] { ++ran; }), "draining");
  calls.stop();  // idempotent
  EXPECT_EQ(ran.load(), 6);
}

TEST(BlockingCalls, ARunningTaskSeesStoppingAndEnds) {
  BlockingCalls calls("test calls", 1, 0);
  std::promise<void> started;
  calls.submit(0, [&] {
    started.set_value();
    while (!calls.stopping()) std::this_thread::yield();  // a transfer between two pieces
  });
  started.get_future().wait();
  calls.stop();  // returns only once the task saw stopping() and ended
  EXPECT_TRUE(calls.stopping());
}

// A caller other than root holds at most half the places and runs at most half the threads: another caller's
// task runs at once beside it, however many of the first one's wait.
TEST(BlockingCalls, OneCallerHoldsAtMostHalfAndOthersRunBesideIt) {
  BlockingCalls calls("test calls", 2, 6);
  std::promise<void> release;
  std::shared_future<void> released = release.get_future().share();
  std::atomic<int> ran{0};
  for (int i = 0; i < 4; ++i) {
    calls.submit(1000, [&] {
      released.wait();
      ++ran;
    });
  }
  const std::string refused = code_of_submit(calls, [&] { ++ran; }, 1000);
  EXPECT_EQ(refused, "queue_full") << "uid 1000 already holds half of the 8 places";
  std::promise<void> other_ran;
  calls.submit(1001, [&] { other_ran.set_value(); });
  EXPECT_EQ(other_ran.get_future().wait_for(std::chrono::seconds(30)), std::future_status::ready)
      << "the other caller's task waited behind uid 1000's";
  EXPECT_EQ(ran.load(), 0) << "uid 1000's tasks were still held";
  release.set_value();
  calls.stop();
  EXPECT_EQ(ran.load(), 4);
}

}  // namespace
}  // namespace capsule::daemon
