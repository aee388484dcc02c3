// Seccomp profiles in the OCI / Docker JSON format, compiled to a BPF program with libseccomp.
// The program is compiled once per profile in the launcher and installed in the sandbox as the last setup step
// (or by a waiting standby, ahead, when it allows what the standby still calls: allows_calls).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace capsule::sandbox {

struct SeccompArg {
  unsigned index = 0;
  std::uint64_t value = 0;
  std::uint64_t value_two = 0;
  std::string op;  // SCMP_CMP_EQ, SCMP_CMP_MASKED_EQ, ...
};

struct SeccompRule {
  std::vector<std::string> names;
  std::string action;  // SCMP_ACT_ALLOW, SCMP_ACT_ERRNO, SCMP_ACT_KILL_PROCESS, ...
  std::uint32_t errno_ret = 0;
  bool has_errno_ret = false;
  std::vector<SeccompArg> args;
};

struct SeccompProfile {
  std::string default_action;
  std::uint32_t default_errno_ret = 1;  // EPERM, as Docker
  std::vector<std::string> architectures;
  std::vector<SeccompRule> syscalls;  // only the rules that apply to this host (includes/excludes resolved)
};

// Parses and validates a profile; rules gated on capabilities (includes.caps) are dropped because sandboxes
// hold none, rules for other arches or newer kernels (minKernel) are dropped too. Throws SandboxError
// (step "seccomp") naming the offending field.
SeccompProfile parse_seccomp_profile(const std::string& json_text);

// Compiles to a raw BPF program (struct sock_filter[] bytes) for the native architecture.
// Syscall names unknown to libseccomp are skipped, as Docker does. Throws SandboxError.
std::vector<std::uint8_t> compile_seccomp(const SeccompProfile& profile);

// Installs a program produced by compile_seccomp on the calling thread (requires no_new_privs).
// Returns 0 or an errno value; async-signal-safe.
int install_seccomp_program(const std::vector<std::uint8_t>& program);

// A call to be made under a program: its native number, and those of its leading arguments known in advance
// (the others, and the registers a call with fewer leaves as they are: whatever they will be).
struct ExpectedCall {
  long nr = -1;
  std::vector<std::uint64_t> args;
};

// Whether `program` allows every one of `calls`: for each, the path it takes ends in SECCOMP_RET_ALLOW and reads
// only the number, the architecture and arguments given (the kernel's own test for its per-syscall cache, with
// known arguments followed too). False for anything it cannot follow, and on an architecture it does not know.
bool allows_calls(const std::vector<std::uint8_t>& program, const std::vector<ExpectedCall>& calls);

}  // namespace capsule::sandbox
