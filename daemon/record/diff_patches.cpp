// diff_with_patches: reads both sides of each listed entry beneath the roots' descriptors (no symlink
// followed, only regular files opened), diffs them with unified_diff and keeps the response bounded.
#include "daemon/record/diff_patches.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <climits>
#include <cstring>
#include <string_view>
#include <vector>

#include "base/error.h"
#include "base/file_util.h"
#include "base/unique_fd.h"
#include "sandbox/result_json.h"

namespace capsule::daemon {
namespace {

// An entry side that cannot be read; the message says why. The other entries go on.
struct Unreadable {
  std::string message;
};

// What was read of one side: at most `cap` bytes, `cut` when there was more.
struct Content {
  std::string bytes;
  bool cut = false;
};

// Throws Unreadable unless `path` is relative and made only of real names.
void check_relative(const std::string& path) {
  if (path.empty() || path.front() == '/') throw Unreadable{"not a relative path"};
  std::size_t start = 0;
  for (;;) {
    const std::size_t slash = path.find('/', start);
    const std::string_view name = std::string_view(path).substr(start, slash == std::string::npos ? slash : slash - start);
    if (name.empty() || name == "." || name == "..") throw Unreadable{"path has an empty, \".\" or \"..\" component"};
    if (slash == std::string::npos) return;
    start = slash + 1;
  }
}

std::string describe_type(mode_t mode) {
  if (S_ISDIR(mode)) return "a directory";
  if (S_ISFIFO(mode)) return "a FIFO";
  if (S_ISSOCK(mode)) return "a socket";
  if (S_ISCHR(mode)) return "a character device";
  if (S_ISBLK(mode)) return "a block device";
  return "not a regular file";
}

// Reads at most cap + 1 bytes of fd.
Content read_capped(int fd, std::size_t cap) {
  Content content;
  std::string& bytes = content.bytes;
  bytes.resize(std::min<std::size_t>(cap + 1, 1 << 16));
  std::size_t filled = 0;
  for (;;) {
    if (filled == bytes.size()) {
      if (bytes.size() > cap) break;
      bytes.resize(std::min(cap + 1, bytes.size() * 2));
    }
    const ssize_t n = ::read(fd, bytes.data() + filled, bytes.size() - filled);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) throw Unreadable{std::string("read: ") + std::strerror(errno)};
    if (n == 0) break;
    filled += static_cast<std::size_t>(n);
  }
  bytes.resize(filled);
  if (filled > cap) {
    bytes.resize(cap);
    content.cut = true;
  }
  return content;
}

// The content of `path` beneath root_fd: a regular file's first bytes, or a symlink's target.
Content read_content_beneath(int root_fd, const std::string& path, std::size_t cap) {
  check_relative(path);
  const std::size_t slash = path.rfind('/');
  const std::string name = slash == std::string::npos ? path : path.substr(slash + 1);
  base::UniqueFd parent;
  try {
    if (slash != std::string::npos) {
      parent = base::open_beneath(root_fd, path.substr(0, slash), O_RDONLY | O_DIRECTORY, "open", "parent");
    }
  } catch (const base::Error& e) {
    throw Unreadable{e.what()};
  }
  const int dir_fd = parent ? parent.get() : root_fd;

  struct stat st {};
  if (::fstatat(dir_fd, name.c_str(), &st, AT_SYMLINK_NOFOLLOW) != 0) {
    throw Unreadable{std::string("stat: ") + std::strerror(errno)};
  }
  if (S_ISLNK(st.st_mode)) {
    char target[PATH_MAX];
    const ssize_t n = ::readlinkat(dir_fd, name.c_str(), target, sizeof target);
    if (n < 0) throw Unreadable{std::string("readlink: ") + std::strerror(errno)};
    return {std::string(target, static_cast<std::size_t>(n)).substr(0, cap), static_cast<std::size_t>(n) > cap};
  }
  if (!S_ISREG(st.st_mode)) throw Unreadable{describe_type(st.st_mode) + ", not read"};
  base::UniqueFd file;
  try {
    // Swapped for something else since the stat: open_beneath never blocks nor follows, and the type
    // is checked again on the descriptor before a byte is read.
    file = base::open_beneath(dir_fd, name, O_RDONLY | O_NOCTTY, "open", "file");
    base::require_regular_file(file.get(), "open", "file");
  } catch (const base::Error& e) {
    throw Unreadable{e.what()};
  }
  return read_capped(file.get(), cap);
}

// A path as a patch header names it: git's C-style quoting when it holds a control character, a quote
// or a backslash, so that no path can end a header line or forge one.
std::string header_path(const std::string& prefix, const std::string& path) {
  const std::string plain = prefix + path;
  const bool needs_quotes = std::any_of(plain.begin(), plain.end(), [](char c) {
    const auto byte = static_cast<unsigned char>(c);
    return byte < 0x20 || byte == 0x7F || c == '"' || c == '\\';
  });
  if (!needs_quotes) return plain;
  std::string quoted = "\"";
  for (const char c : plain) {
    const auto byte = static_cast<unsigned char>(c);
    switch (c) {
      case '"': quoted += "\\\""; break;
      case '\\': quoted += "\\\\"; break;
      case '\n': quoted += "\\n"; break;
      case '\t': quoted += "\\t"; break;
      default:
        if (byte < 0x20 || byte == 0x7F) {
          const char octal[] = {'\\', static_cast<char>('0' + (byte >> 6)), static_cast<char>('0' + ((byte >> 3) & 7)),
                                static_cast<char>('0' + (byte & 7)), '\0'};
          quoted += octal;
        } else {
          quoted += c;
        }
    }
  }
  return quoted + "\"";
}

struct Listed {
  const DiffEntry* entry;
  const char* status;
};

class PatchWriter {
 public:
  PatchWriter(int upper_fd, int lower_fd, const PatchLimits& limits)
      : limits_(limits), upper_(open_diff_root(upper_fd)), lower_(open_diff_root(lower_fd)) {}

  nlohmann::json patches(const WorkspaceDiff& diff) {
    std::vector<Listed> listed;
    for (const auto& entry : diff.added) listed.push_back({&entry, "added"});
    for (const auto& entry : diff.modified) listed.push_back({&entry, "modified"});
    for (const auto& entry : diff.deleted) listed.push_back({&entry, "deleted"});
    std::stable_sort(listed.begin(), listed.end(),
                     [](const Listed& a, const Listed& b) { return a.entry->path < b.entry->path; });
    nlohmann::json out = nlohmann::json::array();
    for (const auto& item : listed) {
      if (!item.entry->path.empty() && item.entry->path.back() == '/') continue;  // an empty directory
      out.push_back(patch(item.entry->path, item.status));
    }
    return out;
  }

  std::size_t omitted() const { return omitted_; }

 private:
  nlohmann::json patch(const std::string& path, const std::string& status) {
    nlohmann::json j = {{"path", sandbox::to_valid_utf8(path)}, {"status", status}, {"binary", false}};
    if (exhausted_ || read_bytes_ >= limits_.max_total_read_bytes) {
      exhausted_ = true;
      ++omitted_;
      j["omitted"] = true;
      return j;
    }
    const bool has_old = status != "added", has_new = status != "deleted";
    Content old_side, new_side;
    try {
      if (has_old) old_side = read_content_beneath(lower_.get(), path, limits_.text.max_input_bytes);
      if (has_new) new_side = read_content_beneath(upper_.get(), path, limits_.text.max_input_bytes);
    } catch (const Unreadable& e) {
      j["error"] = e.message;
      return j;
    }
    read_bytes_ += old_side.bytes.size() + new_side.bytes.size();

    if (is_binary(old_side.bytes, old_side.cut) || is_binary(new_side.bytes, new_side.cut)) {
      j["binary"] = true;
      return j;
    }
    if (old_side.cut || new_side.cut) {
      j["too_large"] = true;
      j["reason"] = "over " + std::to_string(limits_.text.max_input_bytes) + " bytes";
      return j;
    }
    const TextDiff text = unified_diff(old_side.bytes, new_side.bytes, limits_.text);
    if (text.kind == TextDiff::Kind::too_large) {
      j["too_large"] = true;
      j["reason"] = text.reason;
      return j;
    }
    std::string patch;
    if (!text.hunks.empty()) {
      const std::string shown = sandbox::to_valid_utf8(path);
      patch = "--- " + (has_old ? header_path("a/", shown) : "/dev/null") + "\n+++ " +
              (has_new ? header_path("b/", shown) : "/dev/null") + "\n" + text.hunks;
    }
    if (patch_bytes_ + patch.size() > limits_.max_total_patch_bytes) {
      exhausted_ = true;
      ++omitted_;
      j["omitted"] = true;
      return j;
    }
    patch_bytes_ += patch.size();
    j["patch"] = std::move(patch);
    return j;
  }

  const PatchLimits& limits_;
  base::UniqueFd upper_, lower_;
  std::size_t read_bytes_ = 0, patch_bytes_ = 0, omitted_ = 0;
  bool exhausted_ = false;  // a total limit was reached: the remaining entries are omitted unread
};

}  // namespace

nlohmann::json diff_with_patches(const WorkspaceDiff& diff, const std::string& upper_dir,
                                 const std::string& lower_dir, const PatchLimits& limits) {
  const base::UniqueFd upper = open_diff_root(upper_dir);
  const base::UniqueFd lower = open_diff_root(lower_dir);
  return diff_with_patches(diff, upper.get(), lower.get(), limits);
}

nlohmann::json diff_with_patches(const WorkspaceDiff& diff, int upper_fd, int lower_fd, const PatchLimits& limits) {
  PatchWriter writer(upper_fd, lower_fd, limits);
  nlohmann::json j = diff.to_json();
  j["patches"] = writer.patches(diff);
  if (writer.omitted() > 0) j["patches_omitted"] = writer.omitted();
  return j;
}

}  // namespace capsule::daemon
