// NetworkNamespace: a network namespace kept as a file (a bind mount of its nsfs inode, as `ip netns add` does),
// so several boxes can join it (EnvironmentSpec::network_namespace) and it outlives them: a stack's private network.
#pragma once

#include <cstddef>
#include <string>

#include "base/unique_fd.h"

namespace capsule::sandbox {

class NetworkNamespace {
 public:
  // A new namespace with only loopback, brought up, bound at dir/name (dir is created, mode 0700). The name is
  // one path component. Throws SandboxError (step "net").
  static NetworkNamespace create(const std::string& dir, const std::string& name);
  NetworkNamespace() = default;
  ~NetworkNamespace() { remove(); }
  NetworkNamespace(NetworkNamespace&& other) noexcept : path_(std::move(other.path_)) { other.path_.clear(); }
  NetworkNamespace& operator=(NetworkNamespace&& other) noexcept;
  NetworkNamespace(const NetworkNamespace&) = delete;
  NetworkNamespace& operator=(const NetworkNamespace&) = delete;

  const std::string& path() const { return path_; }
  // Unmounts and removes the file; the namespace itself ends with the last process or socket in it.
  // Idempotent; never throws.
  void remove();
  // Removes every namespace file left in dir by a daemon that did not stop cleanly. Returns how many.
  static std::size_t remove_stale(const std::string& dir);

 private:
  std::string path_;
};

// Opens a network namespace file and checks that it is one (NS_GET_NSTYPE). Throws SandboxError (step "net").
base::UniqueFd open_network_namespace(const std::string& path);
// Moves the calling thread into the namespace (setns affects only the calling thread): every socket it makes
// afterwards belongs there. For a thread of its own, such as a stack's supervisor. Throws SandboxError.
void join_network_namespace(const std::string& path);

}  // namespace capsule::sandbox
