// CPU time as the benchmarks count it: this process's own or its reaped children's (getrusage), and the whole
// machine's busy and total jiffies (/proc/stat), which also holds kernel work done in kworkers.
#pragma once

#include <utility>

namespace capsule::bench {

// CPU time (ms) of this process (RUSAGE_SELF) or of its reaped children (RUSAGE_CHILDREN).
double rusage_ms(int who);

// Busy (user, nice, system, irq, softirq, steal) and total jiffies of the whole machine (first line of /proc/stat).
std::pair<long long, long long> machine_cpu();

}  // namespace capsule::bench
