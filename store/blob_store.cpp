// BlobStore and BlobWriter: hash-while-copying into a temporary file, verify, fsync, rename into place.
// Readers never see a partial blob: only complete, verified files ever get a digest name.
#include "store/blob_store.h"

#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>

#include "base/error.h"
#include "base/file_util.h"

namespace capsule::store {
namespace fs = std::filesystem;
namespace {

constexpr std::size_t kChunk = 1 << 20;

std::string expectation(const std::optional<Digest>& expected) {
  return expected ? expected->str() : std::string("(new blob)");
}

}  // namespace

BlobWriter::BlobWriter(const BlobStore& store, std::optional<Digest> expected,
                       std::optional<std::uint64_t> expected_size)
    : store_(&store), expected_(std::move(expected)), expected_size_(expected_size),
      hasher_(std::make_unique<Sha256>()) {
  std::string temp = (store.tmp_dir_ / "blob-XXXXXX").string();
  int fd = mkostemp(temp.data(), O_CLOEXEC);
  if (fd < 0) base::throw_errno("blob", store.tmp_dir_.string(), "create temporary file");
  fd_.reset(fd);
  temp_path_ = temp;
  // Held while the blob is written: a temporary file nobody holds is a leftover of a killed writer.
  if (flock(fd, LOCK_EX | LOCK_NB) != 0) base::throw_errno("blob", temp, "lock temporary file");
}

BlobWriter::BlobWriter(BlobWriter&& other) noexcept
    : store_(other.store_), expected_(std::move(other.expected_)), expected_size_(other.expected_size_),
      temp_path_(std::move(other.temp_path_)), fd_(std::move(other.fd_)), hasher_(std::move(other.hasher_)),
      size_(other.size_) {
  other.temp_path_.clear();
}

BlobWriter::~BlobWriter() {
  if (!temp_path_.empty()) unlink(temp_path_.c_str());
}

void BlobWriter::write(const void* data, std::size_t size) {
  if (temp_path_.empty()) base::throw_error("blob", expectation(expected_), "write after commit");
  if (expected_size_ && size_ + size > *expected_size_) {
    base::throw_error("blob", expectation(expected_),
                      "more than the expected " + std::to_string(*expected_size_) + " bytes");
  }
  hasher_->update(data, size);
  base::write_all(fd_.get(), data, size, "blob", temp_path_.string());
  size_ += size;
}

Digest BlobWriter::commit() {
  if (temp_path_.empty()) base::throw_error("blob", expectation(expected_), "committed twice");
  const Digest digest = hasher_->finish();
  if (expected_size_ && size_ != *expected_size_) {
    base::throw_error("blob", expectation(expected_),
                      "size " + std::to_string(size_) + " differs from the expected " + std::to_string(*expected_size_));
  }
  if (expected_ && digest != *expected_) {
    base::throw_error("blob", expected_->str(), "content digest is " + digest.str() + " (tampered or corrupt)");
  }
  if (fchmod(fd_.get(), 0444) != 0) base::throw_errno("blob", temp_path_.string(), "chmod");
  if (fdatasync(fd_.get()) != 0) base::throw_errno("blob", temp_path_.string(), "fdatasync");
  fd_.reset();
  const fs::path target = store_->path(digest);
  if (store_->has(digest)) {
    unlink(temp_path_.c_str());  // identical content is already there
  } else if (rename(temp_path_.c_str(), target.c_str()) != 0) {
    base::throw_errno("blob", target.string(), "rename into place");
  }
  temp_path_.clear();
  return digest;
}

BlobStore::BlobStore(fs::path root)
    : root_(std::move(root)), blobs_dir_(root_ / "blobs" / "sha256"), tmp_dir_(root_ / "tmp") {
  base::make_dir(blobs_dir_, 0700, "blob");
  base::make_dir(tmp_dir_, 0700, "blob");
  remove_abandoned_temporaries();
}

void BlobStore::remove_abandoned_temporaries() const {
  std::error_code ec;
  for (const auto& entry : fs::directory_iterator(tmp_dir_, ec)) {
    const std::string name = entry.path().filename().string();
    if (name.rfind("blob-", 0) != 0) continue;
    base::UniqueFd fd(open(entry.path().c_str(), O_RDONLY | O_NONBLOCK | O_NOFOLLOW | O_CLOEXEC));
    struct stat st {};
    if (!fd || fstat(fd.get(), &st) != 0 || !S_ISREG(st.st_mode)) continue;
    // A writer alive in any process holds its lock; what can be locked was left by one that died.
    if (flock(fd.get(), LOCK_EX | LOCK_NB) == 0) unlink(entry.path().c_str());
  }
}

BlobWriter BlobStore::writer(const std::optional<Digest>& expected, std::optional<std::uint64_t> expected_size) {
  return BlobWriter(*this, expected, expected_size);
}

bool BlobStore::already_stored(const std::optional<Digest>& expected,
                               std::optional<std::uint64_t> expected_size) const {
  if (!expected || !has(*expected)) return false;
  const std::uint64_t stored = size(*expected);
  if (expected_size && stored != *expected_size) {
    base::throw_error("blob", expected->str(),
                      "stored size " + std::to_string(stored) + " differs from the expected " +
                          std::to_string(*expected_size));
  }
  return true;
}

Digest BlobStore::put_fd(int fd, const std::optional<Digest>& expected, std::optional<std::uint64_t> expected_size) {
  if (already_stored(expected, expected_size)) return *expected;
  BlobWriter out = writer(expected, expected_size);
  std::unique_ptr<char[]> buffer(new char[kChunk]);
  for (;;) {
    ssize_t n = ::read(fd, buffer.get(), kChunk);
    if (n < 0) {
      if (errno == EINTR) continue;
      base::throw_errno("blob", expectation(expected), "read source");
    }
    if (n == 0) break;
    out.write(buffer.get(), static_cast<std::size_t>(n));
  }
  return out.commit();
}

Digest BlobStore::put_file(const fs::path& file, const std::optional<Digest>& expected,
                           std::optional<std::uint64_t> expected_size) {
  base::UniqueFd fd = base::open_regular_file(file, "blob");
  return put_fd(fd.get(), expected, expected_size);
}

Digest BlobStore::put_stream(std::istream& in, const std::optional<Digest>& expected,
                             std::optional<std::uint64_t> expected_size) {
  if (already_stored(expected, expected_size)) return *expected;
  BlobWriter out = writer(expected, expected_size);
  std::unique_ptr<char[]> buffer(new char[kChunk]);
  while (in) {
    in.read(buffer.get(), kChunk);
    if (in.gcount() > 0) out.write(buffer.get(), static_cast<std::size_t>(in.gcount()));
  }
  if (in.bad()) base::throw_error("blob", expectation(expected), "read error on the source stream");
  return out.commit();
}

Digest BlobStore::put_bytes(std::string_view bytes, const std::optional<Digest>& expected) {
  if (already_stored(expected, bytes.size())) return *expected;
  BlobWriter out = writer(expected, bytes.size());
  out.write(bytes.data(), bytes.size());
  return out.commit();
}

void BlobStore::adopt(const BlobStore& from, const Digest& digest) {
  if (has(digest)) return;
  const fs::path source = from.path(digest);
  const fs::path target = path(digest);
  if (rename(source.c_str(), target.c_str()) != 0) base::throw_errno("blob", target.string(), "move from staging");
}

bool BlobStore::has(const Digest& digest) const {
  struct stat st;
  return lstat(path(digest).c_str(), &st) == 0 && S_ISREG(st.st_mode);
}

fs::path BlobStore::path(const Digest& digest) const { return blobs_dir_ / digest.hex(); }

std::uint64_t BlobStore::size(const Digest& digest) const {
  struct stat st;
  if (lstat(path(digest).c_str(), &st) != 0) base::throw_errno("blob", digest.str(), "not in the store");
  return static_cast<std::uint64_t>(st.st_size);
}

std::string BlobStore::read(const Digest& digest, std::uint64_t max_bytes) const {
  int fd = open(path(digest).c_str(), O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
  if (fd < 0) base::throw_errno("blob", digest.str(), "not in the store");
  base::UniqueFd owned(fd);
  return base::read_fd(fd, max_bytes, "blob", digest.str());
}

bool BlobStore::remove(const Digest& digest) {
  if (unlink(path(digest).c_str()) == 0) return true;
  if (errno == ENOENT) return false;
  base::throw_errno("blob", digest.str(), "remove");
}

std::vector<Digest> BlobStore::list() const {
  std::vector<Digest> digests;
  std::error_code error;
  for (fs::directory_iterator it(blobs_dir_, error), end; !error && it != end; it.increment(error)) {
    if (auto digest = Digest::try_parse("sha256:" + it->path().filename().string())) digests.push_back(*digest);
  }
  if (error) throw base::Error(base::Cause{"blob", blobs_dir_.string(), error.value(), "list"});
  std::sort(digests.begin(), digests.end());
  return digests;
}

}  // namespace capsule::store
