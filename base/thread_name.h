// Thread names: each long-lived daemon thread names itself, so top -H, perf and /proc/<pid>/task tell which one
// does the work (all were "capsuled" before, and a profile could not tell the pool from the supervisor).
#pragma once

#include <string_view>

namespace capsule::base {

// The calling thread's name as the kernel shows it: the first 15 bytes of `name`.
void name_this_thread(std::string_view name);

}  // namespace capsule::base
