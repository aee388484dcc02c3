// pack_tree: a descriptor-relative walk under a sandbox's root feeding a pax writer in 64 KiB chunks;
// unpack_tree: a tar reader on a chunk callback whose entries are made by root_files' *_beneath primitives.
#include "sandbox/tar_in_root.h"

#include <archive.h>
#include <archive_entry.h>
#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <exception>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "base/error.h"

namespace capsule::sandbox {
namespace {

constexpr const char* kTarStep = "tar";
constexpr std::size_t kChunk = 64 * 1024;

struct ArchiveFree {
  void operator()(struct archive* a) const { archive_free(a); }
};
struct EntryFree {
  void operator()(struct archive_entry* e) const { archive_entry_free(e); }
};
using Archive = std::unique_ptr<struct archive, ArchiveFree>;
using Entry = std::unique_ptr<struct archive_entry, EntryFree>;

[[noreturn]] void fail_errno(const std::string& path, const std::string& doing) {
  throw base::Error(base::Cause{kTarStep, path, errno, doing});
}

[[noreturn]] void too_large(const std::string& path, const std::string& why) {
  throw base::Error(base::Cause{kTarStep, path, 0, why}, "payload_too_large");
}

// What libarchive's C frames cannot carry: an exception from a callback, kept and rethrown after the call.
class CallbackError {
 public:
  template <typename Body>
  la_ssize_t guard(Body&& body) {
    try {
      return body();
    } catch (...) {
      error_ = std::current_exception();
      return -1;
    }
  }
  void rethrow() const {
    if (error_) std::rethrow_exception(error_);
  }

 private:
  std::exception_ptr error_;
};

class Packer {
 public:
  Packer(const ByteWriter& sink, const PackLimits& limits, const IdRange& owners)
      : sink_(sink), limits_(limits), owners_(owners), buffer_(kChunk) {}

  TreeCounts run(int root_fd, std::string_view path) {
    const std::string relative = normalize_sandbox_path(path);
    OpenedFile top = open_for_read(root_fd, path);
    tar_.reset(archive_write_new());
    if (!tar_) throw base::Error(base::Cause{kTarStep, relative, ENOMEM, "libarchive"});
    check(archive_write_set_format_pax_restricted(tar_.get()), "tar format");
    check(archive_write_set_bytes_per_block(tar_.get(), kChunk), "block size");
    check(archive_write_set_bytes_in_last_block(tar_.get(), 1), "block size");
    check(archive_write_open(tar_.get(), this, nullptr, &Packer::write_block, nullptr), "open tar");
    if (S_ISDIR(top.st.st_mode)) {
      add_directory(top.fd.get(), "", top.st.st_dev, 0);
    } else {
      const std::size_t slash = relative.rfind('/');
      add_file(top.fd.get(), slash == std::string::npos ? relative : relative.substr(slash + 1), top.st);
    }
    check(archive_write_close(tar_.get()), "finish tar");
    return counts_;
  }

 private:
  static la_ssize_t write_block(struct archive*, void* self, const void* data, std::size_t size) {
    auto* packer = static_cast<Packer*>(self);
    return packer->callback_error_.guard([&] {
      packer->sink_(std::string_view(static_cast<const char*>(data), size));
      return static_cast<la_ssize_t>(size);
    });
  }

  void check(int status, const std::string& what) {
    if (status >= ARCHIVE_WARN) return;
    callback_error_.rethrow();
    const char* text = archive_error_string(tar_.get());
    throw base::Error(base::Cause{kTarStep, what, 0, text ? text : "libarchive error"});
  }

  std::uint32_t shown_id(std::uint32_t id) const {
    if (owners_.count == 0) return id;
    return id >= owners_.host_base && id - owners_.host_base < owners_.count ? id - owners_.host_base : 65534;
  }

  Entry make_entry(const std::string& name, const struct stat& st, unsigned type) {
    if (++entries_ > limits_.max_entries) {
      too_large(name, "more than " + std::to_string(limits_.max_entries) + " entries");
    }
    Entry entry(archive_entry_new());
    archive_entry_set_pathname(entry.get(), name.c_str());
    archive_entry_set_filetype(entry.get(), type);
    archive_entry_set_perm(entry.get(), st.st_mode & 07777 & ~(S_ISUID | S_ISGID));
    archive_entry_set_uid(entry.get(), shown_id(st.st_uid));
    archive_entry_set_gid(entry.get(), shown_id(st.st_gid));
    archive_entry_set_mtime(entry.get(), st.st_mtim.tv_sec, 0);
    return entry;
  }

  void write_header(struct archive_entry* entry, const std::string& name) {
    check(archive_write_header(tar_.get(), entry), "header of " + name);
  }

  // The file's first st.st_size bytes: a file that grew meanwhile is cut there, one that shrank is padded
  // with zeros by libarchive, so the header stays true.
  void add_file(int fd, const std::string& name, const struct stat& st) {
    Entry entry = make_entry(name, st, AE_IFREG);
    archive_entry_set_size(entry.get(), st.st_size);
    write_header(entry.get(), name);
    auto left = static_cast<std::uint64_t>(st.st_size);
    while (left > 0) {
      const ssize_t n = read(fd, buffer_.data(), std::min<std::uint64_t>(buffer_.size(), left));
      if (n < 0 && errno == EINTR) continue;
      if (n < 0) fail_errno(name, "read");
      if (n == 0) break;
      if (archive_write_data(tar_.get(), buffer_.data(), static_cast<std::size_t>(n)) < 0) check(-1, name);
      left -= static_cast<std::uint64_t>(n);
      counts_.bytes += static_cast<std::uint64_t>(n);
    }
    check(archive_write_finish_entry(tar_.get()), name);
    ++counts_.files;
  }

  void add_symlink(int path_fd, const std::string& name, const struct stat& st) {
    std::string target(PATH_MAX, '\0');
    const ssize_t length = readlinkat(path_fd, "", target.data(), target.size());
    if (length < 0) fail_errno(name, "readlink");
    target.resize(static_cast<std::size_t>(length));
    Entry entry = make_entry(name, st, AE_IFLNK);
    archive_entry_set_symlink(entry.get(), target.c_str());
    write_header(entry.get(), name);
    ++counts_.symlinks;
  }

  // One name in dir_fd, opened without following it and typed by its own descriptor.
  void add_entry(int dir_fd, const std::string& name, const std::string& path, dev_t parent_dev, std::size_t depth) {
    const base::UniqueFd path_fd(openat(dir_fd, name.c_str(), O_PATH | O_NOFOLLOW | O_CLOEXEC));
    if (!path_fd) {
      if (errno == ENOENT) return;  // removed since the directory was read
      fail_errno(path, "open");
    }
    struct stat st {};
    if (fstat(path_fd.get(), &st) != 0) fail_errno(path, "stat");
    if (S_ISLNK(st.st_mode)) return add_symlink(path_fd.get(), path, st);
    if (!S_ISREG(st.st_mode) && !S_ISDIR(st.st_mode)) {
      ++counts_.skipped;
      return;
    }
    base::UniqueFd fd;
    try {
      fd = reopen_for_read(path_fd.get(), st, path);
    } catch (const base::Error& e) {
      if (e.code() != "forbidden") throw;
      ++counts_.skipped;  // not readable by whoever packs (a session's box user): left out, as a FIFO is
      return;
    }
    if (S_ISREG(st.st_mode)) return add_file(fd.get(), path, st);

    Entry entry = make_entry(path, st, AE_IFDIR);
    write_header(entry.get(), path);
    ++counts_.dirs;
    if (st.st_dev != parent_dev && is_kernel_filesystem(fd.get())) {
      ++counts_.skipped;
      return;
    }
    add_directory(fd.get(), path + "/", st.st_dev, depth + 1);
  }

  void add_directory(int dir_fd, const std::string& prefix, dev_t dev, std::size_t depth) {
    if (depth > limits_.max_depth) {
      too_large(prefix, "deeper than " + std::to_string(limits_.max_depth) + " directories");
    }
    // A descriptor of its own for the listing, so dir_fd stays free for the openat of each name.
    const int listing_fd = openat(dir_fd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    DIR* listing = listing_fd < 0 ? nullptr : fdopendir(listing_fd);
    if (listing == nullptr) {
      if (listing_fd >= 0) close(listing_fd);
      fail_errno(prefix, "read directory");
    }
    const std::unique_ptr<DIR, int (*)(DIR*)> owned(listing, closedir);
    for (;;) {
      errno = 0;
      const dirent* found = readdir(listing);
      if (found == nullptr) {
        if (errno != 0) fail_errno(prefix, "read directory");
        break;
      }
      const std::string name = found->d_name;
      if (name == "." || name == "..") continue;
      add_entry(dir_fd, name, prefix + name, dev, depth);
    }
  }

  const ByteWriter& sink_;
  PackLimits limits_;
  IdRange owners_;
  std::vector<char> buffer_;
  Archive tar_;
  CallbackError callback_error_;
  std::uint64_t entries_ = 0;
  TreeCounts counts_;
};

class Unpacker {
 public:
  Unpacker(const ByteReader& source, const RootOwner& owner, const UnpackLimits& limits)
      : source_(source), owner_(owner), limits_(limits), buffer_(kChunk) {}

  TreeCounts run(int root_fd, std::string_view dest_path) {
    const base::UniqueFd dest = make_dirs(root_fd, dest_path, owner_);
    tar_.reset(archive_read_new());
    if (!tar_) throw base::Error(base::Cause{kTarStep, std::string(dest_path), ENOMEM, "libarchive"});
    check(archive_read_support_format_tar(tar_.get()), "tar format");
    check(archive_read_open(tar_.get(), this, nullptr, &Unpacker::read_block, nullptr), "open tar");
    for (;;) {
      struct archive_entry* entry = nullptr;
      const int status = archive_read_next_header(tar_.get(), &entry);
      if (status == ARCHIVE_EOF) break;
      check(status, "read header");
      if (++entries_ > limits_.max_entries) {
        too_large(std::string(dest_path), "more than " + std::to_string(limits_.max_entries) + " entries");
      }
      add_entry(dest.get(), entry);
    }
    return counts_;
  }

 private:
  static la_ssize_t read_block(struct archive*, void* self, const void** buffer) {
    auto* unpacker = static_cast<Unpacker*>(self);
    return unpacker->callback_error_.guard([&] {
      const std::string_view chunk = unpacker->source_();
      *buffer = chunk.data();
      return static_cast<la_ssize_t>(chunk.size());
    });
  }

  void check(int status, const std::string& what) {
    if (status >= ARCHIVE_WARN) return;
    callback_error_.rethrow();
    const char* text = archive_error_string(tar_.get());
    throw base::Error(base::Cause{kTarStep, "", 0, what + ": " + (text ? text : "libarchive error")},
                      "invalid_archive");
  }

  // An entry or link name as a relative path under dest: never absolute, never "..".
  std::string relative_name(const char* raw) const {
    if (raw == nullptr) {
      throw base::Error(base::Cause{kTarStep, "", 0, "an entry without a name"}, "invalid_archive");
    }
    const std::string_view name(raw);
    if (name.size() > limits_.max_path_length) {
      throw base::Error(base::Cause{kTarStep, std::string(name.substr(0, 256)), 0,
                                    "name longer than " + std::to_string(limits_.max_path_length) + " bytes"},
                        "invalid_path");
    }
    if (!name.empty() && name.front() == '/') {
      throw base::Error(base::Cause{kTarStep, std::string(name), 0, "absolute names are not unpacked"},
                        "invalid_path");
    }
    return normalize_sandbox_path(name);
  }

  // Reads the current entry's data for write_file_beneath.
  std::string_view next_data() {
    const la_ssize_t n = archive_read_data(tar_.get(), buffer_.data(), buffer_.size());
    if (n < 0) check(static_cast<int>(n), "read data");
    return {buffer_.data(), static_cast<std::size_t>(n)};
  }

  void add_file(int dest_fd, const std::string& name, struct archive_entry* entry) {
    const std::uint64_t left = limits_.max_bytes - counts_.bytes;
    const std::string limit = "more than " + std::to_string(limits_.max_bytes) + " bytes of files";
    if (archive_entry_size_is_set(entry) && static_cast<std::uint64_t>(archive_entry_size(entry)) > left) {
      too_large(name, limit);
    }
    std::optional<struct timespec> mtime;
    if (archive_entry_mtime_is_set(entry)) {
      mtime = timespec{archive_entry_mtime(entry), archive_entry_mtime_nsec(entry)};
    }
    try {
      counts_.bytes += write_file_beneath(dest_fd, name, [this] { return next_data(); },
                                          archive_entry_perm(entry), owner_, left, mtime);
    } catch (const base::Error& error) {
      if (error.code() == "payload_too_large") too_large(name, limit);
      throw;
    }
    ++counts_.files;
  }

  void add_entry(int dest_fd, struct archive_entry* entry) {
    const std::string name = relative_name(archive_entry_pathname(entry));
    if (const char* hardlink = archive_entry_hardlink(entry)) {
      make_hard_link_beneath(dest_fd, name, relative_name(hardlink), owner_);
      ++counts_.files;
      return;
    }
    const auto type = archive_entry_filetype(entry);
    if (type == AE_IFDIR) {
      make_dirs_beneath(dest_fd, name, owner_, archive_entry_perm(entry));
      ++counts_.dirs;
    } else if (name == ".") {
      throw base::Error(base::Cause{kTarStep, ".", 0, "only a directory can name the destination itself"},
                        "invalid_archive");
    } else if (type == AE_IFREG) {
      add_file(dest_fd, name, entry);
    } else if (type == AE_IFLNK) {
      const char* target = archive_entry_symlink(entry);
      if (target == nullptr || *target == '\0') {
        throw base::Error(base::Cause{kTarStep, name, 0, "a symlink without a target"}, "invalid_archive");
      }
      if (std::string_view(target).size() > limits_.max_path_length) {
        throw base::Error(base::Cause{kTarStep, name, 0, "symlink target too long"}, "invalid_path");
      }
      make_symlink_beneath(dest_fd, name, target, owner_);
      ++counts_.symlinks;
    } else {
      const std::string kind = type == AE_IFIFO                       ? "a FIFO"
                               : type == AE_IFCHR || type == AE_IFBLK ? "a device"
                                                                      : "a special file";
      throw base::Error(
          base::Cause{kTarStep, name, 0, kind + ": only files, directories, symlinks and hard links are unpacked"},
          "invalid_archive");
    }
  }

  const ByteReader& source_;
  RootOwner owner_;
  UnpackLimits limits_;
  std::vector<char> buffer_;
  Archive tar_;
  CallbackError callback_error_;
  std::uint64_t entries_ = 0;
  TreeCounts counts_;
};

}  // namespace

TreeCounts pack_tree(int root_fd, std::string_view path, const ByteWriter& sink, const PackLimits& limits,
                     const IdRange& owners) {
  return Packer(sink, limits, owners).run(root_fd, path);
}

TreeCounts unpack_tree(int root_fd, std::string_view dest_path, const ByteReader& source, const RootOwner& owner,
                       const UnpackLimits& limits) {
  return Unpacker(source, owner, limits).run(root_fd, dest_path);
}

}  // namespace capsule::sandbox
