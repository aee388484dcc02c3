/* Hostile: takes a genuine handle of a host-backed file, then reopens it by handle (which bypasses paths).
 * Expected "name_to_handle_at: handle=ok open=EPERM" (encoding is harmless; open_by_handle_at is denied). */
#define _GNU_SOURCE
#include <fcntl.h>
#include <stdint.h>
#include <stdlib.h>
#include <unistd.h>

#include "report.h"

int main(int argc, char **argv) {
  const char *path = argc > 1 ? argv[1] : "/opt/testcases/name_to_handle_at";
  struct {
    struct file_handle head;
    unsigned char bytes[MAX_HANDLE_SZ];
  } handle;
  memset(&handle, 0, sizeof handle);
  handle.head.handle_bytes = MAX_HANDLE_SZ;
  int mount_id = 0;
  int err = tc_err(name_to_handle_at(AT_FDCWD, path, &handle.head, &mount_id, 0));
  tc_begin("name_to_handle_at");
  tc_add_errno("handle", err);
  if (err != 0) return tc_end(TC_BLOCKED);
  int mount_fd = open("/", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  int open_err = tc_err(open_by_handle_at(mount_fd, &handle.head, O_RDONLY));
  tc_add_errno("open", open_err);
  return tc_end(open_err == 0 ? TC_ESCAPED : TC_BLOCKED);
}
