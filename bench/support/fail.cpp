// The one failure path of the benchmarks (see fail.h): the program name and the pending clean-up live here so
// helpers in any file can stop the run without knowing which benchmark they serve.
#include "support/fail.h"

#include <cstdio>
#include <cstdlib>
#include <utility>

namespace capsule::bench {
namespace {
const char* g_program = "bench";
std::function<void()> g_cleanup;
}  // namespace

void set_program_name(const char* name) { g_program = name; }
const char* program_name() { return g_program; }

void set_cleanup(std::function<void()> cleanup) { g_cleanup = std::move(cleanup); }

void run_cleanup() {
  if (auto cleanup = std::exchange(g_cleanup, nullptr)) cleanup();
}

void die(const std::string& message) {
  std::fprintf(stderr, "%s: %s\n", g_program, message.c_str());
  run_cleanup();
  std::exit(1);
}

}  // namespace capsule::bench
