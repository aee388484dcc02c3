// A named network namespace: made by a short-lived thread that unshares its network (so the daemon's other
// threads never leave the host's), brings loopback up, and bind-mounts /proc/thread-self/ns/net to a file.
#include "sandbox/net_namespace.h"

#include <fcntl.h>
#include <linux/nsfs.h>
#include <sched.h>
#include <sys/ioctl.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstring>
#include <exception>
#include <filesystem>
#include <system_error>
#include <thread>
#include <utility>

#include "sandbox/error.h"
#include "sandbox/net.h"

namespace capsule::sandbox {

NetworkNamespace& NetworkNamespace::operator=(NetworkNamespace&& other) noexcept {
  if (this != &other) {
    remove();
    path_ = std::move(other.path_);
    other.path_.clear();
  }
  return *this;
}

NetworkNamespace NetworkNamespace::create(const std::string& dir, const std::string& name) {
  if (name.empty() || name == "." || name == ".." || name.find('/') != std::string::npos) {
    throw_error("net", name, "a network namespace name is one path component");
  }
  std::error_code error;
  std::filesystem::create_directories(dir, error);
  if (error) throw_error("net", dir, "cannot create: " + error.message());
  chmod(dir.c_str(), 0700);
  const std::string path = dir + "/" + name;
  {
    base::UniqueFd file(open(path.c_str(), O_RDONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600));
    if (!file) throw_errno("net", path, "create");
  }
  NetworkNamespace made;
  std::exception_ptr failure;
  std::thread maker([&] {
    try {
      if (unshare(CLONE_NEWNET) != 0) throw_errno("net", path, "unshare(CLONE_NEWNET)");
      bring_up_loopback();
      // The boxes have no capability over a namespace the host owns: as in a namespace of their own (and in
      // Docker's), any port and ping are theirs to use. /proc/sys/net is the opening thread's namespace.
      for (const auto& [sysctl, value] : {std::pair{"/proc/sys/net/ipv4/ip_unprivileged_port_start", "0"},
                                          std::pair{"/proc/sys/net/ipv4/ping_group_range", "0 2147483647"}}) {
        base::UniqueFd knob(open(sysctl, O_WRONLY | O_CLOEXEC));
        if (!knob || write(knob.get(), value, std::strlen(value)) < 0) throw_errno("net", sysctl, "write");
      }
      if (mount("/proc/thread-self/ns/net", path.c_str(), nullptr, MS_BIND, nullptr) != 0) {
        throw_errno("net", path, "bind mount of the namespace");
      }
    } catch (...) {
      failure = std::current_exception();
    }
  });  // the thread ends, and with it its membership: the bind mount alone keeps the namespace
  maker.join();
  if (failure) {
    unlink(path.c_str());
    std::rethrow_exception(failure);
  }
  made.path_ = path;
  return made;
}

void NetworkNamespace::remove() {
  if (path_.empty()) return;
  umount2(path_.c_str(), MNT_DETACH);
  unlink(path_.c_str());
  path_.clear();
}

std::size_t NetworkNamespace::remove_stale(const std::string& dir) {
  std::size_t removed = 0;
  std::error_code error;
  for (const auto& entry : std::filesystem::directory_iterator(dir, error)) {
    const std::string path = entry.path().string();
    umount2(path.c_str(), MNT_DETACH);
    if (unlink(path.c_str()) == 0) ++removed;
  }
  return removed;
}

base::UniqueFd open_network_namespace(const std::string& path) {
  base::UniqueFd fd(open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NOFOLLOW));
  if (!fd) throw_errno("net", path, "open the network namespace");
  const int type = ioctl(fd.get(), NS_GET_NSTYPE);
  if (type != CLONE_NEWNET) throw_error("net", path, "is not a network namespace");
  return fd;
}

void join_network_namespace(const std::string& path) {
  const base::UniqueFd fd = open_network_namespace(path);
  if (setns(fd.get(), CLONE_NEWNET) != 0) throw_errno("net", path, "setns");
}

}  // namespace capsule::sandbox
