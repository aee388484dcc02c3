// The cross-process fetch lock: a flock per object key on a file under the shared cache directory (flock works
// across processes on one host, and on NFS v4 through byte-range locks).
#include "proxy/cache/fetch_lock.h"

#include <fcntl.h>
#include <sys/file.h>

#include <cerrno>
#include <cstring>

#include "proxy/error.h"
#include "store/digest.h"

namespace capsule::proxy {

FetchLock::FetchLock(const std::filesystem::path& cache_dir, const std::string& key) {
  const std::filesystem::path dir = cache_dir / "locks";
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  const std::filesystem::path file = dir / store::sha256_of(key).hex();
  fd_ = base::UniqueFd(::open(file.c_str(), O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0600));
  if (!fd_) throw ProxyError("cache_failure", "fetch-lock", file.string(), std::strerror(errno));
  while (::flock(fd_.get(), LOCK_EX) != 0) {
    if (errno != EINTR) throw ProxyError("cache_failure", "fetch-lock", file.string(), std::strerror(errno));
  }
}

}  // namespace capsule::proxy
