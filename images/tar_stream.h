// TarStream: reads a tar, optionally gzip- or zstd-compressed, with libarchive while hashing and counting
// the uncompressed stream (the OCI diff_id) and enforcing size and expansion-ratio limits as bytes arrive.
#pragma once

#include <archive.h>

#include <cstdint>
#include <exception>
#include <filesystem>
#include <memory>
#include <string>

#include "store/digest.h"
#include "base/unique_fd.h"

namespace capsule::images {

struct StreamLimits {
  std::uint64_t max_total_bytes = UINT64_MAX;  // uncompressed bytes
  double max_ratio = 0;                        // uncompressed : compressed; 0 = none
  std::uint64_t ratio_floor_bytes = 0;         // the ratio applies only above this many bytes
};

class TarStream {
 public:
  // Opens `file` (its size is the compressed size for the ratio). Throws ImageError{step}.
  TarStream(const std::filesystem::path& file, const StreamLimits& limits, std::string step);
  ~TarStream();
  TarStream(const TarStream&) = delete;
  TarStream& operator=(const TarStream&) = delete;

  // The tar reader: use archive_read_next_header / archive_read_data_block on it.
  struct archive* tar() { return tar_.get(); }
  // Throws the ImageError for a failed libarchive call on tar(): a limit hit while reading, or the
  // archive's own error text.
  [[noreturn]] void fail(const std::string& what);
  // Reads what is left after the tar end marker and returns the digest of the whole uncompressed stream.
  store::Digest finish();
  std::uint64_t bytes() const { return bytes_; }

 private:
  struct Free {
    void operator()(struct archive* a) const { archive_read_free(a); }
  };
  static la_ssize_t read_callback(struct archive*, void* self, const void** buffer);
  // Next decompressed block from the outer reader; nullopt at the end. Throws on errors and limits.
  bool next_block(const void** data, std::size_t* size);

  std::filesystem::path file_;
  base::UniqueFd fd_;  // the archive, checked to be a regular file before libarchive reads it
  StreamLimits limits_;
  std::string step_;
  std::uint64_t compressed_bytes_ = 0;
  std::uint64_t bytes_ = 0;
  store::Sha256 hasher_;
  std::unique_ptr<struct archive, Free> raw_;  // file -> decompressed bytes
  std::unique_ptr<struct archive, Free> tar_;  // decompressed bytes -> tar entries (declared last: freed first)
  std::exception_ptr callback_error_;  // an error raised inside read_callback, rethrown by fail()
  bool at_end_ = false;
};

}  // namespace capsule::images
