// A stand-in for a live sandbox's root (a temp directory opened O_PATH, as the daemon opens /proc/<pid>/root)
// next to an "outside" directory that no file API call may touch, for the root_files and tar_in_root tests.
#pragma once

#include <cstddef>
#include <filesystem>
#include <functional>
#include <string>

#include "base/unique_fd.h"
#include "sandbox/root_files.h"

namespace capsule::testing {

class FakeRoot {
 public:
  FakeRoot();  // <tmp>/capsule-root-test-XXXXXX/{root,outside}, outside holding "secret" -> "outside bytes"
  ~FakeRoot();
  FakeRoot(const FakeRoot&) = delete;
  FakeRoot& operator=(const FakeRoot&) = delete;

  int fd() const { return root_fd_.get(); }
  const std::filesystem::path& root() const { return root_; }
  const std::filesystem::path& outside() const { return outside_; }
  // Every path under outside with its type, mode, owner, size and content (or link target), one per line:
  // equal before and after means nothing there was created, changed or removed.
  std::string outside_state() const;

 private:
  std::filesystem::path base_;
  std::filesystem::path root_;
  std::filesystem::path outside_;
  base::UniqueFd root_fd_;
};

// The sandbox user of the tests: host ids no test process runs as.
inline constexpr sandbox::RootOwner kOwner{123456, 234567};

void write_host_file(const std::filesystem::path& path, const std::string& bytes);
std::string read_host_file(const std::filesystem::path& path);
std::string read_fd_to_end(int fd);

// `bytes` served in `chunk`-byte pieces (small by default, so every chunk boundary is exercised).
sandbox::ByteReader reader_of(const std::string& bytes, std::size_t chunk = 7);

// The code of the base::Error that `action` throws, "no error" when it returns, "other: <what>" for any
// other exception.
std::string error_code(const std::function<void()>& action);

}  // namespace capsule::testing
