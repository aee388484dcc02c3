/* Hostile: connects to 127.0.0.1:PORT (argv[1]) where the test listens on the host's loopback.
 * Expected "tcp_connect_host: errno=ECONNREFUSED": the sandbox has its own, empty loopback. */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <netinet/in.h>
#include <stdlib.h>
#include <sys/socket.h>

#include "report.h"

int main(int argc, char **argv) {
  if (argc < 2) return tc_unsure("tcp_connect_host", "usage", EINVAL);
  int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return tc_unsure("tcp_connect_host", "socket", errno);
  struct sockaddr_in addr;
  memset(&addr, 0, sizeof addr);
  addr.sin_family = AF_INET;
  addr.sin_port = htons((uint16_t)atoi(argv[1]));
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  long rc = connect(fd, (struct sockaddr *)&addr, sizeof addr);
  return tc_single("tcp_connect_host", rc, errno);
}
