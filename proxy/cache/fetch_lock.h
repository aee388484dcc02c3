// FetchLock: one upstream fetch of an object at a time across every process sharing a cache directory (several
// capsuled on the nodes of a cluster), so N nodes asking for the same object fetch it once; Singleflight does the
// same for the threads of one process.
#pragma once

#include <filesystem>
#include <string>

#include "base/unique_fd.h"

namespace capsule::proxy {

// Holds an exclusive flock on <cache_dir>/locks/<sha256 of key> from construction to destruction; blocks until
// it gets it. The lock files are kept (empty): removing one while another process waits on it would let a third
// take a new file and fetch alongside. Throws ProxyError 500 "cache_failure" when the lock cannot be taken.
class FetchLock {
 public:
  FetchLock(const std::filesystem::path& cache_dir, const std::string& key);

 private:
  base::UniqueFd fd_;
};

}  // namespace capsule::proxy
