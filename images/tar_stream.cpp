// TarStream: two chained libarchive readers. The outer one (raw format; gzip, zstd or no filter) yields the
// uncompressed stream, which is hashed and counted before the inner tar reader parses it.
#include "images/tar_stream.h"

#include <sys/stat.h>

#include "images/error.h"
#include "base/file_util.h"

namespace capsule::images {

TarStream::TarStream(const std::filesystem::path& file, const StreamLimits& limits, std::string step)
    : file_(file), limits_(limits), step_(std::move(step)), raw_(archive_read_new()), tar_(archive_read_new()) {
  if (!raw_ || !tar_) throw_image_error(step_, file_.string(), "libarchive: out of memory");
  fd_ = base::open_regular_file(file_, step_);
  struct stat st;
  if (fstat(fd_.get(), &st) != 0) throw_image_errno(step_, file_.string(), "stat");
  compressed_bytes_ = static_cast<std::uint64_t>(st.st_size);

  // Only these decompressors: archive_read_support_filter_all() would also run external programs.
  archive_read_support_filter_gzip(raw_.get());
  archive_read_support_filter_zstd(raw_.get());
  archive_read_support_format_raw(raw_.get());
  if (archive_read_open_fd(raw_.get(), fd_.get(), 1 << 20) != ARCHIVE_OK) {
    throw_image_error(step_, file_.string(), std::string("open: ") + archive_error_string(raw_.get()));
  }
  struct archive_entry* entry = nullptr;
  int status = archive_read_next_header(raw_.get(), &entry);
  if (status == ARCHIVE_EOF) {
    at_end_ = true;  // an empty file: the tar reader below reports it
  } else if (status < ARCHIVE_WARN) {
    throw_image_error(step_, file_.string(), std::string("decompress: ") + archive_error_string(raw_.get()));
  }

  archive_read_support_format_tar(tar_.get());
  if (archive_read_open(tar_.get(), this, nullptr, &TarStream::read_callback, nullptr) != ARCHIVE_OK) fail("open tar");
}

TarStream::~TarStream() = default;

bool TarStream::next_block(const void** data, std::size_t* size) {
  if (at_end_) return false;
  la_int64_t offset = 0;
  int status = archive_read_data_block(raw_.get(), data, size, &offset);
  if (status == ARCHIVE_EOF) {
    at_end_ = true;
    return false;
  }
  if (status < ARCHIVE_WARN) {
    throw_image_error(step_, file_.string(), std::string("decompress: ") + archive_error_string(raw_.get()));
  }
  hasher_.update(*data, *size);
  bytes_ += *size;
  if (bytes_ > limits_.max_total_bytes) {
    throw_image_error(step_, file_.string(),
                      "unpacked size exceeds the limit of " + std::to_string(limits_.max_total_bytes) + " bytes");
  }
  if (limits_.max_ratio > 0 && bytes_ > limits_.ratio_floor_bytes &&
      static_cast<double>(bytes_) > limits_.max_ratio * static_cast<double>(compressed_bytes_)) {
    throw_image_error(step_, file_.string(),
                      "expands more than " + std::to_string(static_cast<long long>(limits_.max_ratio)) +
                          "x its compressed size of " + std::to_string(compressed_bytes_) +
                          " bytes (zip-bomb guard)");
  }
  return true;
}

la_ssize_t TarStream::read_callback(struct archive* tar, void* self, const void** buffer) {
  auto* stream = static_cast<TarStream*>(self);
  // Exceptions must not cross libarchive's C frames: keep the message, report a fatal read.
  try {
    std::size_t size = 0;
    if (!stream->next_block(buffer, &size)) return 0;
    return static_cast<la_ssize_t>(size);
  } catch (const std::exception& e) {
    stream->callback_error_ = std::current_exception();
    archive_set_error(tar, EIO, "%s", e.what());
    return -1;
  }
}

void TarStream::fail(const std::string& what) {
  if (callback_error_) std::rethrow_exception(callback_error_);
  const char* text = archive_error_string(tar_.get());
  throw_image_error(step_, file_.string(), what + ": " + (text ? text : "malformed tar"));
}

store::Digest TarStream::finish() {
  const void* data = nullptr;
  std::size_t size = 0;
  while (next_block(&data, &size)) {
  }
  return hasher_.finish();
}

}  // namespace capsule::images
