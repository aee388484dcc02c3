// A box limited to N cpus runs on ceil(N) of the CPUs its launcher may use, so that what the box reports
// (nproc, os.process_cpu_count(), the JVM's processor count) agrees with the limit; the quota still binds.
#pragma once

#include <sys/types.h>

namespace capsule::sandbox {

// Sets the CPU affinity of pid (the box's init; its execs inherit it) to ceil(cpus) of the CPUs this process
// may use, rotating the first CPU from box to box so small boxes spread over the machine. cpus <= 0 or at
// least the number of usable CPUs: nothing to do. Throws SandboxError (step "cpu-affinity").
void confine_to_cpus(pid_t pid, double cpus);

}  // namespace capsule::sandbox
