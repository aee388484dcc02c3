// capsule-init: PID 1 of every sandbox. Receives its InitConfig over the control channel (fd 3), builds the
// filesystem, protects what is to be protected, then serves exec requests until the box ends (init_serve.h).
// With --spawner it is instead the launcher's small helper that clones those sandboxes (spawner.h).
#include <fcntl.h>
#include <sched.h>
#include <signal.h>
#include <sys/prctl.h>
#include <unistd.h>

#include <cerrno>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "sandbox/caps.h"
#include "sandbox/channel.h"
#include "sandbox/init_channel.h"
#include "sandbox/command.h"
#include "sandbox/init_serve.h"
#include "sandbox/error.h"
#include "sandbox/init_config.h"
#include "sandbox/mounts.h"
#include "sandbox/net.h"
#include "sandbox/spawner.h"

namespace capsule::sandbox {
namespace {

std::vector<int> receive_fds(std::size_t count) {
  std::vector<int> fds;
  for (std::size_t i = 0; i < count; ++i) fds.push_back(receive_fd(kInitControlFd));
  return fds;
}

// Receives the config and what follows it (the seccomp program into `seccomp_program`, then descriptors), and
// builds the box's filesystem, cgroup namespace and hostname from them.
InitConfig set_up_sandbox(std::vector<std::uint8_t>& seccomp_program) {
  auto message = receive_message(kInitControlFd);
  if (!message) throw_error("init", "", "launcher closed the channel before sending the config");
  InitConfig config = decode_init_config(*message);
  if (config.seccomp_program_bytes > 0) {
    const auto program = receive_message(kInitControlFd);
    if (!program || program->size() != config.seccomp_program_bytes) {
      throw_error("init-config", "", "the seccomp program did not follow the config, or not at its announced size");
    }
    seccomp_program.assign(program->begin(), program->end());
  }
  std::vector<int> layer_fds = receive_fds(config.layers.size());
  std::vector<int> bind_fds = receive_fds(config.binds.size());
  const int init_leaf_fd = config.join_init_leaf ? receive_fd(kInitControlFd) : -1;

  // The launcher has placed us in our cgroup by now; make it the root of what we can see.
  if (unshare(CLONE_NEWCGROUP) != 0) throw_errno("cgroupns", "", "unshare(CLONE_NEWCGROUP)");
  if (init_leaf_fd >= 0) {
    // v2: leave the box's own directory (staying its namespace's root) so it can hand its limits down.
    if (write(init_leaf_fd, "0", 1) != 1) throw_errno("cgroupns", "init", "joining the box's init leaf");
    close(init_leaf_fd);
  }
  build_filesystem(config, layer_fds, bind_fds);  // protect_paths() included, before pivot_root
  for (int fd : layer_fds) close(fd);
  for (int fd : bind_fds) close(fd);
  if (sethostname(config.hostname.data(), config.hostname.size()) != 0) {
    throw_errno("uts", config.hostname, "sethostname");
  }
  if (config.own_network) bring_up_loopback();  // a joined namespace's is up, and not ours to change
  return config;
}

// Stdio of init itself points at /dev/null so only the commands and their children hold their pipes.
void detach_stdio() {
  int null_fd = open("/dev/null", O_RDWR | O_CLOEXEC);
  if (null_fd < 0) return;
  for (int fd = 0; fd <= 2; ++fd) dup2(null_fd, fd);
  close(null_fd);
}

int init_main() {
  // Non-dumpable from the start: the command must never be able to open /proc/1/mem or /proc/1/fd.
  prctl(PR_SET_DUMPABLE, 0, 0, 0, 0);
  fcntl(kInitControlFd, F_SETFD, FD_CLOEXEC);
  sigset_t handled;
  sigemptyset(&handled);
  for (int signo : {SIGCHLD, SIGTERM, SIGINT, SIGHUP, SIGQUIT, SIGUSR1, SIGUSR2}) sigaddset(&handled, signo);
  sigprocmask(SIG_SETMASK, &handled, nullptr);

  InitConfig config;
  std::vector<std::uint8_t> program;
  try {
    config = set_up_sandbox(program);
  } catch (const SandboxError& e) {
    send_init_error(0, e.cause());
    return 1;
  } catch (const std::exception& e) {
    send_init_error(0, base::Cause{"init", "", 0, e.what()});
    return 1;
  }
  detach_stdio();
  try {
    keep_exec_capabilities();
    set_no_new_privs();
  } catch (const SandboxError& e) {
    send_init_error(0, e.cause());
    return 1;
  }
  send_init_event({{"event", init_event::kReady}, {"t_ns", monotonic_ns()}});
  serve_execs(config, program, handled);
}

}  // namespace
}  // namespace capsule::sandbox

// capsule-init --spawner: the launcher's helper that clones sandbox children (sandbox/spawner.h).
int main(int argc, char** argv) {
  if (argc == 2 && std::string(argv[1]) == "--spawner") capsule::sandbox::serve_spawn_requests();
  return capsule::sandbox::init_main();
}
