// Session file transfer: uploads name the host path for capsuled to stream in; downloads stream the answer into
// a temporary file beside the destination, then rename it (a file) or unpack it (a tar) refusing escapes.
#include "client/session_files.h"

#include <archive.h>
#include <archive_entry.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <iostream>
#include <iterator>
#include <memory>
#include <stdexcept>

#include "base/file_util.h"
#include "base/unique_fd.h"
#include "client/cli_args.h"
#include "client/cli_session.h"
#include "http/unix_client.h"

namespace capsule::client {
namespace {

namespace fs = std::filesystem;

constexpr std::size_t kPiece = 1 << 16;

std::string files_target(const SessionPathArg& remote) {
  return session_path(remote.id) + "/files?path=" + http::url_encode(remote.path);
}

[[noreturn]] void fail_errno(const std::string& what, const fs::path& path) {
  throw std::runtime_error(what + " " + path.string() + ": " + std::strerror(errno));
}

// capsuled opens the host path with this user's own rights and streams the file or tree in itself
// (PUT .../files with {"source"}), so nothing passes through this process.
void upload(const http::HttpClient& client, const fs::path& local, const SessionPathArg& remote) {
  std::error_code ec;
  if (!fs::exists(fs::symlink_status(local, ec))) {
    throw std::runtime_error("cp: " + local.string() + ": no such file or directory");
  }
  const std::string source = absolute_path(local);
  SessionPathArg target = remote;
  if (target.path.ends_with('/')) target.path += fs::path(source).filename().string();  // into that directory
  http::request_json(client, "PUT", files_target(target), {{"source", source}});
}

// A temporary file in `dir`, removed on destruction unless renamed away by keep_as().
class TempFile {
 public:
  explicit TempFile(const fs::path& dir) {
    std::string name = (dir / ".capsule-cp-XXXXXX").string();
    fd_ = base::UniqueFd(::mkstemp(name.data()));
    if (!fd_) fail_errno("cannot create a temporary file in", dir);
    path_ = name;
  }
  ~TempFile() {
    if (!path_.empty()) ::unlink(path_.c_str());
  }
  TempFile(const TempFile&) = delete;
  TempFile& operator=(const TempFile&) = delete;

  int fd() const { return fd_.get(); }
  void drop_name() {
    ::unlink(path_.c_str());
    path_.clear();
  }
  // Gives the file the mode a new file of this user gets and renames it to `target`.
  void keep_as(const fs::path& target) {
    const mode_t mask = ::umask(0);
    ::umask(mask);
    if (::fchmod(fd_.get(), 0666 & ~mask) != 0) fail_errno("cannot chmod", path_);
    if (::rename(path_.c_str(), target.c_str()) != 0) fail_errno("cannot write", target);
    path_.clear();
  }

 private:
  base::UniqueFd fd_;
  fs::path path_;
};

}  // namespace

void download_files(const http::HttpClient& client, const std::string& target, const std::string& remote_path,
                    const fs::path& local) {
  std::error_code ec;
  const bool into_dir = fs::is_directory(local, ec);
  const fs::path parent = into_dir ? local : fs::absolute(local).parent_path();
  TempFile temp(parent);
  const http::HttpResponse response = client.stream("GET", target, nullptr, {}, [&](std::string_view data) {
    base::write_all(temp.fd(), data.data(), data.size(), "cp", "a temporary file in " + parent.string());
  });
  http::throw_if_error(response);
  const auto type = response.headers.find("content-type");
  if (type != response.headers.end() && type->second.starts_with("application/x-tar")) {
    temp.drop_name();
    if (!into_dir && ::mkdir(local.c_str(), 0777) != 0) fail_errno("cannot create directory", local);
    if (::lseek(temp.fd(), 0, SEEK_SET) != 0) fail_errno("cannot rewind", "the downloaded tar");
    unpack_tar_into(temp.fd(), local);
    return;
  }
  const std::string name = fs::path(remote_path).filename().string();
  if (into_dir && name.empty()) throw std::runtime_error("cp: " + remote_path + " names no file to write into " + local.string());
  temp.keep_as(into_dir ? local / name : local);
}

namespace {

// Restores the working directory on destruction (unpacking happens relative to the destination).
class WorkingDirectory {
 public:
  explicit WorkingDirectory(const fs::path& dir) : saved_(::open(".", O_RDONLY | O_DIRECTORY | O_CLOEXEC)) {
    if (!saved_) fail_errno("cannot open", fs::current_path());
    const base::UniqueFd target = base::open_directory(dir, "cp");
    if (::fchdir(target.get()) != 0) fail_errno("cannot enter", dir);
  }
  ~WorkingDirectory() {
    if (::fchdir(saved_.get()) != 0) std::perror("capsule: cannot return to the working directory");
  }
  WorkingDirectory(const WorkingDirectory&) = delete;
  WorkingDirectory& operator=(const WorkingDirectory&) = delete;

 private:
  base::UniqueFd saved_;
};

bool stays_inside(const char* name) {
  if (name == nullptr || *name == '\0' || *name == '/') return false;
  for (const auto& part : fs::path(name)) {
    if (part == "..") return false;
  }
  return true;
}

// Whether a directory on the way to `relative` (from the working directory) is a symlink: a hard link made
// through one would reach a file outside.
bool goes_through_symlink(const char* relative) {
  fs::path walked;
  const fs::path path(relative);
  for (auto part = path.begin(); part != path.end() && std::next(part) != path.end(); ++part) {
    walked /= *part;
    struct stat st {};
    if (::lstat(walked.c_str(), &st) == 0 && S_ISLNK(st.st_mode)) return true;
  }
  return false;
}

struct ArchiveReadFree {
  void operator()(struct archive* a) const { archive_read_free(a); }
};
struct ArchiveWriteFree {
  void operator()(struct archive* a) const { archive_write_free(a); }
};

}  // namespace

std::optional<SessionPathArg> parse_session_path(const std::string& arg) {
  const std::size_t colon = arg.find(':');
  if (colon == std::string::npos || colon == 0 || arg.find('/') < colon) return std::nullopt;
  SessionPathArg out{arg.substr(0, colon), arg.substr(colon + 1)};
  if (out.path.empty()) throw std::invalid_argument("'" + arg + "': expected ID:/path");
  return out;
}

std::uint64_t unpack_tar_into(int tar_fd, const fs::path& dir) {
  std::unique_ptr<struct archive, ArchiveReadFree> in(archive_read_new());
  std::unique_ptr<struct archive, ArchiveWriteFree> out(archive_write_disk_new());
  if (!in || !out) throw std::runtime_error("cp: libarchive could not allocate");
  archive_read_support_format_tar(in.get());
  // Permission bits as the tar has them, but never ARCHIVE_EXTRACT_OWNER: everything made belongs to whoever runs
  // this, root included (as docker cp and a non-root tar do); setuid and setgid are cleared from each entry below.
  archive_write_disk_set_options(out.get(), ARCHIVE_EXTRACT_TIME | ARCHIVE_EXTRACT_PERM |
                                                ARCHIVE_EXTRACT_SECURE_NODOTDOT | ARCHIVE_EXTRACT_SECURE_SYMLINKS |
                                                ARCHIVE_EXTRACT_SECURE_NOABSOLUTEPATHS);
  if (archive_read_open_fd(in.get(), tar_fd, kPiece) != ARCHIVE_OK) {
    throw std::runtime_error(std::string("cp: the downloaded tar cannot be read: ") + archive_error_string(in.get()));
  }
  const WorkingDirectory inside(dir);
  std::uint64_t written = 0;
  for (;;) {
    struct archive_entry* entry = nullptr;
    const int status = archive_read_next_header(in.get(), &entry);
    if (status == ARCHIVE_EOF) break;
    if (status < ARCHIVE_WARN) {
      throw std::runtime_error(std::string("cp: the downloaded tar is broken: ") + archive_error_string(in.get()));
    }
    const char* name = archive_entry_pathname(entry);
    const std::string shown = name ? name : "";
    const char* link = archive_entry_hardlink(entry);
    if (!stays_inside(name) || (link != nullptr && !stays_inside(link))) {
      throw std::runtime_error("cp: tar entry '" + shown + "' would land outside " + dir.string() + ": refused");
    }
    if (link != nullptr && goes_through_symlink(link)) {
      throw std::runtime_error("cp: tar entry '" + shown + "' links through a symlink: refused");
    }
    const mode_t type = archive_entry_filetype(entry);
    if (link == nullptr && type != AE_IFREG && type != AE_IFDIR && type != AE_IFLNK) {
      std::cerr << "capsule: cp: skipped " << shown << " (not a file, dir or link)\n";
      continue;
    }
    // Content from a box is never a privilege on the host: with its owner gone too, no setuid or setgid file.
    archive_entry_set_perm(entry, archive_entry_perm(entry) & ~(S_ISUID | S_ISGID));
    if (archive_write_header(out.get(), entry) < ARCHIVE_WARN) {
      throw std::runtime_error("cp: cannot write '" + shown + "': " + archive_error_string(out.get()));
    }
    const void* block = nullptr;
    std::size_t size = 0;
    la_int64_t offset = 0;
    int data_status;
    while ((data_status = archive_read_data_block(in.get(), &block, &size, &offset)) == ARCHIVE_OK) {
      if (archive_write_data_block(out.get(), block, size, offset) < ARCHIVE_WARN) {
        throw std::runtime_error("cp: cannot write '" + shown + "': " + archive_error_string(out.get()));
      }
    }
    if (data_status != ARCHIVE_EOF) {
      throw std::runtime_error("cp: the downloaded tar is broken at '" + shown + "': " + archive_error_string(in.get()));
    }
    if (archive_write_finish_entry(out.get()) < ARCHIVE_WARN) {
      throw std::runtime_error("cp: cannot finish '" + shown + "': " + archive_error_string(out.get()));
    }
    ++written;
  }
  if (archive_write_close(out.get()) != ARCHIVE_OK) {
    throw std::runtime_error(std::string("cp: cannot finish unpacking: ") + archive_error_string(out.get()));
  }
  return written;
}

void cmd_session_cp(const std::string& socket, const std::string& source, const std::string& destination) {
  const std::optional<SessionPathArg> from = parse_session_path(source);
  const std::optional<SessionPathArg> to = parse_session_path(destination);
  if (from.has_value() == to.has_value()) {
    throw std::invalid_argument("cp: exactly one of SRC and DST must be ID:/path (a path in a session)");
  }
  const http::HttpClient client(socket);
  if (to) upload(client, source, *to);
  else download_files(client, files_target(*from), from->path, destination);
}

}  // namespace capsule::client
