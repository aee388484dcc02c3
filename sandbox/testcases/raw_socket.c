/* Hostile: packet and raw IP sockets (sniffing, spoofing) in the sandbox's network namespace.
 * Expected "raw_socket: packet=EPERM inet=EPERM inet6=EPERM" (CAP_NET_RAW is dropped). */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <linux/if_ether.h>
#include <netinet/in.h>
#include <sys/socket.h>

#include "report.h"

int main(void) {
  int packet = tc_err(socket(AF_PACKET, SOCK_RAW | SOCK_CLOEXEC, htons(ETH_P_ALL)));
  int inet = tc_err(socket(AF_INET, SOCK_RAW | SOCK_CLOEXEC, IPPROTO_RAW));
  int inet6 = tc_err(socket(AF_INET6, SOCK_RAW | SOCK_CLOEXEC, IPPROTO_ICMPV6));
  tc_begin("raw_socket");
  tc_add_errno("packet", packet);
  tc_add_errno("inet", inet);
  tc_add_errno("inet6", inet6);
  return tc_end(packet == 0 || inet == 0 || inet6 == 0 ? TC_ESCAPED : TC_BLOCKED);
}
