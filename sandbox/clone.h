// clone3 of a sandbox child into new user, mount, pid, ipc, uts and net namespaces. Between clone and
// execve of capsule-init the child runs only async-signal-safe code, so any thread may call this.
#pragma once

#include <sys/types.h>

#include <array>
#include <cstdint>

namespace capsule::sandbox {

// Descriptors the child keeps; everything else is closed before execve.
// In capsule-init they are: 0 stdin, 1 stdout, 2 stderr, 3 the control channel.
struct ChildFds {
  int stdin_fd;
  int stdout_fd;
  int stderr_fd;
  int control_fd;
  int init_exe_fd;  // capsule-init, opened by the launcher
  int go_fd;        // read end of a pipe: one byte once the launcher has set everything up
  int network_fd = -1;  // a network namespace the child is cloned into (open_network_namespace); -1: a new one
};

struct ClonedChild {
  pid_t pid;
  int pidfd;  // close-on-exec, owned by the caller
};

// argv/envp must stay valid until the call returns (the child copies nothing).
// The child blocks until one byte arrives on go_fd (after the parent wrote its id maps and queued the
// config on the control channel, so the child's wake-up does not preempt that work), then
// becomes root of its user namespace and executes capsule-init. Throws SandboxError (step "clone").
// With fds.network_fd the calling thread joins that namespace for the clone3 and returns to its own after.
// `extra_flags`: CLONE_PARENT from the spawner (sandbox/spawner.h), so that the daemon is the child's parent.
ClonedChild clone_sandbox_child(const ChildFds& fds, char* const argv[], char* const envp[],
                                std::uint64_t extra_flags = 0);

// Between clone and execveat (raw syscalls only): `wanted` becomes descriptors 0..4, everything else is closed,
// and 4 (the executable, for execveat) is close-on-exec. False when a step failed.
bool keep_only_descriptors(const std::array<int, 5>& wanted);

// Explains an exit code of the child that never reached capsule-init, or nullptr.
const char* describe_child_exit(int code);

}  // namespace capsule::sandbox
