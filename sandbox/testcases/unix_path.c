/* Hostile: connects to a filesystem Unix socket (argv[1]) the test listens on at a host path (think
 * /run/docker.sock). Expected "unix_path: errno=ENOENT": host paths are not in the sandbox's tree. */
#define _GNU_SOURCE
#include <sys/socket.h>
#include <sys/un.h>

#include "report.h"

int main(int argc, char **argv) {
  if (argc < 2) return tc_unsure("unix_path", "usage", EINVAL);
  int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return tc_unsure("unix_path", "socket", errno);
  struct sockaddr_un addr;
  memset(&addr, 0, sizeof addr);
  addr.sun_family = AF_UNIX;
  if (strlen(argv[1]) >= sizeof addr.sun_path) return tc_unsure("unix_path", "path", ENAMETOOLONG);
  strcpy(addr.sun_path, argv[1]);
  long rc = connect(fd, (struct sockaddr *)&addr, sizeof addr);
  return tc_single("unix_path", rc, errno);
}
