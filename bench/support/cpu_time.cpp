// CPU time readings shared by the benchmarks (see cpu_time.h).
#include "support/cpu_time.h"

#include <sys/resource.h>

#include <fstream>
#include <string>

namespace capsule::bench {

double rusage_ms(int who) {
  rusage usage{};
  getrusage(who, &usage);
  auto ms = [](const timeval& t) { return static_cast<double>(t.tv_sec) * 1000.0 + static_cast<double>(t.tv_usec) / 1000.0; };
  return ms(usage.ru_utime) + ms(usage.ru_stime);
}

std::pair<long long, long long> machine_cpu() {
  std::ifstream file("/proc/stat");
  std::string cpu;
  long long user, nice, system, idle, iowait, irq, softirq, steal;
  file >> cpu >> user >> nice >> system >> idle >> iowait >> irq >> softirq >> steal;
  const long long busy = user + nice + system + irq + softirq + steal;
  return {busy, busy + idle + iowait};
}

}  // namespace capsule::bench
