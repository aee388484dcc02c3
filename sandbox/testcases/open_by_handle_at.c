/* Hostile: the "shocker" escape: open_by_handle_at with a forged handle for inode 2 (the root of an ext4
 * filesystem) relative to a host-backed mount. Expected "open_by_handle_at: errno=EPERM". */
#define _GNU_SOURCE
#include <fcntl.h>
#include <stdint.h>
#include <stdlib.h>
#include <unistd.h>

#include "report.h"

int main(int argc, char **argv) {
  const char *mount_dir = argc > 1 ? argv[1] : "/opt/testcases";
  int mount_fd = open(mount_dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (mount_fd < 0) return tc_unsure("open_by_handle_at", "open-mount-dir", errno);
  struct {
    struct file_handle head;
    uint32_t ino_gen[2];
  } handle;
  memset(&handle, 0, sizeof handle);
  handle.head.handle_bytes = sizeof handle.ino_gen;
  handle.head.handle_type = 1; /* FILEID_INO32_GEN */
  handle.ino_gen[0] = 2;      /* the root directory inode of ext2/3/4 */
  handle.ino_gen[1] = 0;
  int fd = open_by_handle_at(mount_fd, &handle.head, O_RDONLY | O_DIRECTORY);
  return tc_single("open_by_handle_at", fd, errno);
}
