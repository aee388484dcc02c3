// SOCK_SEQPACKET message and descriptor passing for the launcher <-> capsule-init channel.
// SEQPACKET keeps message boundaries, so no framing is needed.
#include "sandbox/channel.h"

#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "sandbox/error.h"

namespace capsule::sandbox {

std::pair<int, int> make_channel() {
  int fds[2];
  if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, fds) != 0) throw_errno("channel", "", "socketpair");
  int size = static_cast<int>(kMaxMessageBytes + 4096);
  for (int fd : fds) {
    // Best effort: the kernel clamps to wmem_max; messages stay far below the default anyway.
    setsockopt(fd, SOL_SOCKET, SO_SNDBUF, &size, sizeof size);
  }
  return {fds[0], fds[1]};
}

void send_message(int fd, std::string_view message, bool wait) {
  if (message.size() > kMaxMessageBytes) throw_error("channel", "", "message too large");
  ssize_t sent;
  do {
    sent = send(fd, message.data(), message.size(), MSG_NOSIGNAL | (wait ? 0 : MSG_DONTWAIT));
  } while (sent < 0 && errno == EINTR);
  if (sent < 0) throw_errno("channel", "", "send");
}

std::optional<std::string> receive_message(int fd) {
  // Peek at the size first: a fresh 1 MiB buffer per message costs milliseconds in a new process.
  char probe;
  ssize_t size;
  do {
    size = recv(fd, &probe, 1, MSG_PEEK | MSG_TRUNC);
  } while (size < 0 && errno == EINTR);
  if (size < 0) throw_errno("channel", "", "recv");
  if (static_cast<std::size_t>(size) > kMaxMessageBytes) throw_error("channel", "", "message too large");
  std::string message(static_cast<std::size_t>(size), '\0');
  ssize_t got;
  do {
    got = recv(fd, message.data(), std::max<std::size_t>(message.size(), 1), 0);
  } while (got < 0 && errno == EINTR);
  if (got < 0) throw_errno("channel", "", "recv");
  if (got == 0 && size == 0) return std::nullopt;
  if (got != size) throw_error("channel", "", "message truncated");
  return message;
}

void send_fd(int fd, int fd_to_send, bool wait) {
  char byte = 'F';
  iovec io{&byte, 1};
  alignas(cmsghdr) char control[CMSG_SPACE(sizeof(int))] = {};
  msghdr msg{};
  msg.msg_iov = &io;
  msg.msg_iovlen = 1;
  msg.msg_control = control;
  msg.msg_controllen = sizeof control;
  cmsghdr* header = CMSG_FIRSTHDR(&msg);
  header->cmsg_level = SOL_SOCKET;
  header->cmsg_type = SCM_RIGHTS;
  header->cmsg_len = CMSG_LEN(sizeof(int));
  std::memcpy(CMSG_DATA(header), &fd_to_send, sizeof(int));
  ssize_t sent;
  do {
    sent = sendmsg(fd, &msg, MSG_NOSIGNAL | (wait ? 0 : MSG_DONTWAIT));
  } while (sent < 0 && errno == EINTR);
  if (sent < 0) throw_errno("channel", "", "sendmsg(SCM_RIGHTS)");
}

int receive_fd(int fd) {
  char byte;
  iovec io{&byte, 1};
  alignas(cmsghdr) char control[CMSG_SPACE(sizeof(int))] = {};
  msghdr msg{};
  msg.msg_iov = &io;
  msg.msg_iovlen = 1;
  msg.msg_control = control;
  msg.msg_controllen = sizeof control;
  ssize_t got;
  do {
    got = recvmsg(fd, &msg, MSG_CMSG_CLOEXEC);
  } while (got < 0 && errno == EINTR);
  if (got < 0) throw_errno("channel", "", "recvmsg(SCM_RIGHTS)");
  cmsghdr* header = CMSG_FIRSTHDR(&msg);
  if (got == 0 || header == nullptr || header->cmsg_type != SCM_RIGHTS) {
    throw_error("channel", "", "expected a file descriptor");
  }
  int received;
  std::memcpy(&received, CMSG_DATA(header), sizeof(int));
  return received;
}

}  // namespace capsule::sandbox
