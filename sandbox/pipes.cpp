// make_pipe / make_stdin: one place for the descriptors a sandbox's processes read and write.
// Both ends are close-on-exec; the child's end is dup2'ed onto 0-2 by init's forked child.
#include "sandbox/pipes.h"

#include <fcntl.h>
#include <sys/socket.h>
#include <unistd.h>

#include "sandbox/error.h"

namespace capsule::sandbox {

Pipe make_pipe() {
  int fds[2];
  if (pipe2(fds, O_CLOEXEC) != 0) throw_errno("pipes", "", "pipe2");
  return {base::UniqueFd(fds[0]), base::UniqueFd(fds[1])};
}

Pipe make_stdin(bool has_data) {
  if (!has_data) return make_pipe();
  int fds[2];
  if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, fds) != 0) throw_errno("pipes", "", "socketpair");
  shutdown(fds[0], SHUT_WR);
  shutdown(fds[1], SHUT_RD);
  return {base::UniqueFd(fds[0]), base::UniqueFd(fds[1])};
}

}  // namespace capsule::sandbox
