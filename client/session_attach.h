// `capsule session attach`: a running or finished exec's output followed from byte offsets until the exec ends,
// relayed to our stdout/stderr, then its exit status; Ctrl-C only detaches (the exec keeps running).
#pragma once

#include <cstdint>
#include <string>

#include "http/unix_client.h"

namespace capsule::client {

// Where to start in each of the exec's output streams (byte offsets, as the daemon's ?from= counts them).
struct AttachOffsets {
  std::uint64_t stdout_from = 0;
  std::uint64_t stderr_from = 0;
};

// The command that re-attaches to exec `exec_id` of `session_id` from `from`.
std::string attach_command(const std::string& session_id, const std::string& exec_id, const AttachOffsets& from);

// Follows both streams of the exec (GET .../execs/{exec_id}/stream, one connection each) until it ends and returns
// run_view's exit status for it, as `session exec` would have. The first SIGINT/SIGTERM prints on stderr how to
// re-attach from what was relayed and exits kExitStoppedWaiting; no signal ever reaches the exec. Throws what the
// client throws (a 404 for an unknown session or exec), and std::runtime_error when a stream ends early.
int attach_exec(const http::HttpClient& client, const std::string& session_id, const std::string& exec_id,
                const AttachOffsets& from);

}  // namespace capsule::client
