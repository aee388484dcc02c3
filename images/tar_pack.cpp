// pack_directory: a descriptor-relative, symlink-safe walk feeding a pax tar writer, chained into a raw
// gzip writer when compressing; the uncompressed bytes are hashed on the way (the layer's diff_id).
#include "images/tar_pack.h"

#include <archive.h>
#include <archive_entry.h>
#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/xattr.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <exception>
#include <map>
#include <memory>
#include <utility>

#include "images/error.h"
#include "base/file_util.h"

namespace capsule::images {
namespace fs = std::filesystem;
namespace {

constexpr const char* kPackStep = "pack";

struct WriteFree {
  void operator()(struct archive* a) const { archive_write_free(a); }
};
struct EntryFree {
  void operator()(struct archive_entry* e) const { archive_entry_free(e); }
};
using WriteArchive = std::unique_ptr<struct archive, WriteFree>;
using Entry = std::unique_ptr<struct archive_entry, EntryFree>;

bool keep_xattr(std::string_view name) {
  return name != "security.selinux" && name.rfind("trusted.overlay.", 0) != 0 && name.rfind("user.overlay.", 0) != 0;
}

class Packer {
 public:
  Packer(const fs::path& root, const ByteSink& sink, const PackOptions& options)
      : root_(root), sink_(sink), options_(options) {}
  // A packer left by an exception frees its archives here, while the members their callbacks use are alive
  // (freeing flushes through the callbacks); what they flush then is dropped.
  ~Packer() {
    abandoned_ = true;
    tar_.reset();
    gzip_.reset();
  }
  Packer(const Packer&) = delete;
  Packer& operator=(const Packer&) = delete;

  PackResult run() {
    if (options_.gzip) open_gzip();
    tar_.reset(archive_write_new());
    if (!tar_) throw_image_error(kPackStep, root_.string(), "libarchive: out of memory");
    check(tar_.get(), archive_write_set_format_pax_restricted(tar_.get()), "tar format");
    check(tar_.get(), archive_write_set_bytes_per_block(tar_.get(), 10240), "block size");
    check(tar_.get(), archive_write_open(tar_.get(), this, nullptr, &Packer::tar_bytes, nullptr), "open tar");

    base::UniqueFd root = base::open_directory(root_, kPackStep);
    struct stat st;
    if (fstat(root.get(), &st) != 0) throw_image_errno(kPackStep, root_.string(), "stat");
    root_device_ = st.st_dev;
    if (options_.max_tar_bytes != 0) {
      // First the walk alone, adding up headers and sizes without reading a byte of data: a tree past the cap
      // (a sandbox's sparse files cost it nothing) is refused before the daemon reads and writes gigabytes.
      measuring_ = true;
      add_directory(root.get(), "", root_device_);
      measuring_ = false;
      links_.clear();
    }
    add_directory(root.get(), "", root_device_);

    check(tar_.get(), archive_write_close(tar_.get()), "finish tar");
    if (gzip_) check(gzip_.get(), archive_write_close(gzip_.get()), "finish gzip");
    result_.diff_id = hasher_.finish();
    return std::move(result_);
  }

 private:
  void open_gzip() {
    gzip_.reset(archive_write_new());
    if (!gzip_) throw_image_error(kPackStep, root_.string(), "libarchive: out of memory");
    struct archive* gz = gzip_.get();
    check(gz, archive_write_set_format_raw(gz), "raw format");
    check(gz, archive_write_add_filter_gzip(gz), "gzip filter");
    // No timestamp or file name in the gzip header: only the tar bytes decide the output.
    check(gz, archive_write_set_options(gz, "gzip:!timestamp,gzip:compression-level=6"), "gzip options");
    check(gz, archive_write_set_bytes_in_last_block(gz, 1), "block size");
    check(gz, archive_write_open(gz, this, nullptr, &Packer::gzip_bytes, nullptr), "open gzip");
    Entry entry(archive_entry_new());
    archive_entry_set_pathname(entry.get(), "layer.tar");
    archive_entry_set_filetype(entry.get(), AE_IFREG);
    check(gz, archive_write_header(gz, entry.get()), "gzip stream");
  }

  // libarchive write callbacks: exceptions must not cross its C frames, so they are kept and rethrown.
  static la_ssize_t tar_bytes(struct archive*, void* self, const void* data, std::size_t size) {
    auto* packer = static_cast<Packer*>(self);
    if (packer->abandoned_) return static_cast<la_ssize_t>(size);
    try {
      packer->hasher_.update(data, size);
      packer->result_.tar_bytes += size;
      if (packer->gzip_) {
        if (archive_write_data(packer->gzip_.get(), data, size) < 0) packer->check(packer->gzip_.get(), -1, "gzip");
      } else {
        packer->sink_(data, size);
      }
      return static_cast<la_ssize_t>(size);
    } catch (...) {
      packer->error_ = std::current_exception();
      return -1;
    }
  }

  static la_ssize_t gzip_bytes(struct archive*, void* self, const void* data, std::size_t size) {
    auto* packer = static_cast<Packer*>(self);
    if (packer->abandoned_) return static_cast<la_ssize_t>(size);
    try {
      packer->sink_(data, size);
      return static_cast<la_ssize_t>(size);
    } catch (...) {
      packer->error_ = std::current_exception();
      return -1;
    }
  }

  void check(struct archive* a, int status, const std::string& what) {
    if (status >= ARCHIVE_WARN) return;
    if (error_) std::rethrow_exception(error_);
    const char* text = archive_error_string(a);
    throw_image_error(kPackStep, root_.string(), what + ": " + (text ? text : "libarchive error"));
  }

  static std::vector<std::string> sorted_names(int dir_fd, const std::string& shown) {
    int fd = dup(dir_fd);
    DIR* dir = fd < 0 ? nullptr : fdopendir(fd);
    if (dir == nullptr) {
      if (fd >= 0) close(fd);
      throw_image_errno(kPackStep, shown, "read directory");
    }
    std::unique_ptr<DIR, int (*)(DIR*)> owned(dir, closedir);
    rewinddir(dir);
    std::vector<std::string> names;
    while (dirent* entry = readdir(dir)) {
      const std::string name = entry->d_name;
      if (name != "." && name != "..") names.push_back(name);
    }
    std::sort(names.begin(), names.end());
    return names;
  }

  std::uint32_t shown_id(std::uint32_t id) const {
    if (options_.zero_owners) return 0;
    if (options_.id_count == 0) return id;
    return id >= options_.id_base && id - options_.id_base < options_.id_count ? id - options_.id_base : 65534;
  }

  Entry make_entry(const std::string& path, const struct stat& st) const {
    Entry entry(archive_entry_new());
    archive_entry_set_pathname(entry.get(), path.c_str());
    archive_entry_set_perm(entry.get(), st.st_mode & 07777);
    archive_entry_set_uid(entry.get(), shown_id(st.st_uid));
    archive_entry_set_gid(entry.get(), shown_id(st.st_gid));
    archive_entry_set_mtime(entry.get(), std::min<std::int64_t>(st.st_mtim.tv_sec, options_.epoch), 0);
    return entry;
  }

  void add_xattrs(int fd, struct archive_entry* entry, const std::string& shown) const {
    if (!options_.xattrs || measuring_) return;
    ssize_t size = flistxattr(fd, nullptr, 0);
    if (size <= 0) return;
    std::string list(static_cast<std::size_t>(size), '\0');
    size = flistxattr(fd, list.data(), list.size());
    if (size < 0) throw_image_errno(kPackStep, shown, "list xattrs");
    std::vector<std::string> names;
    for (std::size_t start = 0; start < static_cast<std::size_t>(size);) {
      std::string name(list.c_str() + start);
      start += name.size() + 1;
      if (keep_xattr(name)) names.push_back(std::move(name));
    }
    std::sort(names.begin(), names.end());
    for (const auto& name : names) {
      ssize_t length = fgetxattr(fd, name.c_str(), nullptr, 0);
      if (length < 0) throw_image_errno(kPackStep, shown, "read xattr " + name);
      std::string value(static_cast<std::size_t>(length), '\0');
      length = fgetxattr(fd, name.c_str(), value.data(), value.size());
      if (length < 0) throw_image_errno(kPackStep, shown, "read xattr " + name);
      archive_entry_xattr_add_entry(entry, name.c_str(), value.data(), static_cast<std::size_t>(length));
    }
  }

  void write_header(struct archive_entry* entry, const std::string& shown) {
    if (measuring_) {
      measure(512, shown);
      return;
    }
    check(tar_.get(), archive_write_header(tar_.get(), entry), "header of " + shown);
    ++result_.entries;
  }

  // An overlayfs opaque marker on an open directory (either namespace of overlay xattrs).
  static bool is_opaque(int dir_fd) {
    for (const char* key : {"trusted.overlay.opaque", "user.overlay.opaque"}) {
      char value[2];
      if (fgetxattr(dir_fd, key, value, sizeof value) == 1 && value[0] == 'y') return true;
    }
    return false;
  }

  // An empty regular entry named `path` (a whiteout or an opaque marker), owned by the entry it stands for.
  void add_marker(const std::string& path, const struct stat& st) {
    Entry entry = make_entry(path, st);
    archive_entry_set_filetype(entry.get(), AE_IFREG);
    archive_entry_set_perm(entry.get(), 0644);
    archive_entry_set_size(entry.get(), 0);
    write_header(entry.get(), path);
  }

  // `device`: the filesystem the walk is on below this directory; directories on another one (mount points)
  // are packed empty.
  void add_directory(int dir_fd, const std::string& prefix, dev_t device) {
    for (const auto& name : sorted_names(dir_fd, prefix.empty() ? root_.string() : prefix)) {
      const std::string path = prefix + name;
      struct stat st;
      if (fstatat(dir_fd, name.c_str(), &st, AT_SYMLINK_NOFOLLOW) != 0) throw_image_errno(kPackStep, path, "stat");
      if (options_.include && !options_.include(path, S_ISDIR(st.st_mode))) continue;
      if (S_ISDIR(st.st_mode)) {
        base::UniqueFd child(openat(dir_fd, name.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
        if (!child) throw_image_errno(kPackStep, path, "open directory");
        Entry entry = make_entry(path, st);
        archive_entry_set_filetype(entry.get(), AE_IFDIR);
        add_xattrs(child.get(), entry.get(), path);
        write_header(entry.get(), path);
        if (options_.overlay_upper && is_opaque(child.get())) add_marker(path + "/.wh..wh..opq", st);
        if (auto graft = options_.grafts.find(path); graft != options_.grafts.end()) {
          base::UniqueFd grafted = base::open_directory(graft->second, kPackStep);
          struct stat graft_st;
          if (fstat(grafted.get(), &graft_st) != 0) throw_image_errno(kPackStep, graft->second.string(), "stat");
          add_directory(grafted.get(), path + "/", graft_st.st_dev);
        } else if (st.st_dev == device) {
          add_directory(child.get(), path + "/", device);
        }
      } else if (S_ISREG(st.st_mode)) {
        add_file(dir_fd, name, path, st);
      } else if (S_ISLNK(st.st_mode)) {
        std::string target(static_cast<std::size_t>(st.st_size) + 1, '\0');
        ssize_t length = readlinkat(dir_fd, name.c_str(), target.data(), target.size());
        if (length < 0 || static_cast<std::size_t>(length) >= target.size()) throw_image_errno(kPackStep, path, "readlink");
        target.resize(static_cast<std::size_t>(length));
        Entry entry = make_entry(path, st);
        archive_entry_set_filetype(entry.get(), AE_IFLNK);
        archive_entry_set_symlink(entry.get(), target.c_str());
        write_header(entry.get(), path);
      } else if (options_.overlay_upper && S_ISCHR(st.st_mode) && major(st.st_rdev) == 0 && minor(st.st_rdev) == 0) {
        add_marker(prefix + ".wh." + name, st);
      } else {
        result_.skipped.push_back(path);
      }
    }
  }

  void add_file(int dir_fd, const std::string& name, const std::string& path, const struct stat& st) {
    Entry entry = make_entry(path, st);
    archive_entry_set_filetype(entry.get(), AE_IFREG);
    if (st.st_nlink > 1) {
      auto [it, first] = links_.try_emplace({st.st_dev, st.st_ino}, path);
      if (!first) {
        archive_entry_set_hardlink(entry.get(), it->second.c_str());
        archive_entry_set_size(entry.get(), 0);
        write_header(entry.get(), path);
        return;
      }
    }
    if (measuring_) {
      write_header(entry.get(), path);
      measure((static_cast<std::uint64_t>(st.st_size) + 511) / 512 * 512, path);
      return;
    }
    // O_NONBLOCK: a FIFO swapped in after the lstat must not block the open; the fstat below refuses it.
    base::UniqueFd fd(openat(dir_fd, name.c_str(), O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC));
    if (!fd) throw_image_errno(kPackStep, path, "open");
    struct stat opened;
    if (fstat(fd.get(), &opened) != 0 || opened.st_ino != st.st_ino || !S_ISREG(opened.st_mode)) {
      throw_image_error(kPackStep, path, "changed while being packed");
    }
    // What the tar holds so far (less what libarchive still buffers), a header and the data padded to 512.
    const std::uint64_t data_bytes = (static_cast<std::uint64_t>(st.st_size) + 511) / 512 * 512;
    if (options_.max_tar_bytes != 0 && result_.tar_bytes + 512 + data_bytes > options_.max_tar_bytes) {
      throw TarTooLarge(kPackStep, path, "its " + std::to_string(st.st_size) + " bytes would take the tar past " +
                                         std::to_string(options_.max_tar_bytes) + " bytes; not read");
    }
    archive_entry_set_size(entry.get(), st.st_size);
    add_xattrs(fd.get(), entry.get(), path);
    write_header(entry.get(), path);
    std::unique_ptr<char[]> buffer(new char[1 << 20]);
    std::uint64_t total = 0;
    for (;;) {
      ssize_t n = read(fd.get(), buffer.get(), 1 << 20);
      if (n < 0) {
        if (errno == EINTR) continue;
        throw_image_errno(kPackStep, path, "read");
      }
      if (n == 0) break;
      total += static_cast<std::uint64_t>(n);
      if (total > static_cast<std::uint64_t>(st.st_size)) throw_image_error(kPackStep, path, "grew while being packed");
      if (archive_write_data(tar_.get(), buffer.get(), static_cast<std::size_t>(n)) < 0) check(tar_.get(), -1, path);
    }
    if (total != static_cast<std::uint64_t>(st.st_size)) throw_image_error(kPackStep, path, "shrank while being packed");
  }

  // The measuring walk's count: at least what the tar will hold (pax records come on top).
  void measure(std::uint64_t bytes, const std::string& path) {
    measured_ += bytes;
    if (measured_ > options_.max_tar_bytes) {
      throw TarTooLarge(kPackStep, path, "the files up to here add up to more than the tar's " +
                                         std::to_string(options_.max_tar_bytes) + " bytes; nothing was read");
    }
  }

  const fs::path& root_;
  const ByteSink& sink_;
  const PackOptions& options_;
  WriteArchive gzip_;  // declared before tar_: the tar writer flushes into it, so it is freed last
  WriteArchive tar_;
  store::Sha256 hasher_;
  PackResult result_;
  dev_t root_device_ = 0;
  std::map<std::pair<dev_t, ino_t>, std::string> links_;
  std::exception_ptr error_;
  bool measuring_ = false;     // the first walk of a capped pack: sizes only (run)
  std::uint64_t measured_ = 0;
  bool abandoned_ = false;  // set by the destructor: callbacks drop what freeing the archives flushes
};

}  // namespace

PackResult pack_directory(const fs::path& dir, const ByteSink& sink, const PackOptions& options) {
  return Packer(dir, sink, options).run();
}

}  // namespace capsule::images
