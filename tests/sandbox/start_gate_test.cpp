// StartGate (sandbox/start_gate.h): tickets count the starts in flight, each released once however it ends;
// the pool's wait returns at once when none is held and is bounded when one is.
#include "sandbox/start_gate.h"

#include <gtest/gtest.h>

#include <thread>
#include <utility>

namespace capsule::sandbox {
namespace {

using namespace std::chrono_literals;

TEST(StartGate, TicketsCountStartsAndReleaseOnce) {
  auto gate = std::make_shared<StartGate>();
  EXPECT_EQ(gate->held(), 0);
  {
    StartGate::Ticket first = gate->enter();
    StartGate::Ticket second = gate->enter();
    EXPECT_EQ(gate->held(), 2);
    first.release();
    first.release();  // released already: nothing more
    EXPECT_EQ(gate->held(), 1);
    StartGate::Ticket moved = std::move(second);
    EXPECT_EQ(gate->held(), 1) << "a moved ticket is still one start";
    second = gate->enter();  // the moved-from ticket takes a new start
    EXPECT_EQ(gate->held(), 2);
  }
  EXPECT_EQ(gate->held(), 0) << "destroyed tickets release theirs";
}

TEST(StartGate, WaitIsClearAtOnceWithoutTicketsAndBoundedWithOne) {
  auto gate = std::make_shared<StartGate>();
  EXPECT_TRUE(gate->wait_clear(10s)) << "nothing in flight: no wait";
  StartGate::Ticket held = gate->enter();
  EXPECT_FALSE(gate->wait_clear(1ms)) << "a start in flight: the wait ends at its bound, not clear";
  std::thread releaser([&held] {
    std::this_thread::sleep_for(20ms);
    held.release();
  });
  EXPECT_TRUE(gate->wait_clear(60s)) << "the release wakes the waiter";
  releaser.join();
}

TEST(StartGate, ATicketKeepsItsGateUntilReleased) {
  StartGate::Ticket ticket;
  std::weak_ptr<StartGate> watch;
  {
    auto gate = std::make_shared<StartGate>();
    watch = gate;
    ticket = gate->enter();
  }
  EXPECT_FALSE(watch.expired()) << "an exec's ticket may outlive the launcher that handed it out";
  ticket.release();
  EXPECT_TRUE(watch.expired());
}

}  // namespace
}  // namespace capsule::sandbox
