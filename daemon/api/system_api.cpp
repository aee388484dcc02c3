// GET /v1/version, /v1/health and /metrics: what the daemon is and how busy it is. Cheap answers from the
// run manager's counters and the ledger's counts, never blocked by runs.
#include <sys/utsname.h>

#include "daemon/api/api.h"
#include "daemon/api/metrics.h"

namespace capsule::daemon {
namespace {

std::string kernel_release() {
  utsname name{};
  uname(&name);
  return name.release;
}

}  // namespace

void register_system_api(http::Router& router, ApiContext& ctx) {
  router.add("GET", "/v1/version", [&ctx](const http::Request&) {
    return http::json_response(200, {{"version", kCapsuleVersion},
                               {"api", "v1"},
                               {"kernel", kernel_release()},
                               {"cgroup_version", ctx.cgroup_version},
                               {"features", {"namespaces", "idmapped-mounts", "overlayfs", "seccomp", "cgroups",
                                             "cow-workspace", "junit", "ndjson-events"}}});
  });
  router.add("GET", "/v1/health", [&ctx](const http::Request&) {
    RunStats stats = ctx.runs.stats();
    return http::json_response(200, {{"status", "ok"}, {"active", stats.active}, {"queued", stats.queued},
                               {"draining", stats.draining}});
  });
  router.add("GET", "/metrics", [&ctx](const http::Request&) {
    return http::Response{200, "text/plain; version=0.0.4", format_metrics(ctx.runs.stats(), ctx.ledger.count_by_state()), {}};
  });
}

}  // namespace capsule::daemon
