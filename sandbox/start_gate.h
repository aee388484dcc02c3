// StartGate: work somebody waits for (a run, an exec) holds a ticket from its request until it ends; work done
// ahead (the pool making boxes) waits for no ticket to be held, so it never takes a CPU from such work.
#pragma once

#include <chrono>
#include <condition_variable>
#include <memory>
#include <mutex>

namespace capsule::sandbox {

class StartGate : public std::enable_shared_from_this<StartGate> {
 public:
  // Held while a run or exec is on its way; release() (or destruction) ends it, once.
  class Ticket {
   public:
    Ticket() = default;
    explicit Ticket(std::shared_ptr<StartGate> gate);
    ~Ticket() { release(); }
    Ticket(Ticket&& other) noexcept : gate_(std::move(other.gate_)) {}
    Ticket& operator=(Ticket&& other) noexcept;
    Ticket(const Ticket&) = delete;
    Ticket& operator=(const Ticket&) = delete;
    void release();

   private:
    std::shared_ptr<StartGate> gate_;
  };

  Ticket enter() { return Ticket(shared_from_this()); }
  // Returns once no ticket is held, or after `most` (a long build, or a stream of runs, must not stop the pool
  // for good). Whether it was clear.
  bool wait_clear(std::chrono::milliseconds most);
  int held() const;

 private:
  mutable std::mutex mutex_;
  std::condition_variable clear_;
  int held_ = 0;
};

}  // namespace capsule::sandbox
