/* Hostile: connects to an abstract Unix socket (argv[1], without the leading NUL) the test listens on in the
 * host. Expected "abstract_unix: errno=ECONNREFUSED": abstract names are scoped to the network namespace. */
#define _GNU_SOURCE
#include <stddef.h>
#include <sys/socket.h>
#include <sys/un.h>

#include "report.h"

int main(int argc, char **argv) {
  if (argc < 2) return tc_unsure("abstract_unix", "usage", EINVAL);
  int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return tc_unsure("abstract_unix", "socket", errno);
  struct sockaddr_un addr;
  memset(&addr, 0, sizeof addr);
  addr.sun_family = AF_UNIX;
  size_t len = strlen(argv[1]);
  if (len + 1 > sizeof addr.sun_path) return tc_unsure("abstract_unix", "name", ENAMETOOLONG);
  memcpy(addr.sun_path + 1, argv[1], len);
  long rc = connect(fd, (struct sockaddr *)&addr, (socklen_t)(offsetof(struct sockaddr_un, sun_path) + 1 + len));
  return tc_single("abstract_unix", rc, errno);
}
