// StoreLock: an flock on a lock file, held for the lifetime of the object. Works between processes and
// between threads of one process (each StoreLock opens its own file description).
#pragma once

#include <filesystem>

#include "base/unique_fd.h"

namespace capsule::images {

class StoreLock {
 public:
  enum class Mode { kShared, kExclusive };
  // Creates the file if missing and blocks until the lock is granted. Throws ImageError{step "lock"}.
  StoreLock(const std::filesystem::path& file, Mode mode);

 private:
  base::UniqueFd fd_;
};

}  // namespace capsule::images
