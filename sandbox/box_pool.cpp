// BoxPool: a take finds its environment by equality and pops a box that is still healthy; the fill thread
// tops every wanted environment up to its count, backs off after failures (1 s, doubling up to 5 min: a full disk
// must not be fought over), and lets idle ones go.
#include "sandbox/box_pool.h"

#include <poll.h>
#include <sys/stat.h>

#include <algorithm>

#include "base/thread_name.h"
#include "sandbox/command.h"
#include "sandbox/error.h"

namespace capsule::sandbox {
namespace {

using Clock = std::chrono::steady_clock;
constexpr std::chrono::seconds kReadyDeadline{10};
constexpr std::chrono::milliseconds kFirstBackoff{1000};
constexpr std::chrono::milliseconds kLongestBackoff{std::chrono::minutes(5)};
constexpr std::chrono::milliseconds kYieldToStartsAtMost{50};  // a stream of starts still lets the pool refill

// Reads whatever the box has to say without waiting: a box whose init died while it waited shows ended().
void catch_up(Sandbox& box) {
  std::vector<pollfd> wanted = box.interest();
  if (wanted.empty()) return;
  if (poll(wanted.data(), static_cast<nfds_t>(wanted.size()), 0) <= 0) return;
  for (const pollfd& p : wanted) box.handle(p.fd, p.revents);
}

bool healthy(const Sandbox& box) { return box.ready() && !box.ended() && !box.setup_error() && !box.frozen(); }

}  // namespace

BoxPool::Sources BoxPool::sources_of(const EnvironmentSpec& spec) {
  Sources sources;
  auto add = [&](const std::string& path) {
    struct stat st {};
    if (stat(path.c_str(), &st) != 0) st = {};  // gone: matches no box made while it was there
    sources.emplace_back(static_cast<std::uint64_t>(st.st_dev), static_cast<std::uint64_t>(st.st_ino));
  };
  for (const auto& layer : spec.rootfs_layers) add(layer);
  for (const auto& bind : spec.mounts) add(bind.source);
  return sources;
}

void BoxPool::let_go_locked(Wanted& wanted) {
  stats_.expired += wanted.ready.size();
  for (auto& ready : wanted.ready) reaper_.adopt(std::move(ready.box));
  wanted.ready.clear();
}

std::vector<std::unique_ptr<Sandbox>> BoxPool::shed() {
  std::vector<std::unique_ptr<Sandbox>> boxes;
  std::lock_guard lock(mutex_);
  for (auto& wanted : wanted_) {
    for (auto& ready : wanted.ready) boxes.push_back(std::move(ready.box));
    wanted.ready.clear();
  }
  stats_.expired += boxes.size();
  return boxes;
}

bool poolable(const EnvironmentSpec& spec) {
  const bool writable_bind = std::any_of(spec.mounts.begin(), spec.mounts.end(), [](const BindMount& m) { return !m.read_only; });
  // A box in a stack's network namespace belongs to that stack alone (and would keep the namespace alive).
  return spec.overlays.empty() && spec.upper_dir.empty() && spec.loopback_listeners.empty() && spec.protect.empty() &&
         spec.network_namespace.empty() && !writable_bind;
}

BoxPool::BoxPool(Create create, BoxReaper& reaper, PoolOptions options, std::shared_ptr<StartGate> starts)
    : create_(std::move(create)), reaper_(reaper), options_(options), starts_(std::move(starts)) {
  thread_ = std::thread([this] {
    base::name_this_thread("box-pool");
    fill();
  });
}

BoxPool::~BoxPool() {
  {
    std::lock_guard lock(mutex_);
    stopping_ = true;
  }
  wake_.notify_all();
  thread_.join();
  for (auto& wanted : wanted_) let_go_locked(wanted);
}

std::unique_ptr<Sandbox> BoxPool::take(const EnvironmentSpec& spec) {
  if (options_.boxes_per_environment == 0 || !poolable(spec)) return nullptr;
  const Sources now = sources_of(spec);
  for (;;) {
    Ready ready;
    {
      std::lock_guard lock(mutex_);
      auto it = std::find_if(wanted_.begin(), wanted_.end(), [&](const Wanted& w) { return w.environment == spec; });
      if (it == wanted_.end()) {
        ++stats_.misses;
        wanted_.push_front(Wanted{spec, {}, Clock::now(), {}});
        while (wanted_.size() > std::max<std::size_t>(1, options_.environments)) {
          let_go_locked(wanted_.back());
          wanted_.pop_back();
        }
        wake_.notify_all();
        return nullptr;
      }
      it->asked = Clock::now();
      wanted_.splice(wanted_.begin(), wanted_, it);
      if (it->ready.empty()) {
        ++stats_.misses;
        return nullptr;
      }
      ready = std::move(it->ready.front());
      it->ready.pop_front();
      wake_.notify_all();  // one to make again
    }
    const bool same_sources = ready.sources == now;
    if (same_sources) catch_up(*ready.box);
    if (same_sources && healthy(*ready.box)) {
      std::lock_guard lock(mutex_);
      ++stats_.hits;
      ready.box->times_.taken = monotonic_ns();
      return std::move(ready.box);
    }
    {
      std::lock_guard lock(mutex_);
      ++(same_sources ? stats_.failed : stats_.stale);
    }
    reaper_.adopt(std::move(ready.box));
  }
}

std::size_t BoxPool::ready_count() const {
  std::lock_guard lock(mutex_);
  std::size_t count = 0;
  for (const auto& wanted : wanted_) count += wanted.ready.size();
  return count;
}

bool BoxPool::has_ready(const EnvironmentSpec& spec) const {
  std::lock_guard lock(mutex_);
  auto it = std::find_if(wanted_.begin(), wanted_.end(), [&](const Wanted& w) { return w.environment == spec; });
  return it != wanted_.end() && !it->ready.empty();
}

PoolStats BoxPool::stats() const {
  std::lock_guard lock(mutex_);
  return stats_;
}

std::unique_ptr<Sandbox> BoxPool::make_ready(const EnvironmentSpec& environment) {
  std::unique_ptr<Sandbox> box;
  try {
    box = create_(environment);
  } catch (const std::exception&) {
    return nullptr;  // the run that asks next makes its own box and reports why
  }
  const auto deadline = Clock::now() + kReadyDeadline;
  while (!box->ready() && !box->ended() && !box->setup_error() && Clock::now() < deadline) {
    std::vector<pollfd> wanted = box->interest();
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now()).count();
    if (poll(wanted.data(), static_cast<nfds_t>(wanted.size()), static_cast<int>(std::max<std::int64_t>(1, left))) < 0 &&
        errno != EINTR) {
      break;
    }
    for (const pollfd& p : wanted) box->handle(p.fd, p.revents);
  }
  if (!healthy(*box)) {
    reaper_.adopt(std::move(box));
    return nullptr;
  }
  box->prepare_exec();
  return box;
}

Clock::time_point BoxPool::expire_locked(Clock::time_point now) {
  Clock::time_point next = Clock::time_point::max();
  for (auto it = wanted_.begin(); it != wanted_.end();) {
    if (now - it->asked >= options_.idle_ttl) {
      let_go_locked(*it);
      it = wanted_.erase(it);
      continue;
    }
    next = std::min(next, it->asked + options_.idle_ttl);
    ++it;
  }
  return next;
}

void BoxPool::fill() {
  std::unique_lock lock(mutex_);
  while (!stopping_) {
    const Clock::time_point now = Clock::now();
    Clock::time_point next_wake = expire_locked(now);
    // The wanted environment with the fewest ready boxes, not backing off, goes first.
    Wanted* short_of = nullptr;
    for (auto& wanted : wanted_) {
      if (wanted.ready.size() >= options_.boxes_per_environment) continue;
      if (wanted.retry_after > now) {
        next_wake = std::min(next_wake, wanted.retry_after);
        continue;
      }
      if (!short_of || wanted.ready.size() < short_of->ready.size()) short_of = &wanted;
    }
    if (!short_of) {
      if (next_wake == Clock::time_point::max()) wake_.wait(lock);
      else wake_.wait_until(lock, next_wake);
      continue;
    }
    const EnvironmentSpec environment = short_of->environment;
    lock.unlock();
    // Measured on 2 vCPUs: a box made while a pooled one hands over its command delayed that command's execve
    // from 3.1 to 5.8 ms (the making and the spawner's clone took the CPUs its standby and init needed).
    if (starts_) starts_->wait_clear(kYieldToStartsAtMost);
    const bool may_fill = !options_.may_fill || options_.may_fill();
    const Sources sources = sources_of(environment);  // before: a path replaced while the box is made shows then
    std::unique_ptr<Sandbox> box = may_fill ? make_ready(environment) : nullptr;
    lock.lock();
    auto it = std::find_if(wanted_.begin(), wanted_.end(), [&](const Wanted& w) { return w.environment == environment; });
    if (!box) {
      if (may_fill) ++stats_.failed;
      if (it != wanted_.end()) {
        if (may_fill) it->backoff = it->backoff.count() == 0 ? kFirstBackoff : std::min(kLongestBackoff, it->backoff * 2);
        it->retry_after = Clock::now() + (may_fill ? it->backoff : kFirstBackoff);
      }
      continue;
    }
    ++stats_.made;
    if (it != wanted_.end()) it->backoff = {};
    if (it == wanted_.end() || stopping_) {  // dropped or stopped meanwhile
      ++stats_.expired;
      reaper_.adopt(std::move(box));
      continue;
    }
    it->ready.push_back(Ready{std::move(box), sources});
  }
}

}  // namespace capsule::sandbox
