// `capsule runs ls|show|logs|cancel|rm`: one request each to capsuled's /v1/runs routes (logs streams), and the
// path of a run that `capsule run` cancels by too.
#pragma once

#include <optional>
#include <string>
#include <vector>

namespace capsule::client {

// /v1/runs/{id}, the id URL-encoded.
std::string run_path(const std::string& id);

// Each returns the process exit status and throws (ConnectError, ResponseError, runtime_error) on failure;
// main prints "capsule: <what>" and exits 1.
// `with_probes`: stacks' probe runs too (?include=probes; the list leaves them out).
int cmd_runs_ls(const std::string& socket, const std::string& state, const std::string& label,
                std::optional<int> limit, const std::string& after, bool with_probes, bool json);
int cmd_runs_show(const std::string& socket, const std::string& id);
// `tail`: only the last N lines (?tail=N; the daemon checks N), then with `follow` what the run writes next.
int cmd_runs_logs(const std::string& socket, const std::string& id, bool stderr_stream, bool follow,
                  std::optional<int> tail);
int cmd_runs_cancel(const std::string& socket, const std::string& id);
// DELETE /v1/runs/{id} for each id (finished runs: record and logs); prints each removed id, reports each
// failure on stderr and then exits 1.
int cmd_runs_rm(const std::string& socket, const std::vector<std::string>& ids);
// POST /v1/runs/{id}/commit {"ref"}: prints the new image's digest.
int cmd_runs_commit(const std::string& socket, const std::string& id, const std::string& ref);

}  // namespace capsule::client
