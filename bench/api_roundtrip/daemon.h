// The capsuled that api_roundtrip measures: started on a temporary socket and state dir, waited for until
// /v1/health answers, stopped with SIGTERM; and the one request the benchmark repeats, a run of `true`.
#pragma once

#include <sys/types.h>

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "http/unix_client.h"

namespace capsule::bench::api_roundtrip {

class Daemon {
 public:
  // Forks and execs `binary` with its socket and state dir below `dir`, output to <dir>/capsuled.log; the daemon
  // gets SIGTERM (and drains) if the benchmark dies.
  // `extra` is appended to capsuled's arguments (e.g. --pool-boxes 0 for cold figures).
  Daemon(const std::string& binary, const std::string& dir, const std::vector<std::string>& extra = {});

  // Polls GET /v1/health until it answers 200 and returns the ms that took; dies if the daemon exits or 30 s pass.
  double wait_healthy();

  // SIGTERM, then waits (SIGKILL after 60 s). Returns a description of how it ended.
  std::string stop();

  std::string log_tail() const;  // the last 4000 bytes of its log
  pid_t pid() const { return pid_; }
  const std::string& socket() const { return socket_; }
  std::string describe() const;  // its command line

 private:
  std::string socket_;
  std::string log_;
  std::vector<std::string> command_;
  pid_t pid_ = -1;
};

// One POST /v1/runs?wait=true of `true` on a new connection (as the CLI does); returns the run row and throws
// unless the run succeeded with exit code 0.
nlohmann::json capsule_true(const http::HttpClient& client);

}  // namespace capsule::bench::api_roundtrip
