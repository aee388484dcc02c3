// Shared helpers of the test suites: one Launcher per test binary, a ready-to-run spec on the host image (hostile
// programs from sandbox/testcases bind-mounted read-only at /opt/testcases), and small file and /proc helpers.
#pragma once

#include <sys/types.h>

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

#include "sandbox/launcher.h"
#include "sandbox/spec.h"

namespace capsule::testing {

// The source tree, the build's bin/ and its testcases/ (what CAPSULE_SOURCE_DIR, CAPSULE_BIN_DIR and
// CAPSULE_TESTCASES_DIR name in the suites).
std::string source_dir();
std::string bin_dir();
std::string testcases_dir();

// A process-wide Launcher using a scratch dir under /tmp and the shared_cgroup_parent(), both this process's own
// and removed at its exit.
sandbox::Launcher& shared_launcher();
std::string shared_cgroup_parent();  // "capsule-test-<pid>"

// argv on the host image with policies/default.json, /opt/testcases mounted, 60 s wall limit.
sandbox::SandboxSpec host_spec(std::vector<std::string> argv);

// The text of policies/default.json.
const std::string& default_seccomp_profile();

// Path of a hostile program inside the sandbox, e.g. testcase("mount_proc") -> /opt/testcases/mount_proc.
std::string testcase(const std::string& name);

// True when something accepts a TCP connection on the host's 127.0.0.1:port (in the caller's network namespace):
// what a sandbox's or a stack's listener must never be.
bool host_loopback_accepts(int port);

// The whole of a /proc file (at most 1 MiB), or "" when it cannot be read. A process that exits while its file
// is read makes the read fail with ESRCH (an istreambuf_iterator throws then), so scans of /proc use this.
std::string read_proc_file(const std::string& path);

inline constexpr std::uint64_t kMiB = 1024 * 1024;

// How many descriptors this process has open (/proc/self/fd): a leak shows as a count that grows.
std::size_t open_fds();

// The whole of a file ("" when it cannot be opened): what a test reads back.
std::string slurp(const std::filesystem::path& path);

// A sandbox Result for a failed assertion's message: status, reason, exit code, signal and the output heads.
std::string describe(const sandbox::Result& result);

// Pids of the live processes whose command line is exactly argv (zombies have none, so never match).
std::vector<pid_t> processes_running(const std::vector<std::string>& argv);

}  // namespace capsule::testing
