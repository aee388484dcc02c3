// The workspace glob walker (fnmatch(3) per path segment over lstat'ed directories, no regex, no symlink
// following) and the bounded read of one file, for the record's collectors.
#include "daemon/record/workspace_glob.h"

#include <dirent.h>
#include <fcntl.h>
#include <fnmatch.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <set>

namespace capsule::daemon {

bool SearchBudget::spend(const std::string& rel) {
  if (exhausted) return false;
  if (visits_left == 0 || std::chrono::steady_clock::now() > deadline) {
    exhausted = true;
    problems.push_back((rel.empty() ? std::string(".") : rel) + ": search stopped here (" +
                       (visits_left == 0 ? "too many directory entries" : "out of time") + ")");
    return false;
  }
  --visits_left;
  return true;
}

std::optional<struct stat> lstat_if_exists(const std::string& path) {
  struct stat st {};
  if (::lstat(path.c_str(), &st) == 0) return st;
  if (errno == ENOENT || errno == ENOTDIR) return std::nullopt;
  throw CollectError(path, std::string("lstat: ") + std::strerror(errno));
}

namespace {

std::vector<std::string> split_glob(const std::string& glob) {
  if (glob.empty() || glob.front() == '/') throw CollectError(glob, "a glob must be a non-empty relative path");
  std::vector<std::string> segments;
  std::size_t start = 0;
  while (start <= glob.size()) {
    const std::size_t slash = std::min(glob.find('/', start), glob.size());
    const std::string segment = glob.substr(start, slash - start);
    if (segment == "..") throw CollectError(glob, "a glob must stay inside the workspace (no '..')");
    const bool repeated_any_depth = segment == "**" && !segments.empty() && segments.back() == "**";
    if (!segment.empty() && segment != "." && !repeated_any_depth) segments.push_back(segment);
    start = slash + 1;
  }
  if (segments.empty()) throw CollectError(glob, "a glob must name files");
  if (segments.back() == "**") segments.push_back("*");  // "dir/**": every file below dir
  return segments;
}

class GlobWalker {
 public:
  GlobWalker(const std::string& root, std::set<std::string>& out, SearchBudget& budget)
      : root_(root), out_(out), budget_(budget) {}

  // Matches segments[i..] against the directory `rel` (relative to the root, "" for the root itself).
  void match(const std::string& rel, const std::vector<std::string>& segments, std::size_t i) {
    if (budget_.exhausted) return;
    const std::string& segment = segments[i];
    const bool last = i + 1 == segments.size();
    if (segment == "**") {
      match(rel, segments, i + 1);
      for (const auto& name : list(rel)) {
        if (name.front() == '.') continue;
        const std::string child = join(rel, name);
        const auto st = lstat_quietly(child);
        if (st && S_ISDIR(st->st_mode)) match(child, segments, i);
      }
      return;
    }
    if (segment.find_first_of("*?[") == std::string::npos) {
      visit(join(rel, segment), segments, i, last);
      return;
    }
    for (const auto& name : list(rel)) {
      if (::fnmatch(segment.c_str(), name.c_str(), FNM_PERIOD) == 0) visit(join(rel, name), segments, i, last);
    }
  }

 private:
  static std::string join(const std::string& rel, const std::string& name) {
    return rel.empty() ? name : rel + "/" + name;
  }
  std::string absolute(const std::string& rel) const { return rel.empty() ? root_ : root_ + "/" + rel; }

  // lstat; nullopt when absent or unreadable (a problem is noted: e.g. a path past PATH_MAX).
  std::optional<struct stat> lstat_quietly(const std::string& rel) {
    if (!budget_.spend(rel)) return std::nullopt;
    try {
      return lstat_if_exists(absolute(rel));
    } catch (const CollectError& e) {
      budget_.problems.push_back(rel + ": " + e.cause().detail);
      return std::nullopt;
    }
  }

  // A path that matched segment i: a report if it was the last segment, else a directory to search on.
  void visit(const std::string& rel, const std::vector<std::string>& segments, std::size_t i, bool last) {
    const auto st = lstat_quietly(rel);
    if (!st) return;
    if (last && S_ISREG(st->st_mode)) out_.insert(rel);
    if (!last && S_ISDIR(st->st_mode)) match(rel, segments, i + 1);
  }

  std::vector<std::string> list(const std::string& rel) {
    const std::string path = absolute(rel);
    std::vector<std::string> names;
    DIR* dir = ::opendir(path.c_str());
    if (dir == nullptr) {
      if (errno != ENOENT && errno != ENOTDIR) {
        budget_.problems.push_back((rel.empty() ? std::string(".") : rel) + ": opendir: " + std::strerror(errno));
      }
      return names;
    }
    while (const dirent* entry = ::readdir(dir)) {
      const std::string name = entry->d_name;
      if (name != "." && name != "..") names.push_back(name);
    }
    ::closedir(dir);
    return names;
  }

  const std::string& root_;
  std::set<std::string>& out_;
  SearchBudget& budget_;
};

}  // namespace

std::string read_bounded_file(const std::string& path, std::uint64_t max_bytes) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC | O_NOCTTY);
  if (fd < 0) throw CollectError(path, std::string("open: ") + std::strerror(errno));
  struct stat st {};
  if (::fstat(fd, &st) != 0) {
    const int error = errno;
    ::close(fd);
    throw CollectError(path, std::string("fstat: ") + std::strerror(error));
  }
  if (!S_ISREG(st.st_mode)) {
    ::close(fd);
    throw CollectError(path, "not a regular file");
  }
  if (static_cast<std::uint64_t>(st.st_size) > max_bytes) {
    ::close(fd);
    throw CollectError(path, "report of " + std::to_string(st.st_size) + " bytes is larger than the " +
                               std::to_string(max_bytes >> 20) + " MiB limit; not read");
  }
  std::string content(static_cast<std::size_t>(st.st_size), '\0');
  std::size_t got = 0;
  while (got < content.size()) {
    const ssize_t n = ::read(fd, content.data() + got, content.size() - got);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      const int error = errno;
      ::close(fd);
      throw CollectError(path, std::string("read: ") + std::strerror(error));
    }
    if (n == 0) break;
    got += static_cast<std::size_t>(n);
  }
  ::close(fd);
  content.resize(got);
  return content;
}

std::vector<std::string> glob_within(const std::string& root, const std::vector<std::string>& globs,
                                     SearchBudget& budget) {
  const auto st = lstat_if_exists(root);
  if (!st || !S_ISDIR(st->st_mode)) throw CollectError(root, "the root to search is not a directory");
  std::vector<std::vector<std::string>> split;
  for (const auto& glob : globs) split.push_back(split_glob(glob));  // every glob checked before any search
  std::set<std::string> found;
  GlobWalker walker(root, found, budget);
  for (const auto& segments : split) walker.match("", segments, 0);
  return {found.begin(), found.end()};
}

std::vector<std::string> glob_files(const std::string& root, const std::vector<std::string>& globs) {
  SearchBudget unlimited;
  return glob_within(root, globs, unlimited);
}

}  // namespace capsule::daemon
