/* Hostile (audit): network interfaces visible through the kernel and through sysfs.
 * Expected "net_ifaces: if=lo sys=lo" (a network namespace with only loopback, and a sysfs of that netns). */
#define _GNU_SOURCE
#include <dirent.h>
#include <net/if.h>

#include "report.h"

int main(void) {
  char kernel_list[512] = "", sys_list[512] = "";
  struct if_nameindex *names = if_nameindex();
  if (names == NULL) return tc_unsure("net_ifaces", "if_nameindex", errno);
  for (struct if_nameindex *it = names; it->if_index != 0; ++it) {
    if (kernel_list[0] != '\0') strncat(kernel_list, ",", sizeof kernel_list - strlen(kernel_list) - 1);
    strncat(kernel_list, it->if_name, sizeof kernel_list - strlen(kernel_list) - 1);
  }
  if_freenameindex(names);
  DIR *dir = opendir("/sys/class/net");
  if (dir != NULL) {
    for (struct dirent *entry; (entry = readdir(dir)) != NULL;) {
      if (entry->d_name[0] == '.') continue;
      if (sys_list[0] != '\0') strncat(sys_list, ",", sizeof sys_list - strlen(sys_list) - 1);
      strncat(sys_list, entry->d_name, sizeof sys_list - strlen(sys_list) - 1);
    }
    closedir(dir);
  } else {
    snprintf(sys_list, sizeof sys_list, "%s", tc_errno_name(errno));
  }
  tc_begin("net_ifaces");
  tc_add("if", kernel_list);
  tc_add("sys", sys_list);
  return tc_end(strcmp(kernel_list, "lo") == 0 && strcmp(sys_list, "lo") == 0 ? TC_BLOCKED : TC_ESCAPED);
}
