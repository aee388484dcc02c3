// Tests for sandbox/seccomp: Docker-format parsing and its errors, host-specific rule selection, compilation,
// and the default policy enforced in a forked child (escapes denied, JVM/Python/gcc toolchains still working).
#include "sandbox/seccomp.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <linux/keyctl.h>
#include <sched.h>
#include <signal.h>
#include <sys/ioctl.h>
#include <sys/mount.h>
#include <sys/prctl.h>
#include <sys/ptrace.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "sandbox/error.h"
#include "tests/support/test_support.h"

namespace capsule::sandbox {
namespace {

#if defined(__x86_64__)
#define NATIVE_GO_ARCH "amd64"
#define NATIVE_SCMP_ARCH "SCMP_ARCH_X86_64"
#define COMPAT_SCMP_ARCHES "SCMP_ARCH_X86", "SCMP_ARCH_X32"
#elif defined(__aarch64__)
#define NATIVE_GO_ARCH "arm64"
#define NATIVE_SCMP_ARCH "SCMP_ARCH_AARCH64"
#define COMPAT_SCMP_ARCHES "SCMP_ARCH_ARM"
#endif

using capsule::testing::slurp;

std::string default_profile_text() { return slurp(std::string(CAPSULE_SOURCE_DIR) + "/policies/default.json"); }

const std::vector<std::uint8_t>& default_program() {
  static const std::vector<std::uint8_t> program = compile_seccomp(parse_seccomp_profile(default_profile_text()));
  return program;
}

// The field a parse error names ("" when the text parses).
std::string error_field(const std::string& text, std::string* message = nullptr) {
  try {
    parse_seccomp_profile(text);
  } catch (const SandboxError& e) {
    EXPECT_EQ(e.cause().step, "seccomp");
    if (message != nullptr) *message = e.what();
    return e.cause().path.empty() ? "<document>" : e.cause().path;
  }
  return "";
}

// Forks; the child sets no_new_privs, installs `program` and runs `body`, then exits 0.
// Returns the child's wait status (install failures exit 100 + errno).
template <typename Body>
int run_confined(const std::vector<std::uint8_t>& program, Body body, int timeout_s = 120) {
  pid_t pid = fork();
  if (pid < 0) return -1;
  if (pid == 0) {
    if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0) _exit(99);
    int error = install_seccomp_program(program);
    if (error != 0) _exit(100 + error);
    body();
    _exit(0);
  }
  int status = 0;
  auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(timeout_s);
  while (waitpid(pid, &status, WNOHANG) == 0) {
    if (std::chrono::steady_clock::now() > deadline) {
      kill(pid, SIGKILL);
      waitpid(pid, &status, 0);
      ADD_FAILURE() << "confined child timed out";
      return status;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  return status;
}

// ---- parsing ----

TEST(SeccompParse, ErrorsNameTheOffendingField) {
  const std::string allow = R"("defaultAction": "SCMP_ACT_ALLOW")";
  auto with_rule = [&](const std::string& rule) { return "{" + allow + R"(, "syscalls": [)" + rule + "]}"; };
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"not json", "<document>"},
      {"[]", "<document>"},
      {"{}", "defaultAction"},
      {R"({"defaultAction": "SCMP_ACT_BOGUS"})", "defaultAction"},
      {R"({"defaultAction": 3})", "defaultAction"},
      {R"({"defaultAction": "SCMP_ACT_ERRNO", "defaultErrnoRet": 70000})", "defaultErrnoRet"},
      {R"({"defaultAction": "SCMP_ACT_ALLOW", "defaultErrnoRet": 1})", "defaultErrnoRet"},
      {"{" + allow + R"(, "defaultActon": "SCMP_ACT_ALLOW"})", "defaultActon"},
      {"{" + allow + R"(, "syscalls": {}})", "syscalls"},
      {"{" + allow + R"(, "flags": ["SECCOMP_FILTER_FLAG_BOGUS"]})", "flags[0]"},
      {"{" + allow + R"(, "architectures": ["x86_64"]})", "architectures[0]"},
      {"{" + allow + R"(, "architectures": ["SCMP_ARCH_X86_64"], "archMap": []})", "archMap"},
      {"{" + allow + R"(, "archMap": [{"architecture": "SCMP_ARCH_X86_64", "subArchitectures": [3]}]})",
       "archMap[0].subArchitectures[0]"},
      {"{" + allow + R"(, "listenerPath": 1})", "listenerPath"},
      {with_rule(R"({"names": "read", "action": "SCMP_ACT_ERRNO"})"), "syscalls[0].names"},
      {with_rule(R"({"names": [1], "action": "SCMP_ACT_ERRNO"})"), "syscalls[0].names[0]"},
      {with_rule(R"({"action": "SCMP_ACT_ERRNO"})"), "syscalls[0].names"},
      {with_rule(R"({"name": "read", "names": ["write"], "action": "SCMP_ACT_ERRNO"})"), "syscalls[0].name"},
      {with_rule(R"({"names": ["read"]})"), "syscalls[0].action"},
      {with_rule(R"({"names": ["read"], "action": "SCMP_ACT_FOO"})"), "syscalls[0].action"},
      {with_rule(R"({"names": ["read"], "action": "SCMP_ACT_ERRNO", "errnoRet": "1"})"), "syscalls[0].errnoRet"},
      {with_rule(R"({"names": ["read"], "action": "SCMP_ACT_LOG", "errnoRet": 1})"), "syscalls[0].errnoRet"},
      {with_rule(R"({"names": ["read"], "action": "SCMP_ACT_LOG", "include": {}})"), "syscalls[0].include"},
      {with_rule(R"({"names": ["read"], "action": "SCMP_ACT_LOG", "includes": {"minKernel": "four"}})"),
       "syscalls[0].includes.minKernel"},
      {with_rule(R"({"names": ["read"], "action": "SCMP_ACT_LOG", "excludes": {"caps": "CAP_SYS_ADMIN"}})"),
       "syscalls[0].excludes.caps"},
      {with_rule(R"({"names": ["read"], "action": "SCMP_ACT_LOG", "args": {}})"), "syscalls[0].args"},
      {with_rule(R"({"names": ["read"], "action": "SCMP_ACT_LOG", "args": [{"index": 6, "op": "SCMP_CMP_EQ"}]})"),
       "syscalls[0].args[0].index"},
      {with_rule(R"({"names": ["read"], "action": "SCMP_ACT_LOG", "args": [{"index": 0, "op": "SCMP_CMP_XOR"}]})"),
       "syscalls[0].args[0].op"},
      {with_rule(R"({"names": ["read"], "action": "SCMP_ACT_LOG", "args": [{"index": 0}]})"),
       "syscalls[0].args[0].op"},
      {with_rule(R"({"names": ["read"], "action": "SCMP_ACT_LOG",
                     "args": [{"index": 0, "value": -1, "op": "SCMP_CMP_EQ"}]})"),
       "syscalls[0].args[0].value"},
      {with_rule(R"({"names": ["read"], "action": "SCMP_ACT_LOG",
                     "args": [{"index": 0, "op": "SCMP_CMP_EQ", "x": 1}]})"),
       "syscalls[0].args[0].x"},
  };
  for (const auto& [text, field] : cases) {
    std::string message;
    EXPECT_EQ(error_field(text, &message), field) << text;
    if (field != "<document>") {
      EXPECT_NE(message.find(field), std::string::npos) << message;
    }
  }
}

TEST(SeccompParse, NotifyAndTraceAreRejectedAsUnsupported) {
  for (const char* action : {"SCMP_ACT_NOTIFY", "SCMP_ACT_TRACE"}) {
    std::string message;
    std::string rule = std::string(R"({"names": ["read"], "action": ")") + action + "\"}";
    EXPECT_EQ(error_field(R"({"defaultAction": "SCMP_ACT_ALLOW", "syscalls": [)" + rule + "]}", &message),
              "syscalls[0].action");
    EXPECT_NE(message.find("not supported"), std::string::npos) << message;
    EXPECT_EQ(error_field(std::string(R"({"defaultAction": ")") + action + "\"}"), "defaultAction");
  }
}

// A Docker-format profile exercising every key Docker's own profiles use.
const char* const kDockerStyleProfile = R"({
  "defaultAction": "SCMP_ACT_ERRNO",
  "defaultErrnoRet": 1,
  "archMap": [
    {"architecture": "SCMP_ARCH_X86_64", "subArchitectures": ["SCMP_ARCH_X86", "SCMP_ARCH_X32"]},
    {"architecture": "SCMP_ARCH_AARCH64", "subArchitectures": ["SCMP_ARCH_ARM"]},
    {"architecture": "SCMP_ARCH_RISCV64", "subArchitectures": null}
  ],
  "syscalls": [
    {"names": ["read", "write", "fstat64", "socketcall"], "action": "SCMP_ACT_ALLOW"},
    {"name": "legacy_single_name", "action": "SCMP_ACT_ALLOW"},
    {"names": ["needs_sys_admin"], "action": "SCMP_ACT_ALLOW", "includes": {"caps": ["CAP_SYS_ADMIN"]}},
    {"names": ["unless_sys_admin"], "action": "SCMP_ACT_ALLOW", "excludes": {"caps": ["CAP_SYS_ADMIN"]}},
    {"names": ["native_arch_only"], "action": "SCMP_ACT_ALLOW",
     "includes": {"arches": [")" NATIVE_GO_ARCH R"(", "x32"]}},
    {"names": ["s390_only"], "action": "SCMP_ACT_ALLOW", "includes": {"arches": ["s390", "s390x"]}},
    {"names": ["not_on_native_arch"], "action": "SCMP_ACT_ALLOW", "excludes": {"arches": [")" NATIVE_SCMP_ARCH R"("]}},
    {"names": ["not_on_s390"], "action": "SCMP_ACT_ALLOW", "excludes": {"arches": ["s390x"]}},
    {"names": ["since_old_kernel"], "action": "SCMP_ACT_ALLOW", "includes": {"minKernel": "4.8"}},
    {"names": ["since_future_kernel"], "action": "SCMP_ACT_ALLOW", "includes": {"minKernel": "99.0"}},
    {"names": ["before_old_kernel"], "action": "SCMP_ACT_ALLOW", "excludes": {"minKernel": "3.2.1"}},
    {"names": ["before_future_kernel"], "action": "SCMP_ACT_ALLOW", "excludes": {"minKernel": "99.1"}},
    {"names": ["clone"], "action": "SCMP_ACT_ALLOW", "comment": "no namespaces",
     "args": [{"index": 0, "value": 2114060288, "valueTwo": 0, "op": "SCMP_CMP_MASKED_EQ"}],
     "excludes": {"caps": ["CAP_SYS_ADMIN"], "arches": ["s390", "s390x"]}},
    {"names": ["clone3"], "action": "SCMP_ACT_ERRNO", "errnoRet": 38},
    {"names": ["socket"], "action": "SCMP_ACT_ALLOW", "args": [{"index": 0, "value": 40, "op": "SCMP_CMP_NE"}]}
  ],
  "flags": ["SECCOMP_FILTER_FLAG_SPEC_ALLOW"],
  "listenerPath": "",
  "listenerMetadata": ""
})";

TEST(SeccompParse, KeepsOnlyRulesThatApplyToAnUnprivilegedSandboxOnThisHost) {
  SeccompProfile profile = parse_seccomp_profile(kDockerStyleProfile);
  EXPECT_EQ(profile.default_action, "SCMP_ACT_ERRNO");
  EXPECT_EQ(profile.default_errno_ret, 1u);
  std::vector<std::string> kept;
  for (const auto& rule : profile.syscalls) kept.push_back(rule.names.front());
  EXPECT_EQ(kept, (std::vector<std::string>{"read", "legacy_single_name", "unless_sys_admin", "native_arch_only",
                                            "not_on_s390", "since_old_kernel", "before_future_kernel", "clone",
                                            "clone3", "socket"}));
  EXPECT_EQ(profile.syscalls[0].names.size(), 4u);

  const SeccompRule& clone = profile.syscalls[7];
  ASSERT_EQ(clone.args.size(), 1u);
  EXPECT_EQ(clone.args[0].index, 0u);
  EXPECT_EQ(clone.args[0].value, 0x7E020000u);
  EXPECT_EQ(clone.args[0].value_two, 0u);
  EXPECT_EQ(clone.args[0].op, "SCMP_CMP_MASKED_EQ");
  const SeccompRule& clone3 = profile.syscalls[8];
  EXPECT_EQ(clone3.action, "SCMP_ACT_ERRNO");
  EXPECT_TRUE(clone3.has_errno_ret);
  EXPECT_EQ(clone3.errno_ret, 38u);
  EXPECT_FALSE(profile.syscalls[0].has_errno_ret);
}

TEST(SeccompParse, ArchMapPicksTheEntryForThisHost) {
  SeccompProfile profile = parse_seccomp_profile(kDockerStyleProfile);
  EXPECT_EQ(profile.architectures, (std::vector<std::string>{NATIVE_SCMP_ARCH, COMPAT_SCMP_ARCHES}));

  profile = parse_seccomp_profile(R"({"defaultAction": "SCMP_ACT_ALLOW",
      "archMap": [{"architecture": "SCMP_ARCH_S390X", "subArchitectures": ["SCMP_ARCH_S390"]}]})");
  EXPECT_TRUE(profile.architectures.empty());  // native only

  profile = parse_seccomp_profile(R"({"defaultAction": "SCMP_ACT_ALLOW",
      "architectures": ["SCMP_ARCH_X86_64", "SCMP_ARCH_X86", "SCMP_ARCH_PPC64LE"]})");
  EXPECT_EQ(profile.architectures.size(), 3u);
}

// ---- compilation ----

TEST(SeccompCompile, DefaultProfileCompilesToABoundedProgram) {
  const auto& program = default_program();
  ASSERT_FALSE(program.empty());
  EXPECT_EQ(program.size() % 8, 0u);      // struct sock_filter is 8 bytes
  EXPECT_LE(program.size() / 8, 4096u);  // BPF_MAXINSNS
}

TEST(SeccompCompile, DockerStyleMultiArchProfileCompiles) {
  auto program = compile_seccomp(parse_seccomp_profile(kDockerStyleProfile));
  EXPECT_FALSE(program.empty());
}

TEST(SeccompCompile, UnknownSyscallNamesAreSkipped) {
  auto program = compile_seccomp(parse_seccomp_profile(R"({"defaultAction": "SCMP_ACT_ALLOW", "syscalls": [
      {"names": ["no_such_syscall", "getppid", "another_made_up_one"],
       "action": "SCMP_ACT_ERRNO", "errnoRet": 13}]})"));
  ASSERT_FALSE(program.empty());
  // The known name in the same rule is still enforced.
  int status = run_confined(program, [] {
    errno = 0;
    long ret = syscall(SYS_getppid);
    _exit(ret == -1 && errno == EACCES ? 0 : 1);
  });
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << status;
}

TEST(SeccompCompile, RepeatedArgumentIndexMeansAnyOfTheComparisons) {
  auto program = compile_seccomp(parse_seccomp_profile(R"({"defaultAction": "SCMP_ACT_ALLOW", "syscalls": [
      {"names": ["getpriority"], "action": "SCMP_ACT_ERRNO", "errnoRet": 13,
       "args": [{"index": 0, "value": 0, "op": "SCMP_CMP_EQ"}, {"index": 0, "value": 1, "op": "SCMP_CMP_EQ"}]}]})"));
  int status = run_confined(program, [] {
    errno = 0;
    bool process = syscall(SYS_getpriority, PRIO_PROCESS, 0) == -1 && errno == EACCES;
    errno = 0;
    bool group = syscall(SYS_getpriority, PRIO_PGRP, 0) == -1 && errno == EACCES;
    bool user = syscall(SYS_getpriority, PRIO_USER, 0) >= 0;
    _exit(process && group && user ? 0 : 1);
  });
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << status;
}

TEST(SeccompCompile, RefusesConditionalRulesShadowedByAnUnconditionalOne) {
  // libseccomp would let the unconditional allow win and silently drop the TIOCSTI denial.
  auto profile = parse_seccomp_profile(R"({"defaultAction": "SCMP_ACT_ERRNO", "syscalls": [
      {"names": ["ioctl"], "action": "SCMP_ACT_ALLOW"},
      {"names": ["ioctl"], "action": "SCMP_ACT_ERRNO",
       "args": [{"index": 1, "value": 4294967295, "valueTwo": 21522, "op": "SCMP_CMP_MASKED_EQ"}]}]})");
  try {
    compile_seccomp(profile);
    ADD_FAILURE() << "expected a SandboxError";
  } catch (const SandboxError& e) {
    EXPECT_EQ(e.cause().step, "seccomp");
    EXPECT_EQ(e.cause().path, "ioctl");
  }
}

// ---- installation ----

TEST(SeccompInstall, RejectsMalformedPrograms) {
  EXPECT_EQ(install_seccomp_program({}), EINVAL);
  EXPECT_EQ(install_seccomp_program(std::vector<std::uint8_t>(7, 0)), EINVAL);
  EXPECT_EQ(install_seccomp_program(std::vector<std::uint8_t>(8 * 5000, 0)), EINVAL);
  // One instruction with an invalid opcode: the kernel's checker refuses it (run in a child, just in case).
  pid_t pid = fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0);
    _exit(install_seccomp_program(std::vector<std::uint8_t>(8, 0xff)) == EINVAL ? 0 : 1);
  }
  int status = 0;
  waitpid(pid, &status, 0);
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0);
}

// Probes run inside the confined child: each returns 0 on success or the errno.
#define PROBE(expr) [] { return (expr) < 0 ? errno : 0; }
int raw_clone(unsigned long flags) {
  long pid = syscall(SYS_clone, flags | SIGCHLD, 0, 0, 0, 0);
  if (pid == 0) _exit(0);
  if (pid < 0) return errno;
  waitpid(static_cast<pid_t>(pid), nullptr, 0);
  return 0;
}
int dev_null_ioctl(unsigned long request) {
  int fd = open("/dev/null", O_RDONLY | O_CLOEXEC);
  char c = 'x';
  int error = syscall(SYS_ioctl, fd, request, &c) < 0 ? errno : 0;
  close(fd);
  return error;
}

struct Probe {
  const char* name;
  int (*run)();
  int expected;
};

const Probe kProbes[] = {
    {"getpid", PROBE(syscall(SYS_getpid)), 0},
    {"fork", [] {
       pid_t pid = fork();
       if (pid == 0) _exit(7);
       int status = 0;
       if (pid < 0 || waitpid(pid, &status, 0) != pid) return errno;
       return WIFEXITED(status) && WEXITSTATUS(status) == 7 ? 0 : EIO;
     }, 0},
    {"clone(SIGCHLD)", [] { return raw_clone(0); }, 0},
    {"clone(CLONE_NEWNS)", [] { return raw_clone(CLONE_NEWNS); }, EPERM},
    {"clone(CLONE_NEWUSER)", [] { return raw_clone(CLONE_NEWUSER); }, EPERM},
    {"clone3", PROBE(syscall(SYS_clone3, nullptr, 0)), ENOSYS},
    {"unshare(CLONE_NEWUSER)", PROBE(unshare(CLONE_NEWUSER)), EPERM},
    {"setns", PROBE(setns(-1, 0)), EPERM},
    {"mount", PROBE(mount("none", "/nonexistent/capsule-seccomp", "tmpfs", 0, nullptr)), EPERM},
    {"umount2", PROBE(umount2("/nonexistent/capsule-seccomp", 0)), EPERM},
    {"chroot", PROBE(chroot("/")), EPERM},
    {"pivot_root", PROBE(syscall(SYS_pivot_root, "/nonexistent", "/nonexistent")), EPERM},
    {"keyctl", PROBE(syscall(SYS_keyctl, KEYCTL_GET_KEYRING_ID, KEY_SPEC_SESSION_KEYRING, 0)), EPERM},
    {"add_key", PROBE(syscall(SYS_add_key, "user", "capsule", "x", 1, KEY_SPEC_SESSION_KEYRING)), EPERM},
    {"bpf", PROBE(syscall(SYS_bpf, -1, nullptr, 0)), EPERM},
    {"perf_event_open", PROBE(syscall(SYS_perf_event_open, nullptr, 0, -1, -1, 0)), EPERM},
    {"ptrace", PROBE(ptrace(PTRACE_PEEKDATA, getpid(), nullptr, nullptr)), EPERM},
    {"process_vm_readv", PROBE(syscall(SYS_process_vm_readv, getpid(), nullptr, 0, nullptr, 0, 0)), EPERM},
    {"io_uring_setup", PROBE(syscall(SYS_io_uring_setup, 1, nullptr)), EPERM},
    {"userfaultfd", PROBE(syscall(SYS_userfaultfd, 0)), EPERM},
    {"pidfd_getfd", PROBE(syscall(SYS_pidfd_getfd, -1, 0, 0)), EPERM},
    {"open_by_handle_at", PROBE(syscall(SYS_open_by_handle_at, -1, nullptr, 0)), EPERM},
    {"fsopen", PROBE(syscall(SYS_fsopen, "tmpfs", 0)), EPERM},
    {"personality(ADDR_NO_RANDOMIZE)", PROBE(syscall(SYS_personality, 0x0040000)), EPERM},
    {"personality(query)", PROBE(syscall(SYS_personality, 0xffffffffUL)), 0},
    {"ioctl(TIOCSTI)", [] { return dev_null_ioctl(TIOCSTI); }, EPERM},
    {"ioctl(TIOCLINUX)", [] { return dev_null_ioctl(TIOCLINUX); }, EPERM},
    {"ioctl(TIOCSTI, high bits set)", [] { return dev_null_ioctl(0xffffffff00000000UL | TIOCSTI); }, EPERM},
    {"ioctl(TCGETS)", [] { return dev_null_ioctl(TCGETS); }, ENOTTY},
    {"ioctl(sign-extended request)", [] { return dev_null_ioctl(0xffffffff80045430UL); }, ENOTTY},
    {"ioctl(FIONREAD on a pipe)", [] {
       int fds[2];
       int count = 0;
       if (pipe(fds) != 0) return errno;
       int error = ioctl(fds[0], FIONREAD, &count) < 0 ? errno : 0;
       close(fds[0]);
       close(fds[1]);
       return error;
     }, 0},
    {"socket(AF_UNIX)", [] {
       int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
       if (fd < 0) return errno;
       close(fd);
       return 0;
     }, 0},
    {"socket(AF_VSOCK)", PROBE(socket(40, SOCK_STREAM, 0)), EPERM},
    {"socket(AF_UNIX | high bits)", PROBE(syscall(SYS_socket, 0x100000001UL, SOCK_STREAM, 0)), EPERM},
    {"memfd_create", [] {
       int fd = static_cast<int>(syscall(SYS_memfd_create, "probe", 0));
       if (fd < 0) return errno;
       close(fd);
       return 0;
     }, 0},
    {"getrandom", [] {
       char buffer[8];
       return syscall(SYS_getrandom, buffer, sizeof buffer, 0) < 0 ? errno : 0;
     }, 0},
};

TEST(SeccompInstall, DefaultProfileDeniesEscapesAndAllowsTheBasics) {
  constexpr std::size_t kCount = sizeof(kProbes) / sizeof(kProbes[0]);
  const auto& program = default_program();
  int fds[2];
  ASSERT_EQ(pipe(fds), 0);
  int status = run_confined(program, [&] {
    close(fds[0]);
    int results[kCount];
    for (std::size_t i = 0; i < kCount; ++i) {
      errno = 0;
      results[i] = kProbes[i].run();
    }
    if (write(fds[1], results, sizeof results) != static_cast<ssize_t>(sizeof results)) _exit(2);
  });
  close(fds[1]);
  int results[kCount];
  ssize_t got = read(fds[0], results, sizeof results);
  close(fds[0]);
  ASSERT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << "child status " << status;
  ASSERT_EQ(got, static_cast<ssize_t>(sizeof results));
  for (std::size_t i = 0; i < kCount; ++i)
    EXPECT_EQ(results[i], kProbes[i].expected)
        << kProbes[i].name << ": got " << (results[i] ? strerror(results[i]) : "success") << ", expected "
        << (kProbes[i].expected ? strerror(kProbes[i].expected) : "success");
}

#if defined(__x86_64__)
TEST(SeccompInstall, OtherSyscallAbisKillTheProcess) {
  int status = run_confined(default_program(), [] { syscall(0x40000000 | SYS_getpid); });  // x32 ABI
  EXPECT_TRUE(WIFSIGNALED(status) && WTERMSIG(status) == SIGSYS) << status;
}
#endif

TEST(SeccompPolicy, DefaultDeniesWhatTheSandboxMustNeverDo) {
  SeccompProfile profile = parse_seccomp_profile(default_profile_text());
  EXPECT_EQ(profile.default_action, "SCMP_ACT_ERRNO");
  EXPECT_EQ(profile.default_errno_ret, 1u);
  std::set<std::string> allowed, filtered;
  for (const auto& rule : profile.syscalls)
    if (rule.action == "SCMP_ACT_ALLOW")
      (rule.args.empty() ? allowed : filtered).insert(rule.names.begin(), rule.names.end());
  for (const char* name :
       {"mount", "umount2", "pivot_root", "chroot", "unshare", "setns", "keyctl", "add_key", "request_key", "bpf",
        "perf_event_open", "ptrace", "process_vm_readv", "process_vm_writev", "kexec_load", "kexec_file_load",
        "init_module", "finit_module", "delete_module", "reboot", "swapon", "swapoff", "io_uring_setup",
        "io_uring_enter", "io_uring_register", "userfaultfd", "open_by_handle_at", "name_to_handle_at", "acct",
        "quotactl", "settimeofday", "clock_settime", "adjtimex", "clock_adjtime", "syslog", "lookup_dcookie",
        "vhangup", "fsopen", "fsmount", "fsconfig", "fspick", "move_mount", "open_tree", "mount_setattr",
        "pidfd_getfd", "kcmp", "clone3"}) {
    EXPECT_EQ(allowed.count(name) + filtered.count(name), 0u) << name << " must not be allowed";
  }
  for (const char* name : {"clone", "ioctl", "personality", "socket"}) {
    EXPECT_EQ(allowed.count(name), 0u) << name << " must only be allowed with argument filters";
    EXPECT_EQ(filtered.count(name), 1u) << name;
  }
  for (const char* name : {"rseq", "membarrier", "futex", "futex_waitv", "statx", "openat2", "faccessat2",
                           "close_range", "pidfd_open", "pidfd_send_signal", "epoll_pwait2", "memfd_create",
                           "copy_file_range", "prlimit64", "getrandom", "set_robust_list", "sched_getaffinity",
                           "landlock_create_ruleset", "execve", "wait4", "arch_prctl", "vfork", "fork"}) {
#if !defined(__x86_64__)
    if (std::string(name) == "arch_prctl") continue;
#endif
    EXPECT_EQ(allowed.count(name), 1u) << name << " should be allowed";
  }
}

// ---- real toolchains under the default policy (skipped where not installed) ----

int run_under_default(std::vector<std::string> argv) {
  std::vector<char*> args;
  for (auto& arg : argv) args.push_back(arg.data());
  args.push_back(nullptr);
  return run_confined(default_program(), [&] {
    int null_fd = open("/dev/null", O_RDWR);
    dup2(null_fd, STDIN_FILENO);
    dup2(null_fd, STDOUT_FILENO);
    dup2(null_fd, STDERR_FILENO);
    execv(args[0], args.data());
    _exit(127);
  });
}

class SeccompToolchain : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = std::filesystem::temp_directory_path() / ("capsule-seccomp-" + std::to_string(getpid()));
    std::filesystem::create_directories(dir_);
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }
  std::string write(const std::string& name, const std::string& text) {
    std::ofstream(dir_ / name) << text;
    return (dir_ / name).string();
  }
  std::filesystem::path dir_;
};

#define REQUIRE_TOOL(path)                                                  \
  do {                                                                      \
    if (access((path), X_OK) != 0) GTEST_SKIP() << (path) << " not installed"; \
  } while (0)
#define EXPECT_EXIT_ZERO(status) \
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << "wait status " << (status)

TEST_F(SeccompToolchain, Python) {
  REQUIRE_TOOL("/usr/bin/python3");
  std::string script = write("probe.py", R"(
import multiprocessing, os, socket, subprocess, sys, tempfile, threading
def square(x): return x * x
if __name__ == "__main__":
    t = threading.Thread(target=lambda: None); t.start(); t.join()
    assert subprocess.run(["/bin/sh", "-c", "exit 3"]).returncode == 3
    a, b = socket.socketpair(); a.sendall(b"x"); assert b.recv(1) == b"x"
    server = socket.create_server(("127.0.0.1", 0)); client = socket.create_connection(server.getsockname())
    with tempfile.TemporaryDirectory() as d:
        os.symlink("x", os.path.join(d, "link")); os.stat(d)
    with multiprocessing.Pool(2) as pool: assert pool.map(square, [1, 2, 3]) == [1, 4, 9]
    sys.exit(0)
)");
  EXPECT_EXIT_ZERO(run_under_default({"/usr/bin/python3", script}));
  EXPECT_EXIT_ZERO(run_under_default({"/usr/bin/python3", "-m", "pip", "--version"}));
}

TEST_F(SeccompToolchain, Java17) {
  const std::string java = "/usr/lib/jvm/java-17-openjdk-amd64/bin/java";
  REQUIRE_TOOL(java.c_str());
  std::string source = write("Probe.java", R"(
public class Probe {
  public static void main(String[] args) throws Exception {
    Thread t = new Thread(() -> {}); t.start(); t.join();
    Process p = new ProcessBuilder("/bin/true").start();
    if (p.waitFor() != 0) System.exit(2);
    java.util.stream.IntStream.range(0, 1000).parallel().sum();
    java.nio.file.Files.writeString(java.nio.file.Files.createTempFile("probe", ".txt"), "ok");
  }
}
)");
  EXPECT_EXIT_ZERO(run_under_default({java, source}));
}

TEST_F(SeccompToolchain, Maven) {
  REQUIRE_TOOL("/usr/bin/mvn");
  EXPECT_EXIT_ZERO(run_under_default({"/usr/bin/mvn", "-B", "-v"}));
}

TEST_F(SeccompToolchain, GccAndMake) {
  REQUIRE_TOOL("/usr/bin/make");
  REQUIRE_TOOL("/usr/bin/gcc");
  write("probe.c", "#include <pthread.h>\nstatic void* run(void* a) { return a; }\n"
                   "int main(void) { pthread_t t; pthread_create(&t, 0, run, 0); return pthread_join(t, 0); }\n");
  write("Makefile", "all:\n\tgcc -O1 -pthread -o probe probe.c\n\t./probe\n");
  EXPECT_EXIT_ZERO(run_under_default({"/usr/bin/make", "-s", "-C", dir_.string()}));
}

}  // namespace
}  // namespace capsule::sandbox
