/* Hostile: loads a (trivial) eBPF socket filter; eBPF is a large kernel attack surface.
 * Expected "bpf_prog_load: errno=EPERM" (bpf is denied by seccomp). */
#define _GNU_SOURCE
#include <linux/bpf.h>
#include <stdint.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "report.h"

int main(void) {
  struct bpf_insn insns[2];
  memset(insns, 0, sizeof insns);
  insns[0].code = BPF_ALU64 | BPF_MOV | BPF_K; /* r0 = 0 */
  insns[0].dst_reg = BPF_REG_0;
  insns[1].code = BPF_JMP | BPF_EXIT;
  union bpf_attr attr;
  memset(&attr, 0, sizeof attr);
  attr.prog_type = BPF_PROG_TYPE_SOCKET_FILTER;
  attr.insn_cnt = 2;
  attr.insns = (uint64_t)(uintptr_t)insns;
  attr.license = (uint64_t)(uintptr_t) "GPL";
  long rc = syscall(SYS_bpf, BPF_PROG_LOAD, &attr, sizeof attr);
  return tc_single("bpf_prog_load", rc, errno);
}
