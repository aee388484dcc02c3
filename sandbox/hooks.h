// RunHooks: optional per-run callbacks for callers that stream output or cancel from outside (the daemon).
// Kept apart from the launcher so the supervisor can use it without depending on the launcher.
#pragma once

#include <atomic>
#include <functional>
#include <string_view>

namespace capsule::sandbox {

enum class OutputStream { kStdout, kStderr };

struct RunHooks {
  std::function<void(OutputStream, std::string_view)> on_output;  // called on the supervising thread
  const std::atomic<bool>* cancel = nullptr;                      // polled; true: TERM, grace, KILL
};

}  // namespace capsule::sandbox
