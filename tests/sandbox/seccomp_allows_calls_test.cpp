// seccomp::allows_calls: whether a standby may install the filter before its request, judged by following the BPF
// program for each call it still makes (number, architecture, known arguments), as the kernel does for its cache.
#include <gtest/gtest.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <sys/ioctl.h>
#include <sys/syscall.h>

#include <cstring>
#include <initializer_list>
#include <vector>

#include "sandbox/seccomp.h"
#include "tests/support/test_support.h"

namespace capsule::sandbox {
namespace {

// What a standby may install before its request: only a program that allows the calls it will make then.
TEST(SeccompCompile, AllowsCallsFollowsOnlyWhatIsKnownOfEachCall) {
  auto any = [](std::initializer_list<long> numbers) {
    std::vector<ExpectedCall> calls;
    for (long nr : numbers) calls.push_back(ExpectedCall{nr, {}});
    return calls;
  };
  const std::vector<ExpectedCall> standby_like =
      any({SYS_recvmsg, SYS_setresuid, SYS_chdir, SYS_close_range, SYS_execve});
  const auto program = compile_seccomp(parse_seccomp_profile(testing::default_seccomp_profile()));
  EXPECT_TRUE(allows_calls(program, standby_like)) << "the default profile allows them whatever the arguments";
  EXPECT_FALSE(allows_calls(program, any({SYS_mount}))) << "denied by the default profile";
  EXPECT_FALSE(allows_calls(program, any({SYS_clone}))) << "allowed only for some flags";
  EXPECT_FALSE(allows_calls(program, any({SYS_ioctl}))) << "allowed for every request but TIOCSTI and TIOCLINUX";
  EXPECT_TRUE(allows_calls(program, {ExpectedCall{SYS_ioctl, {0, TIOCSCTTY, 0}}}));
  EXPECT_FALSE(allows_calls(program, {ExpectedCall{SYS_ioctl, {0, TIOCSTI, 0}}}));
  EXPECT_FALSE(allows_calls(program, {ExpectedCall{SYS_ioctl, {0}}})) << "the request is not known";

  const auto conditional = compile_seccomp(parse_seccomp_profile(R"({"defaultAction": "SCMP_ACT_ALLOW", "syscalls": [
      {"names": ["setresuid"], "action": "SCMP_ACT_ERRNO",
       "args": [{"index": 0, "value": 4242, "op": "SCMP_CMP_EQ"}]}]})"));
  EXPECT_FALSE(allows_calls(conditional, standby_like)) << "setresuid depends on its first argument";
  EXPECT_TRUE(allows_calls(conditional, any({SYS_recvmsg, SYS_execve})));
  EXPECT_TRUE(allows_calls(conditional, {ExpectedCall{SYS_setresuid, {1000, 1000, 1000}}}));
  EXPECT_FALSE(allows_calls(conditional, {ExpectedCall{SYS_setresuid, {4242, 4242, 4242}}}));
  const auto denied = compile_seccomp(parse_seccomp_profile(R"({"defaultAction": "SCMP_ACT_ALLOW", "syscalls": [
      {"names": ["close_range"], "action": "SCMP_ACT_ERRNO"}]})"));
  EXPECT_FALSE(allows_calls(denied, standby_like));
  const auto logged = compile_seccomp(parse_seccomp_profile(R"({"defaultAction": "SCMP_ACT_LOG"})"));
  EXPECT_FALSE(allows_calls(logged, any({SYS_chdir}))) << "only ALLOW counts";

  EXPECT_FALSE(allows_calls({}, any({SYS_chdir})));
  std::vector<std::uint8_t> truncated = program;
  truncated.resize(truncated.size() - 3);
  EXPECT_FALSE(allows_calls(truncated, any({SYS_chdir}))) << "not a whole number of instructions";
  // A jump past the end, and an instruction it does not follow (a load of the instruction pointer).
  std::vector<std::uint8_t> past_end(sizeof(sock_filter));
  const sock_filter jump{BPF_JMP | BPF_JA, 0, 0, 5};
  std::memcpy(past_end.data(), &jump, sizeof jump);
  EXPECT_FALSE(allows_calls(past_end, any({SYS_chdir})));
  const sock_filter reads_ip[] = {{BPF_LD | BPF_W | BPF_ABS, 0, 0, 8}, {BPF_RET | BPF_K, 0, 0, SECCOMP_RET_ALLOW}};
  std::vector<std::uint8_t> bytes(sizeof reads_ip);
  std::memcpy(bytes.data(), reads_ip, sizeof reads_ip);
  EXPECT_FALSE(allows_calls(bytes, any({SYS_chdir})));
}

}  // namespace
}  // namespace capsule::sandbox
