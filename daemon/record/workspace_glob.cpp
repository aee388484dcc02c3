// The workspace glob walker (fnmatch(3) per path segment over directories opened by descriptor, no regex, no
// symlink followed) and the bounded reads of matched files, for the record's collectors.
#include "daemon/record/workspace_glob.h"

#include <dirent.h>
#include <fcntl.h>
#include <fnmatch.h>
#include <linux/openat2.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <set>

#include "base/unique_fd.h"

namespace capsule::daemon {

bool SearchBudget::spend(const std::string& rel) {
  if (exhausted) return false;
  if (visits_left == 0 || std::chrono::steady_clock::now() > deadline) {
    exhausted = true;
    note_problem((rel.empty() ? std::string(".") : rel) + ": search stopped here (" +
                 (visits_left == 0 ? "too many directory entries" : "out of time") + ")");
    return false;
  }
  --visits_left;
  return true;
}

void SearchBudget::note_problem(std::string problem) {
  if (problems.size() < max_problems) problems.push_back(std::move(problem));
  else ++problems_not_listed;
}

bool SearchBudget::take_found(const std::string& rel, std::size_t found_before) {
  if (exhausted) return false;
  if (found_before > max_found || rel.size() > found_bytes_left) {
    exhausted = true;
    note_problem(rel + ": search stopped here (" +
                 (found_before > max_found ? "more than " + std::to_string(max_found) + " files matched"
                                           : std::string("the matched paths are too long in all")) + ")");
    return false;
  }
  found_bytes_left -= rel.size();
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

// Walks by descriptor: every directory is opened relative to its parent's descriptor with O_NOFOLLOW and every
// entry fstatat'ed there (AT_SYMLINK_NOFOLLOW), so a sandbox racing a directory into a symlink cannot lead the
// walk outside the root, and path length does not matter. The depth is bounded, as are the descriptors held.
class GlobWalker {
 public:
  static constexpr std::size_t kMaxDepth = 128;  // directories below the root

  GlobWalker(std::set<std::string>& out, SearchBudget& budget) : out_(out), budget_(budget) {}

  // Matches segments[i..] against the directory open as `dir` at `rel` (relative to the root, "" for itself).
  void match(int dir, const std::string& rel, std::size_t depth, const std::vector<std::string>& segments,
             std::size_t i) {
    if (budget_.exhausted) return;
    const std::string& segment = segments[i];
    const bool last = i + 1 == segments.size();
    if (segment == "**") {
      match(dir, rel, depth, segments, i + 1);
      for (const auto& name : list(dir, rel)) {
        if (name.front() == '.') continue;
        const auto st = stat_quietly(dir, rel, name);
        if (st && S_ISDIR(st->st_mode)) descend(dir, rel, name, depth, segments, i);
      }
      return;
    }
    if (segment.find_first_of("*?[") == std::string::npos) {
      visit(dir, rel, segment, depth, segments, i, last);
      return;
    }
    for (const auto& name : list(dir, rel)) {
      if (::fnmatch(segment.c_str(), name.c_str(), FNM_PERIOD) == 0) visit(dir, rel, name, depth, segments, i, last);
    }
  }

 private:
  static std::string join(const std::string& rel, const std::string& name) {
    return rel.empty() ? name : rel + "/" + name;
  }
  static std::string shown(const std::string& rel) { return rel.empty() ? std::string(".") : rel; }

  // fstatat without following; nullopt when absent or unreadable (a problem is noted).
  std::optional<struct stat> stat_quietly(int dir, const std::string& rel, const std::string& name) {
    const std::string child = join(rel, name);
    if (!budget_.spend(child)) return std::nullopt;
    struct stat st {};
    if (::fstatat(dir, name.c_str(), &st, AT_SYMLINK_NOFOLLOW) == 0) return st;
    if (errno != ENOENT && errno != ENOTDIR) budget_.note_problem(child + ": fstatat: " + std::strerror(errno));
    return std::nullopt;
  }

  // Opens the directory `name` in `dir` (never through a symlink) and matches segments[i..] in it.
  void descend(int dir, const std::string& rel, const std::string& name, std::size_t depth,
               const std::vector<std::string>& segments, std::size_t i) {
    const std::string child = join(rel, name);
    if (depth + 1 > kMaxDepth) {
      budget_.note_problem(child + ": not searched: more than " + std::to_string(kMaxDepth) + " directories deep");
      return;
    }
    const base::UniqueFd child_fd(::openat(dir, name.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
    if (!child_fd) {
      if (errno != ENOENT) budget_.note_problem(child + ": open: " + std::strerror(errno));
      return;
    }
    match(child_fd.get(), child, depth + 1, segments, i);
  }

  // A name that matched segment i: a report if it was the last segment, else a directory to search on.
  void visit(int dir, const std::string& rel, const std::string& name, std::size_t depth,
             const std::vector<std::string>& segments, std::size_t i, bool last) {
    const auto st = stat_quietly(dir, rel, name);
    if (!st) return;
    const std::string child = join(rel, name);
    if (last && S_ISREG(st->st_mode) && !out_.contains(child) && budget_.take_found(child, out_.size())) {
      out_.insert(child);
    }
    if (!last && S_ISDIR(st->st_mode)) descend(dir, rel, name, depth, segments, i + 1);
  }

  // The names in `dir`, sorted (the same files are found first whatever the directory's order); every entry
  // costs a visit, so a directory of millions of entries is not listed whole.
  std::vector<std::string> list(int dir, const std::string& rel) {
    std::vector<std::string> names;
    const int fd = ::openat(dir, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);  // its own offset for readdir
    DIR* stream = fd < 0 ? nullptr : ::fdopendir(fd);
    if (stream == nullptr) {
      budget_.note_problem(shown(rel) + ": opendir: " + std::strerror(errno));
      if (fd >= 0) ::close(fd);
      return names;
    }
    while (const dirent* entry = ::readdir(stream)) {
      const std::string name = entry->d_name;
      if (name == "." || name == "..") continue;
      if (!budget_.spend(join(rel, name))) break;
      names.push_back(name);
    }
    ::closedir(stream);
    std::sort(names.begin(), names.end());
    return names;
  }

  std::set<std::string>& out_;
  SearchBudget& budget_;
};

}  // namespace

namespace {

// Checks the descriptor is a regular file and returns its size. Throws CollectError.
std::uint64_t regular_file_size(int fd, const std::string& path) {
  struct stat st {};
  if (::fstat(fd, &st) != 0) throw CollectError(path, std::string("fstat: ") + std::strerror(errno));
  if (!S_ISREG(st.st_mode)) throw CollectError(path, "not a regular file");
  return static_cast<std::uint64_t>(st.st_size);
}

std::string too_large(std::uint64_t size, std::uint64_t max_bytes) {
  return "report of " + std::to_string(size) + " bytes is larger than the " + std::to_string(max_bytes >> 20) +
         " MiB limit; not read";
}

// Up to `max_bytes` from the descriptor; the string's size is what was actually read.
std::string read_at_most(int fd, std::uint64_t max_bytes, const std::string& path) {
  std::string content(static_cast<std::size_t>(max_bytes), '\0');
  std::size_t got = 0;
  while (got < content.size()) {
    const ssize_t n = ::read(fd, content.data() + got, content.size() - got);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) throw CollectError(path, std::string("read: ") + std::strerror(errno));
    if (n == 0) break;
    got += static_cast<std::size_t>(n);
  }
  content.resize(got);
  return content;
}

// `rel` opened beneath the root's descriptor: no symlink on the way, no ".." out of it. Throws CollectError.
base::UniqueFd open_beneath(int root_fd, const std::string& rel) {
  open_how how {};
  how.flags = O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC | O_NOCTTY;
  how.resolve = RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS;
  base::UniqueFd fd(static_cast<int>(::syscall(SYS_openat2, root_fd, rel.c_str(), &how, sizeof how)));
  if (!fd) throw CollectError(rel, std::string("open: ") + std::strerror(errno));
  return fd;
}

}  // namespace

std::string read_bounded_file(const std::string& path, std::uint64_t max_bytes, bool prefix) {
  const base::UniqueFd fd(::open(path.c_str(), O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC | O_NOCTTY));
  if (!fd) throw CollectError(path, std::string("open: ") + std::strerror(errno));
  const std::uint64_t size = regular_file_size(fd.get(), path);
  if (size > max_bytes && !prefix) throw CollectError(path, too_large(size, max_bytes));
  return read_at_most(fd.get(), std::min(size, max_bytes), path);
}

std::string read_beneath(int root_fd, const std::string& rel, std::uint64_t max_bytes) {
  const base::UniqueFd fd = open_beneath(root_fd, rel);
  const std::uint64_t size = regular_file_size(fd.get(), rel);
  if (size > max_bytes) throw CollectError(rel, too_large(size, max_bytes));
  return read_at_most(fd.get(), size, rel);
}

void cut_utf8(std::string& text, std::size_t max_bytes) {
  if (text.size() <= max_bytes) return;
  std::size_t cut = max_bytes;
  while (cut > 0 && (static_cast<unsigned char>(text[cut]) & 0xC0) == 0x80) --cut;
  text.resize(cut);
}

std::string quote_excerpt(std::string_view text, std::size_t max_bytes) {
  std::string kept(text.substr(0, max_bytes + 1));  // one byte more, to find the boundary
  cut_utf8(kept, max_bytes);
  std::string out;
  for (const char c : kept) {
    const auto byte = static_cast<unsigned char>(c);
    if (byte < 0x20 || byte == 0x7F || c == '"' || c == '\\') {
      static constexpr char kHex[] = "0123456789abcdef";
      out += "\\x";
      out += kHex[byte >> 4];
      out += kHex[byte & 0xF];
    } else {
      out += c;
    }
  }
  if (kept.size() < text.size()) out += "...";
  return out;
}

CollectOutcome collect_files(const std::string& root, const std::vector<std::string>& globs,
                             const CollectLimits& limits, const std::function<void(std::string)>& note,
                             const std::function<void(const std::string& rel, std::string& content)>& use) {
  SearchBudget budget;
  budget.deadline = limits.deadline;
  budget.visits_left = limits.max_visited;
  budget.max_found = limits.max_files;  // one more is found, to say the rest were not read
  budget.max_problems = limits.max_listed;
  const std::vector<std::string> found = glob_within(root, globs, budget);
  for (auto& problem : budget.problems) note(std::move(problem));
  if (budget.problems_not_listed > 0) {
    note("...: " + std::to_string(budget.problems_not_listed) + " more search problems not listed");
  }
  CollectOutcome outcome;
  outcome.truncated = budget.exhausted;
  const base::UniqueFd root_fd(::open(root.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
  if (!root_fd) throw CollectError(root, std::string("open: ") + std::strerror(errno));

  std::size_t opened = 0;
  std::uint64_t bytes = 0;
  for (const std::string& rel : found) {
    std::string limit;
    if (opened >= limits.max_files) {
      limit = "more than " + std::to_string(limits.max_files) + " " + limits.what;
    } else if (std::chrono::steady_clock::now() > limits.deadline) {
      limit = "out of time";
    }
    try {
      if (limit.empty()) {
        ++opened;
        const base::UniqueFd fd = open_beneath(root_fd.get(), rel);
        std::uint64_t size = regular_file_size(fd.get(), rel);
        if (size > limits.max_file_bytes && !limits.prefix) {
          throw CollectError(rel, too_large(size, limits.max_file_bytes));
        }
        size = std::min(size, limits.max_file_bytes);
        if (bytes + size > limits.max_total_bytes) {
          limit = "the " + limits.what + " would pass " + std::to_string(limits.max_total_bytes >> 20) + " MiB in all";
        } else {
          std::string content = read_at_most(fd.get(), size, rel);
          bytes += content.size();  // charged whether or not it parses
          use(rel, content);
        }
      }
    } catch (const CollectError& e) {
      ++outcome.files_not_read;
      note(rel + ": " + e.cause().detail);
    }
    if (!limit.empty()) {
      outcome.truncated = true;
      ++outcome.files_not_read;
      note(rel + ": not read: " + limit);
    }
  }
  return outcome;
}

std::vector<std::string> glob_within(const std::string& root, const std::vector<std::string>& globs,
                                     SearchBudget& budget) {
  const auto st = lstat_if_exists(root);
  if (!st || !S_ISDIR(st->st_mode)) throw CollectError(root, "the root to search is not a directory");
  std::vector<std::vector<std::string>> split;
  for (const auto& glob : globs) split.push_back(split_glob(glob));  // every glob checked before any search
  const base::UniqueFd root_fd(::open(root.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
  if (!root_fd) throw CollectError(root, std::string("open: ") + std::strerror(errno));
  std::set<std::string> found;
  GlobWalker walker(found, budget);
  for (const auto& segments : split) walker.match(root_fd.get(), "", 0, segments, 0);
  return {found.begin(), found.end()};
}

std::vector<std::string> glob_files(const std::string& root, const std::vector<std::string>& globs) {
  SearchBudget unlimited;
  return glob_within(root, globs, unlimited);
}

}  // namespace capsule::daemon
