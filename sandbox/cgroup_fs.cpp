// The host implementation of the cgroup file-system seam, and the helpers both back ends share:
// mountinfo parsing, "key value" files, name checks, and the bounded wait/rmdir loops.
#include "sandbox/cgroup_fs.h"

#include <dirent.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <cmath>
#include <set>
#include <sstream>
#include <thread>

#include "sandbox/error.h"

namespace capsule::sandbox {
namespace {

class HostCgroupFs final : public CgroupFs {
 public:
  std::string read(const std::string& path) const override {
    int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0) throw_errno("cgroup", path, "reading");
    std::string text;
    char buf[4096];
    for (;;) {
      ssize_t n = ::read(fd, buf, sizeof buf);
      if (n < 0 && errno == EINTR) continue;
      if (n < 0) {
        int saved = errno;
        ::close(fd);
        errno = saved;
        throw_errno("cgroup", path, "reading");
      }
      if (n == 0) break;
      text.append(buf, static_cast<std::size_t>(n));
    }
    ::close(fd);
    return text;
  }

  void write(const std::string& path, const std::string& value) override {
    int fd = ::open(path.c_str(), O_WRONLY | O_CLOEXEC);
    if (fd < 0) throw_errno("cgroup", path, "writing '" + value + "'");
    ssize_t n;
    do n = ::write(fd, value.data(), value.size());
    while (n < 0 && errno == EINTR);
    int saved = errno;
    ::close(fd);
    if (n < 0) {
      errno = saved;
      throw_errno("cgroup", path, "writing '" + value + "'");
    }
    if (static_cast<std::size_t>(n) != value.size()) throw_error("cgroup", path, "short write of '" + value + "'");
  }

  bool exists(const std::string& path) const override {
    struct stat st;
    return ::stat(path.c_str(), &st) == 0;
  }

  int make_dir(const std::string& path) override { return ::mkdir(path.c_str(), 0755) == 0 ? 0 : errno; }
  int remove_dir(const std::string& path) override { return ::rmdir(path.c_str()) == 0 ? 0 : errno; }

  std::vector<std::string> list_dirs(const std::string& path) const override {
    std::vector<std::string> names;
    DIR* dir = ::opendir(path.c_str());
    if (dir == nullptr) {
      if (errno == ENOENT) return names;
      throw_errno("cgroup", path, "listing");
    }
    while (const dirent* entry = ::readdir(dir)) {
      std::string name = entry->d_name;
      if (name == "." || name == "..") continue;
      bool is_dir = entry->d_type == DT_DIR;
      if (entry->d_type == DT_UNKNOWN) {
        struct stat st;
        is_dir = ::stat(join_path(path, name).c_str(), &st) == 0 && S_ISDIR(st.st_mode);
      }
      if (is_dir) names.push_back(std::move(name));
    }
    ::closedir(dir);
    std::sort(names.begin(), names.end());
    return names;
  }

  void signal(pid_t pid, int signo) override { ::kill(pid, signo); }
};

// mountinfo escapes blanks and backslashes in paths as \ooo.
std::string unescape_mount_path(const std::string& field) {
  std::string out;
  for (std::size_t i = 0; i < field.size(); ++i) {
    if (field[i] == '\\' && i + 3 < field.size()) {
      const std::string digits = field.substr(i + 1, 3);
      if (std::all_of(digits.begin(), digits.end(), [](char c) { return c >= '0' && c <= '7'; })) {
        out += static_cast<char>(std::stoi(digits, nullptr, 8));
        i += 3;
        continue;
      }
    }
    out += field[i];
  }
  return out;
}

bool plain_name(const std::string& name) {
  if (name.empty() || name.size() > 255 || name[0] == '.') return false;
  return std::all_of(name.begin(), name.end(), [](char c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' || c == '-' ||
           c == '.';
  });
}

std::vector<std::string> split_on(const std::string& text, char sep) {
  std::vector<std::string> parts;
  std::string part;
  std::istringstream in(text);
  while (std::getline(in, part, sep)) parts.push_back(part);
  return parts;
}

void collect_pids(const CgroupFs& fs, const std::string& dir, std::set<pid_t>& pids) {
  const std::string procs = join_path(dir, "cgroup.procs");
  if (!fs.exists(procs)) return;  // removed meanwhile
  for (const std::string& word : split_words(fs.read(procs))) {
    pid_t pid = 0;
    auto [end, ec] = std::from_chars(word.data(), word.data() + word.size(), pid);
    if (ec != std::errc() || end != word.data() + word.size())
      throw_error("cgroup", procs, "unexpected entry '" + word + "'");
    pids.insert(pid);
  }
  for (const std::string& child : fs.list_dirs(dir)) collect_pids(fs, join_path(dir, child), pids);
}

}  // namespace

std::shared_ptr<CgroupFs> host_cgroup_fs() { return std::make_shared<HostCgroupFs>(); }

std::map<std::string, std::string> parse_v1_mounts(const std::string& mountinfo, const std::string& mount_root) {
  std::string root = mount_root;
  while (root.size() > 1 && root.back() == '/') root.pop_back();
  std::map<std::string, std::string> mounts;
  std::istringstream lines(mountinfo);
  std::string line;
  while (std::getline(lines, line)) {
    // "id parent major:minor root mount-point options [optional...] - fstype source super-options"
    const std::vector<std::string> fields = split_words(line);
    auto dash = std::find(fields.begin(), fields.end(), "-");
    if (fields.size() < 5 || dash == fields.end() || fields.end() - dash < 4 || dash[1] != "cgroup") continue;
    const std::string mount_point = unescape_mount_path(fields[4]);
    if (mount_point != root && mount_point.rfind(root == "/" ? root : root + "/", 0) != 0) continue;
    for (const std::string& option : split_on(dash[3], ',')) {
      if (option.empty() || option == "rw" || option == "ro" || option.find('=') != std::string::npos) continue;
      mounts.emplace(option, mount_point);
    }
  }
  return mounts;
}

std::string join_path(const std::string& dir, const std::string& name) {
  if (name.empty()) return dir;
  if (dir.empty()) return name;
  return dir.back() == '/' ? dir + name : dir + "/" + name;
}

std::vector<std::string> split_words(const std::string& text) {
  std::vector<std::string> words;
  std::istringstream in(text);
  std::string word;
  while (in >> word) words.push_back(word);
  return words;
}

bool contains(const std::vector<std::string>& words, const std::string& word) {
  return std::find(words.begin(), words.end(), word) != words.end();
}

std::optional<std::uint64_t> keyed_value(const std::string& text, const std::string& key) {
  std::istringstream lines(text);
  std::string line;
  while (std::getline(lines, line)) {
    const std::vector<std::string> words = split_words(line);
    if (words.size() != 2 || words[0] != key) continue;
    std::uint64_t value = 0;
    auto [end, ec] = std::from_chars(words[1].data(), words[1].data() + words[1].size(), value);
    if (ec == std::errc() && end == words[1].data() + words[1].size()) return value;
  }
  return std::nullopt;
}

std::uint64_t parse_number(const std::string& text, const std::string& path) {
  const std::vector<std::string> words = split_words(text);
  std::uint64_t value = 0;
  if (words.size() == 1) {
    auto [end, ec] = std::from_chars(words[0].data(), words[0].data() + words[0].size(), value);
    if (ec == std::errc() && end == words[0].data() + words[0].size()) return value;
  }
  throw_error("cgroup", path, "expected a number, read '" + text + "'");
}

void check_cgroup_name(const std::string& name, const std::string& what) {
  if (!plain_name(name))
    throw_error("cgroup", name, "invalid " + what + " name: use letters, digits, '_', '-', '.' (not first)");
}

void check_cgroup_parent(const std::string& parent) {
  if (parent.empty()) return;
  for (const std::string& part : split_path(parent)) check_cgroup_name(part, "cgroup parent");
}

void check_cgroup_limits(const CgroupLimits& limits) {
  if (!std::isfinite(limits.cpus) || limits.cpus < 0)
    throw_error("cgroup", "", "invalid cpu limit " + std::to_string(limits.cpus) + " (cores, 0 = unlimited)");
}

std::vector<std::string> split_path(const std::string& relative) { return split_on(relative, '/'); }

void ensure_dir(CgroupFs& fs, const std::string& dir) {
  if (int err = fs.make_dir(dir); err != 0 && err != EEXIST) {
    errno = err;
    throw_errno("cgroup", dir, "creating the cgroup parent");
  }
}

std::vector<pid_t> subtree_pids(const CgroupFs& fs, const std::string& dir) {
  std::set<pid_t> pids;
  collect_pids(fs, dir, pids);
  return {pids.begin(), pids.end()};
}

void wait_until_empty(CgroupFs& fs, const std::vector<std::string>& dirs, Clock::time_point deadline, bool resend) {
  for (int attempt = 0;; ++attempt) {
    std::set<pid_t> left;
    for (const std::string& dir : dirs) collect_pids(fs, dir, left);
    if (left.empty()) return;
    if (Clock::now() >= deadline) {
      std::string list;
      for (pid_t pid : left) {
        if (!list.empty()) list += ' ';
        list += std::to_string(pid);
      }
      throw_error("cgroup", dirs.front(),
                  std::to_string(left.size()) + " process(es) still running after SIGKILL: " + list);
    }
    if (resend)
      for (pid_t pid : left) fs.signal(pid, SIGKILL);
    poll_pause(attempt);
  }
}

void remove_tree(CgroupFs& fs, const std::string& dir, Clock::time_point deadline) {
  for (const std::string& child : fs.list_dirs(dir)) remove_tree(fs, join_path(dir, child), deadline);
  for (int attempt = 0;; ++attempt) {
    const int err = fs.remove_dir(dir);
    if (err == 0 || err == ENOENT) return;
    if (err != EBUSY || Clock::now() >= deadline) {
      errno = err;
      throw_errno("cgroup", dir, "removing the cgroup");
    }
    poll_pause(attempt);
  }
}

bool remove_if_empty(CgroupFs& fs, const std::vector<std::string>& dirs) {
  bool all_gone = true;
  for (const std::string& dir : dirs) {
    const int err = fs.remove_dir(dir);
    all_gone = all_gone && (err == 0 || err == ENOENT);
  }
  return all_gone;
}

void poll_pause(int attempt) {
  std::this_thread::sleep_for(std::chrono::milliseconds(std::min(1 + attempt, 20)));
}

}  // namespace capsule::sandbox
