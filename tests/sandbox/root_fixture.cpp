// FakeRoot and the small helpers the file API tests share: host-side reads and writes, chunked readers and
// the error code an action throws.
#include "tests/sandbox/root_fixture.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <fstream>
#include <memory>
#include <sstream>
#include <stdexcept>

#include "base/error.h"

namespace capsule::testing {

namespace fs = std::filesystem;

FakeRoot::FakeRoot() {
  std::string tmpl = (fs::temp_directory_path() / "capsule-root-test-XXXXXX").string();
  if (mkdtemp(tmpl.data()) == nullptr) throw std::runtime_error(std::string("mkdtemp: ") + std::strerror(errno));
  base_ = tmpl;
  root_ = base_ / "root";
  outside_ = base_ / "outside";
  fs::create_directories(root_);
  fs::create_directories(outside_);
  write_host_file(outside_ / "secret", "outside bytes");
  root_fd_.reset(open(root_.c_str(), O_PATH | O_DIRECTORY | O_CLOEXEC));
  if (!root_fd_) throw std::runtime_error(std::string("open root: ") + std::strerror(errno));
}

FakeRoot::~FakeRoot() {
  std::error_code ec;
  fs::remove_all(base_, ec);
}

std::string FakeRoot::outside_state() const {
  std::ostringstream state;
  for (const auto& entry : fs::recursive_directory_iterator(outside_)) {
    struct stat st {};
    if (lstat(entry.path().c_str(), &st) != 0) throw std::runtime_error("lstat " + entry.path().string());
    state << entry.path().lexically_relative(outside_).string() << " mode " << std::oct << st.st_mode << std::dec
          << " owner " << st.st_uid << ":" << st.st_gid << " size " << st.st_size;
    if (S_ISREG(st.st_mode)) state << " content " << read_host_file(entry.path());
    if (S_ISLNK(st.st_mode)) state << " target " << fs::read_symlink(entry.path()).string();
    state << "\n";
  }
  return state.str();
}

void write_host_file(const fs::path& path, const std::string& bytes) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  if (!out) throw std::runtime_error("write " + path.string());
}

std::string read_host_file(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw std::runtime_error("read " + path.string());
  std::ostringstream bytes;
  bytes << in.rdbuf();
  return bytes.str();
}

std::string read_fd_to_end(int fd) {
  std::string bytes;
  char buffer[65536];
  for (;;) {
    const ssize_t n = read(fd, buffer, sizeof buffer);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) throw std::runtime_error(std::string("read: ") + std::strerror(errno));
    if (n == 0) return bytes;
    bytes.append(buffer, static_cast<std::size_t>(n));
  }
}

sandbox::ByteReader reader_of(const std::string& bytes, std::size_t chunk) {
  auto offset = std::make_shared<std::size_t>(0);
  return [&bytes, chunk, offset]() -> std::string_view {
    const std::string_view next = std::string_view(bytes).substr(*offset, chunk);
    *offset += next.size();
    return next;
  };
}

std::string error_code(const std::function<void()>& action) {
  try {
    action();
  } catch (const base::Error& error) {
    return error.code();
  } catch (const std::exception& error) {
    return std::string("other: ") + error.what();
  }
  return "no error";
}

}  // namespace capsule::testing
