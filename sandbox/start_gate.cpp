// StartGate (see start_gate.h): a count of held tickets under a mutex, and a condition for "none held".
#include "sandbox/start_gate.h"

namespace capsule::sandbox {

StartGate::Ticket::Ticket(std::shared_ptr<StartGate> gate) : gate_(std::move(gate)) {
  std::lock_guard lock(gate_->mutex_);
  ++gate_->held_;
}

StartGate::Ticket& StartGate::Ticket::operator=(Ticket&& other) noexcept {
  if (this != &other) {
    release();
    gate_ = std::move(other.gate_);
  }
  return *this;
}

void StartGate::Ticket::release() {
  if (!gate_) return;
  {
    std::lock_guard lock(gate_->mutex_);
    if (--gate_->held_ == 0) gate_->clear_.notify_all();
  }
  gate_.reset();
}

bool StartGate::wait_clear(std::chrono::milliseconds most) {
  std::unique_lock lock(mutex_);
  return clear_.wait_for(lock, most, [this] { return held_ == 0; });
}

int StartGate::held() const {
  std::lock_guard lock(mutex_);
  return held_;
}

}  // namespace capsule::sandbox
