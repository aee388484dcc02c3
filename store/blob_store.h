// BlobStore: content-addressed blobs under <root>/blobs/sha256/<hex>, written through <root>/tmp.
// Every put hashes while it copies; a digest or size mismatch throws and leaves nothing behind.
#pragma once

#include <cstdint>
#include <filesystem>
#include <istream>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "store/digest.h"
#include "base/unique_fd.h"

namespace capsule::store {

class BlobStore;

// One blob being streamed in: bytes go to a temporary file while they are hashed; commit() checks the
// expectations and renames the file into place. Destroyed without commit(), it removes its temporary file.
class BlobWriter {
 public:
  BlobWriter(BlobWriter&&) noexcept;
  BlobWriter& operator=(BlobWriter&&) = delete;
  ~BlobWriter();

  // Throws as soon as more bytes arrive than the expected size.
  void write(const void* data, std::size_t size);
  std::uint64_t size() const { return size_; }
  // Verifies digest and size (when expected), fsyncs and renames into the store. Call once.
  Digest commit();

 private:
  friend class BlobStore;
  BlobWriter(const BlobStore& store, std::optional<Digest> expected, std::optional<std::uint64_t> expected_size);

  const BlobStore* store_;
  std::optional<Digest> expected_;
  std::optional<std::uint64_t> expected_size_;
  std::filesystem::path temp_path_;
  base::UniqueFd fd_;
  std::unique_ptr<Sha256> hasher_;
  std::uint64_t size_ = 0;
};

class BlobStore {
 public:
  // Creates <root>/blobs/sha256 and <root>/tmp (mode 0700) if missing, and removes the temporary files that
  // writers killed mid-blob left in <root>/tmp (live writers, in any process, hold a lock on theirs).
  explicit BlobStore(std::filesystem::path root);

  // Each put returns the content's digest. With an expected digest already in the store, nothing is read
  // (only the stored size is checked against expected_size). Mismatches throw base::Error{step "blob"}.
  Digest put_fd(int fd, const std::optional<Digest>& expected = {},
                std::optional<std::uint64_t> expected_size = {});
  Digest put_file(const std::filesystem::path& file, const std::optional<Digest>& expected = {},
                  std::optional<std::uint64_t> expected_size = {});
  Digest put_stream(std::istream& in, const std::optional<Digest>& expected = {},
                    std::optional<std::uint64_t> expected_size = {});
  Digest put_bytes(std::string_view bytes, const std::optional<Digest>& expected = {});
  // For producers that generate a blob (e.g. a tar being written).
  BlobWriter writer(const std::optional<Digest>& expected = {}, std::optional<std::uint64_t> expected_size = {});

  // Moves a blob from another store on the same filesystem (a staging area) into this one; a blob this
  // store already has is left as it is.
  void adopt(const BlobStore& from, const Digest& digest);

  bool has(const Digest& digest) const;
  std::filesystem::path path(const Digest& digest) const;  // where the blob is (or would be)
  std::uint64_t size(const Digest& digest) const;          // throws if absent
  // The whole blob, for small JSON documents; refuses blobs above max_bytes.
  std::string read(const Digest& digest, std::uint64_t max_bytes) const;
  bool remove(const Digest& digest);  // false if it was not there
  std::vector<Digest> list() const;   // sorted

  const std::filesystem::path& root() const { return root_; }

 private:
  friend class BlobWriter;
  void remove_abandoned_temporaries() const;
  // True when `expected` is already stored (its size checked against expected_size).
  bool already_stored(const std::optional<Digest>& expected, std::optional<std::uint64_t> expected_size) const;

  std::filesystem::path root_;
  std::filesystem::path blobs_dir_;
  std::filesystem::path tmp_dir_;
};

}  // namespace capsule::store
