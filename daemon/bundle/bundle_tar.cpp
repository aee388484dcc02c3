// bundle_tar: libarchive over the bundle's tar, both ways. Reading never uses an entry's name as a path: each
// entry is copied to a numbered staging file while hashed, so a hostile name can only be refused.
#include "daemon/bundle/bundle_tar.h"

#include <archive.h>
#include <archive_entry.h>
#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <exception>
#include <memory>

#include "base/error.h"
#include "base/unique_fd.h"
#include "http/response.h"
#include "store/digest.h"

namespace capsule::daemon {
namespace {

constexpr std::size_t kChunk = 1 << 20;

struct ReadFree {
  void operator()(struct archive* a) const { archive_read_free(a); }
};
struct WriteFree {
  void operator()(struct archive* a) const { archive_write_free(a); }
};
struct EntryFree {
  void operator()(struct archive_entry* e) const { archive_entry_free(e); }
};

[[noreturn]] void invalid(const std::string& message) { throw http::ApiError("invalid_bundle", message); }

void write_all(int fd, const void* data, std::size_t size, const std::filesystem::path& file) {
  const char* p = static_cast<const char*>(data);
  while (size > 0) {
    const ssize_t wrote = write(fd, p, size);
    if (wrote < 0 && errno == EINTR) continue;
    if (wrote < 0) base::throw_errno("bundle", file.string(), "write");
    p += wrote;
    size -= static_cast<std::size_t>(wrote);
  }
}

}  // namespace

std::string image_entry(std::size_t index) { return "images/" + std::to_string(index) + ".tar"; }
std::string dependency_entry(const std::string& sha256_hex) { return "dependencies/" + sha256_hex; }
std::string log_entry(const std::string& stream) { return "logs/" + stream; }

bool valid_entry_name(std::string_view name) {
  if (name.empty() || name.size() > 200) return false;
  std::size_t start = 0;
  while (start <= name.size()) {
    const std::size_t slash = std::min(name.find('/', start), name.size());
    const std::string_view part = name.substr(start, slash - start);
    if (part.empty() || part == "." || part == "..") return false;
    for (const char c : part) {
      const bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '.' ||
                      c == '_' || c == '-';
      if (!ok) return false;
    }
    start = slash + 1;
  }
  return true;
}

struct BundleTarWriter::State {
  BundleSink sink;
  std::unique_ptr<struct archive, WriteFree> archive{archive_write_new()};
  std::exception_ptr error;

  static la_ssize_t bytes(struct archive*, void* self, const void* data, std::size_t size) {
    auto* state = static_cast<State*>(self);
    try {
      state->sink(std::string_view(static_cast<const char*>(data), size));
      return static_cast<la_ssize_t>(size);
    } catch (...) {
      state->error = std::current_exception();
      return -1;
    }
  }
  void check(la_ssize_t status, const std::string& what) {
    if (status >= ARCHIVE_WARN) return;
    if (error) std::rethrow_exception(error);
    const char* text = archive_error_string(archive.get());
    base::throw_error("bundle", "", "tar " + what + ": " + (text ? text : "libarchive error"));
  }
  void header(const std::string& name, std::uint64_t size) {
    std::unique_ptr<struct archive_entry, EntryFree> entry(archive_entry_new());
    archive_entry_set_pathname(entry.get(), name.c_str());
    archive_entry_set_filetype(entry.get(), AE_IFREG);
    archive_entry_set_perm(entry.get(), 0644);
    archive_entry_set_size(entry.get(), static_cast<la_int64_t>(size));
    archive_entry_set_mtime(entry.get(), 0, 0);
    archive_entry_set_uid(entry.get(), 0);
    archive_entry_set_gid(entry.get(), 0);
    check(archive_write_header(archive.get(), entry.get()), "header of " + name);
  }
  void data(const void* bytes, std::size_t size) {
    if (size > 0) check(archive_write_data(archive.get(), bytes, size) < 0 ? -30 : 0, "data");
  }
};

BundleTarWriter::BundleTarWriter(BundleSink sink) : state_(std::make_unique<State>()) {
  state_->sink = std::move(sink);
  if (!state_->archive) base::throw_error("bundle", "", "libarchive: out of memory");
  archive_write_set_format_pax_restricted(state_->archive.get());
  archive_write_set_bytes_per_block(state_->archive.get(), 10240);
  state_->check(archive_write_open(state_->archive.get(), state_.get(), nullptr, &State::bytes, nullptr), "open");
}

BundleTarWriter::~BundleTarWriter() = default;

void BundleTarWriter::add_bytes(const std::string& name, std::string_view bytes) {
  state_->header(name, bytes.size());
  state_->data(bytes.data(), bytes.size());
}

void BundleTarWriter::add_file(const std::string& name, const std::filesystem::path& file, std::uint64_t size) {
  base::UniqueFd fd(open(file.c_str(), O_RDONLY | O_CLOEXEC));
  if (!fd) base::throw_errno("bundle", file.string(), "open");
  state_->header(name, size);
  std::string chunk(kChunk, '\0');
  std::uint64_t left = size;
  while (left > 0) {
    const ssize_t got = read(fd.get(), chunk.data(), static_cast<std::size_t>(std::min<std::uint64_t>(left, kChunk)));
    if (got < 0 && errno == EINTR) continue;
    if (got < 0) base::throw_errno("bundle", file.string(), "read");
    if (got == 0) base::throw_error("bundle", file.string(), "shorter than the " + std::to_string(size) + " bytes listed");
    state_->data(chunk.data(), static_cast<std::size_t>(got));
    left -= static_cast<std::uint64_t>(got);
  }
}

void BundleTarWriter::finish() { state_->check(archive_write_close(state_->archive.get()), "finish"); }

std::map<std::string, StagedEntry> read_bundle_tar(int fd, const std::filesystem::path& staging,
                                                   const BundleLimits& limits) {
  std::unique_ptr<struct archive, ReadFree> tar(archive_read_new());
  if (!tar) base::throw_error("bundle", "", "libarchive: out of memory");
  archive_read_support_format_tar(tar.get());
  if (archive_read_open_fd(tar.get(), fd, 64 * 1024) != ARCHIVE_OK) {
    invalid(std::string("not a tar: ") + archive_error_string(tar.get()));
  }
  std::map<std::string, StagedEntry> entries;
  std::uint64_t total = 0;
  std::size_t count = 0;
  std::string chunk(kChunk, '\0');
  for (;;) {
    struct archive_entry* entry = nullptr;
    const int status = archive_read_next_header(tar.get(), &entry);
    if (status == ARCHIVE_EOF) break;
    if (status < ARCHIVE_WARN) invalid(std::string("a broken tar: ") + archive_error_string(tar.get()));
    if (++count > limits.max_entries) invalid("more than " + std::to_string(limits.max_entries) + " entries");
    const char* raw_name = archive_entry_pathname(entry);
    std::string name = raw_name ? raw_name : "";
    const auto type = archive_entry_filetype(entry);
    if (type == AE_IFDIR) {
      while (!name.empty() && name.back() == '/') name.pop_back();
      if (!valid_entry_name(name)) invalid("entry '" + name + "': not a plain relative name");
      continue;
    }
    if (!valid_entry_name(name)) invalid("entry '" + name + "': not a plain relative name");
    if (archive_entry_hardlink(entry) != nullptr || archive_entry_symlink(entry) != nullptr || type != AE_IFREG) {
      invalid("entry '" + name + "': not a regular file (links and special files are refused)");
    }
    if (entries.count(name)) invalid("entry '" + name + "': appears twice");
    const la_int64_t size = archive_entry_size(entry);
    if (size < 0 || static_cast<std::uint64_t>(size) > limits.max_bytes - total) {
      throw http::ApiError("bundle_too_large", "entry '" + name + "': the bundle is over its ceiling of " +
                                                   std::to_string(limits.max_bytes) + " bytes");
    }
    StagedEntry staged{staging / std::to_string(count), 0, ""};
    base::UniqueFd out(open(staged.file.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600));
    if (!out) base::throw_errno("bundle", staged.file.string(), "create");
    store::Sha256 hasher;
    for (;;) {
      const la_ssize_t got = archive_read_data(tar.get(), chunk.data(), chunk.size());
      if (got < 0) invalid("entry '" + name + "': " + archive_error_string(tar.get()));
      if (got == 0) break;
      staged.size += static_cast<std::uint64_t>(got);
      if (staged.size > static_cast<std::uint64_t>(size)) invalid("entry '" + name + "': longer than its header says");
      hasher.update(chunk.data(), static_cast<std::size_t>(got));
      write_all(out.get(), chunk.data(), static_cast<std::size_t>(got), staged.file);
    }
    if (staged.size != static_cast<std::uint64_t>(size)) invalid("entry '" + name + "': cut short");
    total += staged.size;
    staged.sha256 = hasher.finish().hex();
    entries.emplace(name, std::move(staged));
  }
  return entries;
}

}  // namespace capsule::daemon
