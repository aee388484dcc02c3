// The stat key of a tree (GNU find -printf as the caller, hashed as it streams, its times checked for a racy
// change) and reuse.json, the bounded index from (caller, directory) to the snapshot its unchanged tree gave.
#include "daemon/snapshots/snapshot_reuse.h"

#include <time.h>

#include <algorithm>
#include <charconv>
#include <nlohmann/json.hpp>

#include <spdlog/spdlog.h>

#include "base/file_util.h"
#include "daemon/snapshots/caller_tool.h"
#include "http/response.h"
#include "store/digest.h"

namespace capsule::daemon {
namespace fs = std::filesystem;
using nlohmann::json;

namespace {

constexpr const char* kReuseStep = "snapshot reuse";
constexpr const char* kFind = "/usr/bin/find";
// One record per entry, NUL-terminated (the path last: it may hold spaces and newlines). %T@ and %C@ are seconds
// with a nanosecond fraction.
constexpr const char* kStatFormat = "%y %m %n %U %G %s %T@ %C@ %i %D %P\\0";
constexpr std::size_t kTimeFields[] = {6, 7};  // %T@ and %C@ among the space-separated fields
constexpr std::size_t kFieldsBeforePath = 10;
constexpr std::size_t kRecordOverhead = 256;   // the fields before the path, at most
constexpr std::size_t kFileFraming = 32;       // {"entries":[...]} and the newline around the entries

std::int64_t wall_seconds() {
  struct timespec now {};
  clock_gettime(CLOCK_REALTIME, &now);
  return now.tv_sec;
}

// Reads find's output as it streams: hashes every byte, counts the records and keeps the newest mtime or ctime.
class StatStream {
 public:
  explicit StatStream(std::size_t max_record) : max_record_(max_record) {}

  void feed(const char* data, std::size_t size) {
    hasher_.update(data, size);
    for (std::size_t i = 0; i < size; ++i) {
      if (data[i] != '\0') {
        if (record_.size() < max_record_) {
          record_.push_back(data[i]);
        } else {
          malformed_ = true;
        }
        continue;
      }
      parse_record();
      record_.clear();
    }
  }

  std::uint64_t entries() const { return entries_; }
  std::int64_t newest() const { return newest_; }
  bool complete() const { return !malformed_ && record_.empty() && entries_ > 0; }
  std::string key() { return hasher_.finish().str(); }

 private:
  void parse_record() {
    ++entries_;
    std::size_t field = 0, start = 0;
    for (std::size_t i = 0; i <= record_.size() && field < kFieldsBeforePath; ++i) {
      if (i < record_.size() && record_[i] != ' ') continue;
      if (std::find(std::begin(kTimeFields), std::end(kTimeFields), field) != std::end(kTimeFields)) {
        std::int64_t seconds = 0;
        const char* first = record_.data() + start;
        const auto [end, error] = std::from_chars(first, record_.data() + i, seconds);
        if (error != std::errc() || (end != record_.data() + i && *end != '.')) malformed_ = true;
        newest_ = std::max(newest_, seconds);
      }
      ++field;
      start = i + 1;
    }
    if (field < kFieldsBeforePath) malformed_ = true;
  }

  std::size_t max_record_;
  store::Sha256 hasher_;
  std::string record_;
  std::uint64_t entries_ = 0;
  std::int64_t newest_ = 0;
  bool malformed_ = false;
};

}  // namespace

ReuseKey ReuseKey::of(const Caller& caller, const std::string& dir) {
  std::vector<gid_t> groups = caller.groups;
  std::sort(groups.begin(), groups.end());
  std::string who = std::to_string(caller.uid) + ":" + std::to_string(caller.gid) + ":";
  for (std::size_t i = 0; i < groups.size(); ++i) {
    if (i > 0) who += ',';
    who += std::to_string(groups[i]);
  }
  return {who, dir};
}

bool TreeStat::settled() const { return newest < read_at - kRacySeconds; }

std::optional<TreeStat> read_tree_stat(const Caller& caller, const OpenedHostPath& dir, const SnapshotLimits& limits) {
  TreeStat stat;
  stat.read_at = wall_seconds();
  StatStream stream(limits.max_path + kRecordOverhead);
  CallerTool find{{kFind, ".", "-printf", kStatFormat},
                  {"PATH=/usr/bin:/bin", "LC_ALL=C"},
                  dir.fd.get(),
                  -1,
                  limits.max_tar_bytes(),
                  "max_bytes (" + std::to_string(limits.max_bytes) + ")"};
  find.stdout_sink = [&stream](const char* data, std::size_t size) { stream.feed(data, size); };
  try {
    const ToolOutcome outcome = run_tool_as(caller, find);
    if (outcome.exit_code != 0) {
      spdlog::debug("snapshots: no stat key for '{}': find exited {}: {}", dir.path, outcome.exit_code, outcome.stderr_tail);
      return std::nullopt;
    }
  } catch (const http::ApiError& e) {  // too large, or find could not run: the snapshot itself says what it meets
    spdlog::debug("snapshots: no stat key for '{}': {}", dir.path, e.what());
    return std::nullopt;
  }
  if (!stream.complete() || stream.entries() > limits.max_files + 1) return std::nullopt;  // + 1: "." itself
  stat.entries = stream.entries();
  stat.newest = stream.newest();
  stat.key = stream.key();
  return stat;
}

std::optional<std::string> tree_stat_key(const Caller& caller, const OpenedHostPath& dir, const SnapshotLimits& limits) {
  const std::optional<TreeStat> stat = read_tree_stat(caller, dir, limits);
  if (!stat || !stat->settled()) return std::nullopt;
  return stat->key;
}

SnapshotReuseIndex::SnapshotReuseIndex(fs::path file, std::size_t max_entries, std::size_t max_bytes)
    : file_(std::move(file)), max_entries_(max_entries), max_bytes_(max_bytes) {
  load();
}

json SnapshotReuseIndex::entry_json(const ReuseKey& key, const Entry& entry) {
  return {{"caller", key.caller}, {"dir", key.dir}, {"tree", entry.tree}, {"digest", entry.digest}, {"used", entry.used}};
}

// Its bytes in reuse.json (a comma included), so that the file stays within kMaxBytes whatever the paths escape to.
std::size_t SnapshotReuseIndex::bytes_of(const ReuseKey& key, const Entry& entry) {
  return entry_json(key, entry).dump(-1, ' ', false, json::error_handler_t::replace).size() + 1;
}

void SnapshotReuseIndex::load() {
  std::error_code ec;
  if (!fs::exists(file_, ec)) return;
  try {
    base::UniqueFd fd = base::open_regular_file(file_, kReuseStep);
    const json doc = json::parse(base::read_fd(fd.get(), max_bytes_, kReuseStep, file_.string()));
    for (const json& item : doc.at("entries")) {
      const ReuseKey key{item.at("caller").get<std::string>(), item.at("dir").get<std::string>()};
      const Entry entry{item.at("tree").get<std::string>(), item.at("digest").get<std::string>(),
                        item.at("used").get<std::uint64_t>()};
      clock_ = std::max(clock_, entry.used);
      bytes_ += bytes_of(key, entry);
      entries_[key] = entry;
    }
    evict();
  } catch (const std::exception& e) {
    spdlog::warn("snapshots: starting {} afresh: {}", file_.string(), e.what());
    entries_.clear();
    bytes_ = 0;
  }
}

void SnapshotReuseIndex::save() const {
  json list = json::array();
  for (const auto& [key, entry] : entries_) list.push_back(entry_json(key, entry));
  try {
    base::write_file_atomic(file_, json{{"entries", list}}.dump(-1, ' ', false, json::error_handler_t::replace) + "\n",
                            kReuseStep, 0600);
  } catch (const std::exception& e) {  // a hint lost: the next snapshot of that tree is made again
    spdlog::warn("snapshots: writing {}: {}", file_.string(), e.what());
  }
}

void SnapshotReuseIndex::evict() {
  while (!entries_.empty() && (entries_.size() > max_entries_ || bytes_ + kFileFraming > max_bytes_)) {
    auto oldest = std::min_element(entries_.begin(), entries_.end(),
                                   [](const auto& a, const auto& b) { return a.second.used < b.second.used; });
    bytes_ -= bytes_of(oldest->first, oldest->second);
    entries_.erase(oldest);
  }
}

std::optional<std::string> SnapshotReuseIndex::find(const ReuseKey& key, const std::string& tree) {
  std::lock_guard lock(mutex_);
  const auto it = entries_.find(key);
  if (it == entries_.end() || it->second.tree != tree) return std::nullopt;
  it->second.used = ++clock_;  // saved with the next change: an order lost in a crash costs an eviction's choice only
  return it->second.digest;
}

void SnapshotReuseIndex::remember(const ReuseKey& key, const std::string& tree, const std::string& digest) {
  std::lock_guard lock(mutex_);
  if (const auto it = entries_.find(key); it != entries_.end()) {
    bytes_ -= bytes_of(it->first, it->second);
    entries_.erase(it);
  }
  const Entry entry{tree, digest, ++clock_};
  bytes_ += bytes_of(key, entry);
  entries_[key] = entry;
  evict();
  save();
}

void SnapshotReuseIndex::forget(const ReuseKey& key) {
  std::lock_guard lock(mutex_);
  const auto it = entries_.find(key);
  if (it == entries_.end()) return;
  bytes_ -= bytes_of(it->first, it->second);
  entries_.erase(it);
  save();
}

std::size_t SnapshotReuseIndex::size() const {
  std::lock_guard lock(mutex_);
  return entries_.size();
}

}  // namespace capsule::daemon
