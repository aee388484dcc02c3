// Re-attaching to an exec: one thread per output stream follows GET .../stream?stream=S&from=N and writes what
// comes under one mutex that also counts it, so a detach always knows the exact offsets to come back from.
#include "client/session_attach.h"

#include <unistd.h>

#include <array>
#include <charconv>
#include <chrono>
#include <cstdlib>
#include <exception>
#include <iostream>
#include <mutex>
#include <thread>

#include "client/cli_session.h"
#include "client/json_read.h"
#include "client/run_stream.h"
#include "client/run_view.h"

namespace capsule::client {
namespace {

using nlohmann::json;

constexpr std::array<const char*, 2> kStreamNames = {"stdout", "stderr"};
constexpr std::array<int, 2> kStreamFds = {STDOUT_FILENO, STDERR_FILENO};

// What was relayed of each stream: the offset just past it. A piece is written and counted under `mutex`.
struct Relayed {
  std::timed_mutex mutex;
  std::array<std::uint64_t, 2> next{};

  AttachOffsets offsets() const { return {next[0], next[1]}; }
};

// Follows stream `index` from relayed.next[index] until the exec ends; returns the bytes the daemon's stored log
// of it dropped (its log cap: X-Capsule-Log-Dropped-Bytes).
std::uint64_t follow_stream(const http::HttpClient& client, const std::string& target, std::size_t index,
                            Relayed& relayed) {
  const http::HttpResponse response = client.stream(
      "GET", target + "?stream=" + kStreamNames[index] + "&from=" + std::to_string(relayed.next[index]), nullptr, {},
      [&](std::string_view piece) {
        std::lock_guard lock(relayed.mutex);
        relay_output(kStreamFds[index], piece);
        relayed.next[index] += piece.size();
      });
  http::throw_if_error(response);
  std::uint64_t dropped = 0;
  if (const auto it = response.headers.find("x-capsule-log-dropped-bytes"); it != response.headers.end()) {
    std::from_chars(it->second.data(), it->second.data() + it->second.size(), dropped);
  }
  return dropped;
}

}  // namespace

std::string attach_command(const std::string& session_id, const std::string& exec_id, const AttachOffsets& from) {
  std::string command = "capsule session attach " + session_id + " " + exec_id;
  if (from.stdout_from > 0) command += " --from " + std::to_string(from.stdout_from);
  if (from.stderr_from > 0) command += " --stderr-from " + std::to_string(from.stderr_from);
  return command;
}

int attach_exec(const http::HttpClient& client, const std::string& session_id, const std::string& exec_id,
                const AttachOffsets& from) {
  const std::string target = exec_path(session_id, exec_id);
  http::request_json(client, "GET", target);  // an unknown session or exec fails here, before any output
  Relayed relayed;
  relayed.next = {from.stdout_from, from.stderr_from};
  InterruptWatcher watcher("exec", [&](const std::string&) {
    // A writer blocked on a full pipe must not keep us here: then the offsets are those counted so far.
    const bool locked = relayed.mutex.try_lock_for(std::chrono::seconds(1));
    std::cerr << "capsule: detached; exec " << exec_id << " keeps running. Re-attach: "
              << attach_command(session_id, exec_id, relayed.offsets()) << "\n";
    if (locked) relayed.mutex.unlock();
    std::_Exit(kExitStoppedWaiting);
  });
  watcher.set_id(exec_id);
  watcher.watch_on_a_thread();  // two streams, each read on a thread of its own

  // Either stream failing ends the attach at once (the other may follow the exec for hours): the error, where
  // to re-attach from, exit 125.
  const auto give_up = [&](const std::exception& e) {
    const bool locked = relayed.mutex.try_lock_for(std::chrono::seconds(1));
    std::cerr << "capsule: " << e.what() << "\ncapsule: lost exec " << exec_id << "'s output; re-attach: "
              << attach_command(session_id, exec_id, relayed.offsets()) << "\n";
    if (locked) relayed.mutex.unlock();
    std::_Exit(kExitCapsuleFailed);
  };
  std::array<std::uint64_t, 2> dropped{};
  std::thread stderr_thread([&] {
    try {
      dropped[1] = follow_stream(client, target + "/stream", 1, relayed);
    } catch (const std::exception& e) {
      give_up(e);
    }
  });
  try {
    dropped[0] = follow_stream(client, target + "/stream", 0, relayed);
  } catch (const std::exception& e) {
    give_up(e);
  }
  stderr_thread.join();

  // Both streams end when the daemon's record says the exec has ended, so this is its final run object.
  const json run = http::request_json(client, "GET", target);
  const std::string state = text(run, "state");
  if (state == "queued" || state == "running") {
    throw std::runtime_error("the output of exec " + exec_id + " ended while it is still " + state + "; re-attach: " +
                             attach_command(session_id, exec_id, relayed.offsets()));
  }
  const std::uint64_t missing = dropped[0] + dropped[1];
  return report_run_end(run, false, missing,
                        "capsule: capsuled kept only part of this exec's output (" + std::to_string(missing) +
                            " bytes dropped past its log cap, where the output says so)");
}

}  // namespace capsule::client
