// How a benchmark stops on an error: "<program>: <message>" on stderr, its clean-up (temp dir, daemon, cgroup)
// run once, exit status 1. One place so every benchmark fails the same way from any of its files.
#pragma once

#include <functional>
#include <string>

namespace capsule::bench {

// The name printed before every message; set first thing in main.
void set_program_name(const char* name);
const char* program_name();

// What die() runs before exiting (replaces the previous one; nullptr for none).
void set_cleanup(std::function<void()> cleanup);

// Runs the clean-up set last, at most once.
void run_cleanup();

[[noreturn]] void die(const std::string& message);

}  // namespace capsule::bench
