// CPU affinity that matches a box's cpu limit (see cpu_affinity.h): ceil(cpus) of the launcher's own CPUs,
// starting at a rotating offset.
#include "sandbox/cpu_affinity.h"

#include <sched.h>

#include <atomic>
#include <cmath>
#include <vector>

#include "sandbox/error.h"

namespace capsule::sandbox {

void confine_to_cpus(pid_t pid, double cpus) {
  if (!(cpus > 0)) return;
  cpu_set_t usable;
  CPU_ZERO(&usable);
  if (sched_getaffinity(0, sizeof usable, &usable) != 0) throw_errno("cpu-affinity", "", "sched_getaffinity");
  std::vector<int> ids;
  for (int cpu = 0; cpu < CPU_SETSIZE; ++cpu)
    if (CPU_ISSET(cpu, &usable)) ids.push_back(cpu);
  const auto wanted = static_cast<std::size_t>(std::ceil(cpus));
  if (wanted >= ids.size()) return;
  static std::atomic<std::size_t> next_first{0};
  const std::size_t first = next_first.fetch_add(wanted) % ids.size();
  cpu_set_t chosen;
  CPU_ZERO(&chosen);
  for (std::size_t i = 0; i < wanted; ++i) CPU_SET(ids[(first + i) % ids.size()], &chosen);
  if (sched_setaffinity(pid, sizeof chosen, &chosen) != 0)
    throw_errno("cpu-affinity", "", "sched_setaffinity of the box's init");
}

}  // namespace capsule::sandbox
