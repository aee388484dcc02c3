// libFuzzer target: bytes as a POST /v1/runs body through spec::parse_run_spec, under the default limit policy
// and a policy without ceilings; checks the invariants of an accepted spec and that to_json parses back to it.
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <limits>
#include <nlohmann/json.hpp>
#include <string>

#include "http/error_status.h"
#include "http/response.h"
#include "spec/run_spec.h"

namespace {

namespace http = capsule::http;
using capsule::spec::Limits;
using capsule::spec::LimitPolicy;
using capsule::spec::RunSpec;
using nlohmann::json;

void check(bool ok, const char* invariant) {
  if (ok) return;
  std::fprintf(stderr, "fuzz_run_spec: invariant violated: %s\n", invariant);
  std::abort();
}

bool has_nul(const std::string& text) { return text.find('\0') != std::string::npos; }

bool is_absolute_clean(const std::string& path) {
  if (path.empty() || path.front() != '/' || has_nul(path)) return false;
  for (std::size_t start = 1; start <= path.size();) {
    std::size_t end = path.find('/', start);
    if (end == std::string::npos) end = path.size();
    if (path.compare(start, end - start, "..") == 0) return false;
    start = end + 1;
  }
  return true;
}

// The launcher turns durations into int64 nanoseconds added to a monotonic clock reading
// (sandbox/supervisor.cpp): an accepted duration must stay well clear of overflowing there (~146 years).
constexpr std::int64_t kMaxSaneMs = std::numeric_limits<std::int64_t>::max() / 1'000'000 / 2;

void check_duration(std::chrono::milliseconds value, std::chrono::milliseconds maximum, const char* invariant) {
  check(value.count() >= 0, invariant);
  check(value.count() <= kMaxSaneMs, invariant);
  if (maximum.count() != 0) check(value <= maximum, invariant);
}

// Mirrors what sandbox/spec.cpp's validate_spec demands of the fields a RunSpec controls, plus the
// daemon's ceilings: a spec the API accepts must not be one the launcher then refuses or misreads.
void check_invariants(const RunSpec& spec, const LimitPolicy& policy) {
  check(!spec.argv.empty() && !spec.argv[0].empty(), "argv names a command");
  for (const auto& arg : spec.argv) check(!has_nul(arg), "argv holds no NUL byte (execve would truncate it)");
  for (const auto& [key, value] : spec.env) {
    check(!key.empty() && key.find('=') == std::string::npos, "env names are non-empty and have no '='");
    check(!has_nul(key) && !has_nul(value), "env holds no NUL byte (execve would truncate it)");
  }
  if (spec.cwd) check(is_absolute_clean(*spec.cwd), "cwd is absolute and clean");
  if (spec.workspace) check(is_absolute_clean(spec.workspace->path), "workspace.path is absolute and clean");
  check(spec.network == "none", "network is none");
  check(!spec.policy.empty() && spec.policy.size() <= 64 &&
            spec.policy.find_first_not_of("abcdefghijklmnopqrstuvwxyz0123456789_-") == std::string::npos,
        "policy is a plain name (it becomes <policies_dir>/<name>.json)");
  for (const auto& [key, value] : spec.labels) check(!key.empty() && key.size() <= 128, "label keys are 1-128 chars");
  for (const auto& glob : spec.junit_globs) {
    check(!glob.empty() && glob.front() != '/' && glob.find("..") == std::string::npos, "junit globs are relative");
  }

  const Limits& l = spec.limits;
  const Limits& max = policy.maxima;
  check_duration(l.wall_time, max.wall_time, "limits.wall_time is within 0..maximum");
  check_duration(l.cpu_time, max.cpu_time, "limits.cpu_time is within 0..maximum");
  check_duration(l.kill_grace, max.kill_grace, "limits.kill_grace is within 0..maximum");
  auto within = [](std::uint64_t value, std::uint64_t maximum) { return maximum == 0 || value <= maximum; };
  check(within(l.memory_bytes, max.memory_bytes), "limits.memory is within the maximum");
  check(l.memory_bytes == 0 || l.memory_bytes >= (4u << 20), "limits.memory is 0 or at least 4 MiB");
  check(within(l.pids, max.pids) && l.pids > 0, "limits.pids is within 1..maximum");
  check(l.cpus >= 0 && l.cpus <= 1024 && (max.cpus == 0 || l.cpus <= max.cpus), "limits.cpus is within 0..maximum");
  check(within(l.tmp_size_bytes, max.tmp_size_bytes), "limits.tmp_size is within the maximum");
  check(l.tmp_size_bytes >= 4096, "limits.tmp_size is at least 4096 (the launcher's minimum)");
  check(within(l.output_cap_bytes, max.output_cap_bytes) && l.output_cap_bytes > 0, "limits.output_cap is positive");
}

void run(const json& body, const LimitPolicy& policy) {
  RunSpec spec;
  try {
    spec = capsule::spec::parse_run_spec(body, policy);
  } catch (const http::ApiError& e) {
    check(http::status_for(e.code()) == 400 && e.code() == "invalid_spec", "a rejected spec is 400 invalid_spec");
    // (No check on what(): it is a C string, and an unknown field named "\u0000" makes it empty.)
    return;
  }
  check_invariants(spec, policy);
  // The printed form is stored and served: it must serialise (strictly: no invalid UTF-8 got in).
  const json printed = capsule::spec::to_json(spec);
  // The stored form is a request: parsing it again must give the same spec.
  RunSpec again;
  try {
    again = capsule::spec::parse_run_spec(json::parse(printed.dump()), policy);
  } catch (const http::ApiError& e) {
    std::fprintf(stderr, "fuzz_run_spec: the re-encoded spec was rejected: %s\n", e.what());
    std::abort();
  }
  check(capsule::spec::to_json(again) == printed, "an accepted spec prints as a request that parses to itself");
}

LimitPolicy unlimited_policy() {
  LimitPolicy policy = capsule::spec::default_limit_policy();
  policy.maxima = capsule::spec::unlimited_limits();  // e.g. "max_limits": {"wall_time": 0} in the config
  return policy;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const json body = json::parse(data, data + size, nullptr, /*allow_exceptions=*/false);
  if (body.is_discarded()) return 0;
  static const LimitPolicy kDefault = capsule::spec::default_limit_policy();
  static const LimitPolicy kUnlimited = unlimited_policy();
  // ApiError is the only way parse_run_spec may refuse; anything else escaping is a bug.
  try {
    run(body, kDefault);
    run(body, kUnlimited);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "fuzz_run_spec: unexpected exception: %s\n", e.what());
    std::abort();
  }
  return 0;
}
