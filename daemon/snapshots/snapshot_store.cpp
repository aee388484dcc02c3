// The snapshot store on disk: snapshots/{blobs,tmp} (store/blob_store.h), trees/<hex>, meta/<hex>.json, staging/
// and reuse.json. A snapshot exists once its metadata does: it is written last, and removed first.
#include "daemon/snapshots/snapshot_store.h"

#include <sys/stat.h>

#include <algorithm>
#include <chrono>

#include <spdlog/spdlog.h>

#include "base/dates.h"
#include "base/error.h"
#include "base/file_util.h"
#include "http/response.h"
#include "images/layer_unpack.h"
#include "images/tar_pack.h"

namespace capsule::daemon {
namespace fs = std::filesystem;
using nlohmann::json;

namespace {

constexpr const char* kSnapshotStep = "snapshot";
constexpr std::uint64_t kMaxMetaBytes = 1 << 20;
constexpr const char* kUnknownBoot = "unknown";

void remove_quietly(const fs::path& path) {
  std::error_code ignored;
  fs::remove_all(path, ignored);
}

constexpr base::Micros kLastUseGranularity = 3600 * base::kMicrosPerSecond;
constexpr std::int64_t kMinMtime = 1;               // 1970-01-01T00:00:01Z: never 0, which Maven reads as "missing"
constexpr std::int64_t kMaxMtime = 253402300799;    // 9999-12-31T23:59:59Z

base::Micros now_micros() {
  using namespace std::chrono;
  return duration_cast<microseconds>(system_clock::now().time_since_epoch()).count();
}

std::string now_rfc3339() {
  const base::Micros micros = now_micros();
  return base::format_rfc3339(micros - micros % base::kMicrosPerSecond);
}

SnapshotInfo info_from_json(const json& j) {
  SnapshotInfo info;
  info.digest = j.at("digest").get<std::string>();
  info.size = j.at("size").get<std::uint64_t>();
  info.files = j.at("files").get<std::uint64_t>();
  info.created = j.at("created").get<std::string>();
  info.source = j.at("source");
  info.owners = j.at("owners").get<std::vector<uid_t>>();
  // Metadata from before snapshots had an mtime: their creation time, which a later create keeps too.
  const std::optional<std::int64_t> mtime = parse_snapshot_mtime(j.value("mtime", json()));
  const std::optional<base::Micros> created = base::parse_instant(info.created, false);
  info.mtime = mtime ? *mtime : std::clamp<std::int64_t>(created.value_or(0) / base::kMicrosPerSecond, kMinMtime, kMaxMtime);
  info.tree_mtime = parse_snapshot_mtime(j.value("tree_mtime", json())).value_or(0);
  info.tree_boot = j.value("tree_boot", "");
  info.last_used = j.value("last_used", "");  // empty: from before uses were dated (date_undated_uses)
  return info;
}

// This boot's id: a tree unpacked under another may have lost unsynced writes in a crash of the machine.
const std::string& boot_id() {
  static const std::string id = [] {
    std::string text;
    try {
      base::UniqueFd fd = base::open_regular_file("/proc/sys/kernel/random/boot_id", kSnapshotStep);
      text = base::read_fd(fd.get(), 64, kSnapshotStep, "boot_id");
    } catch (const std::exception&) {
      return std::string(kUnknownBoot);  // trees are synced when written instead
    }
    while (!text.empty() && text.back() == '\n') text.pop_back();
    return text;
  }();
  return id;
}

// The images' unpacker, with the snapshot limits: a tree as the tar says, nothing outside it.
images::UnpackLimits unpack_limits(const SnapshotLimits& limits) {
  images::UnpackLimits out;
  out.max_file_bytes = limits.max_bytes;
  out.max_total_bytes = limits.max_tar_bytes();
  out.max_entries = limits.max_files;
  return out;
}

}  // namespace

json SnapshotGcReport::to_json() const {
  json list = json::array();
  for (const SnapshotInfo& info : removed) list.push_back(info.to_json());
  return {{"removed", list}, {"released", released}, {"bytes_freed", bytes_freed}, {"in_use", in_use}};
}

json SnapshotInfo::to_json() const {
  return {{"digest", digest}, {"size", size}, {"files", files}, {"created", created}, {"mtime", snapshot_mtime_json(mtime)},
          {"source", source}, {"creator", owners.empty() ? json(nullptr) : json(owners.front())}};
}

json snapshot_mtime_json(std::int64_t seconds) { return base::format_rfc3339(seconds * base::kMicrosPerSecond); }

std::optional<std::int64_t> parse_snapshot_mtime(const json& value) {
  if (!value.is_string()) return std::nullopt;
  const std::optional<base::Micros> at = base::parse_instant(value.get<std::string>(), false);
  if (!at || *at % base::kMicrosPerSecond != 0) return std::nullopt;
  const std::int64_t seconds = *at / base::kMicrosPerSecond;
  if (seconds < kMinMtime || seconds > kMaxMtime) return std::nullopt;
  return seconds;
}

SnapshotLease::~SnapshotLease() { store_->release(digest_); }

std::string checked_snapshot_digest(const std::string& text, const std::string& field) {
  if (!store::Digest::try_parse(text)) {
    throw http::ApiError("snapshot_not_found", field + ": '" + text + "' is not a snapshot digest (sha256:<64 hex>)");
  }
  return text;
}

SnapshotStore::SnapshotStore(fs::path root, SnapshotLimits limits, StorageWatermark storage)
    : root_((base::make_dir(root, 0700, kSnapshotStep), root)),
      limits_(limits),
      storage_(storage),
      blobs_(root_),
      reuse_(root_ / "reuse.json") {
  for (const char* sub : {"trees", "meta", "staging"}) base::make_dir(root_ / sub, 0700, kSnapshotStep);
  remove_leftovers();
  date_undated_uses();
}

// Snapshots stored before their uses were dated count as used now: an upgrade must not collect, on its first
// start, a snapshot that was in use the day before.
void SnapshotStore::date_undated_uses() {
  std::size_t dated = 0;
  for (SnapshotInfo& info : list()) {
    if (!info.last_used.empty()) continue;
    info.last_used = now_rfc3339();
    write_meta(info);
    ++dated;
  }
  if (dated > 0) spdlog::info("snapshots: {} snapshot(s) without a last use are dated now, for the GC", dated);
}

void SnapshotStore::remove_leftovers() {
  for (const auto& entry : fs::directory_iterator(root_ / "staging")) remove_quietly(entry.path());
  for (const auto& entry : fs::directory_iterator(root_ / "trees")) {
    const std::string name = entry.path().filename().string();
    if (name.front() == '.' || !fs::exists(meta_path(name))) remove_quietly(entry.path());
  }
  for (const store::Digest& digest : blobs_.list()) {
    if (!fs::exists(meta_path(digest.hex()))) blobs_.remove(digest);
  }
}

fs::path SnapshotStore::meta_path(const std::string& hex) const { return root_ / "meta" / (hex + ".json"); }
fs::path SnapshotStore::tree_path(const std::string& hex) const { return root_ / "trees" / hex; }

fs::path SnapshotStore::make_staging() const { return base::make_temp_dir(root_ / "staging", "create-", kSnapshotStep); }

void SnapshotStore::write_meta(const SnapshotInfo& info) const {
  json j = info.to_json();
  j.erase("creator");
  j["owners"] = info.owners;
  j["tree_boot"] = info.tree_boot;
  j["tree_mtime"] = info.tree_mtime > 0 ? snapshot_mtime_json(info.tree_mtime) : json(nullptr);
  j["last_used"] = info.last_used;
  base::write_file_atomic(meta_path(store::Digest::parse(info.digest).hex()), j.dump(2) + "\n", kSnapshotStep, 0600);
}

SnapshotInfo SnapshotStore::create(const fs::path& source_tar, const json& source, uid_t owner,
                                   std::optional<std::int64_t> mtime) {
  check_source_tar(source_tar, limits_);
  const base::ScopedDir scoped(make_staging());
  const fs::path& staging = scoped.path;
  try {
    // Unpacked as the tar says (owners, mtimes, hard links inside the tree), then packed in canonical form.
    images::UnpackLimits scratch = unpack_limits(limits_);
    scratch.sync = false;  // thrown away once packed: nothing to make durable
    images::unpack_layer(source_tar, staging / "tree", scratch);
    store::BlobWriter writer = blobs_.writer();
    images::PackOptions options;
    options.gzip = false;
    options.zero_owners = true;
    options.xattrs = false;
    const images::PackResult packed =
        images::pack_directory(staging / "tree", [&writer](const void* data, std::size_t size) { writer.write(data, size); },
                               options);
    const std::string digest = packed.diff_id.str();
    {
      std::unique_lock lock(mutex_);
      busy_changed_.wait(lock, [&] { return busy_.count(digest) == 0; });
      if (std::optional<SnapshotInfo> existing = find(digest)) {
        if (std::find(existing->owners.begin(), existing->owners.end(), owner) == existing->owners.end()) {
          existing->owners.push_back(owner);
        }
        existing->last_used = now_rfc3339();  // made again: in use, whatever its age
        write_meta(*existing);
        // What this caller made: another's source (its paths) and identity stay theirs.
        existing->source = source;
        existing->owners = {owner};
        return *existing;
      }
      busy_.insert(digest);
    }
    // The blob and the tree are written outside the lock (leases and releases go on meanwhile); `busy_` keeps
    // other creates and removes of this digest waiting until the metadata says whether it exists.
    struct Unbusy {
      SnapshotStore* store;
      std::string digest;
      ~Unbusy() {
        std::lock_guard lock(store->mutex_);
        store->busy_.erase(digest);
        store->busy_changed_.notify_all();
      }
    } unbusy{this, digest};
    try {
      if (writer.commit() != packed.diff_id) base::throw_error(kSnapshotStep, digest, "the stored tar hashes differently");
      const std::int64_t files_mtime =
          std::clamp<std::int64_t>(mtime.value_or(now_micros() / base::kMicrosPerSecond), kMinMtime, kMaxMtime);
      unpack_tree(packed.diff_id, files_mtime);
      const std::string now = now_rfc3339();
      SnapshotInfo info{digest, packed.tar_bytes, packed.entries, now, source, {owner}, files_mtime, files_mtime,
                        boot_id(), now};
      std::lock_guard lock(mutex_);
      write_meta(info);
      return info;
    } catch (...) {
      remove_quietly(tree_path(packed.diff_id.hex()));
      blobs_.remove(packed.diff_id);
      throw;
    }
  } catch (const http::ApiError&) {
    throw;
  } catch (const base::Error& e) {
    // A full state filesystem (unpacking, packing or storing) is 507 at whichever step it met; the unpacker
    // refusing an entry (a hard link or a write leaving the tree) is the source's fault.
    const bool full = base::is_out_of_space(e.cause().errno_value);
    const bool refused_entry = !full && e.cause().step == "unpack";
    throw http::ApiError(full ? "insufficient_storage" : refused_entry ? "invalid_archive" : "internal_error",
                         std::string("snapshot: ") + e.what());
  }
}

std::optional<SnapshotInfo> SnapshotStore::find(const std::string& digest) const {
  const std::optional<store::Digest> parsed = store::Digest::try_parse(digest);
  if (!parsed) return std::nullopt;
  const fs::path meta = meta_path(parsed->hex());
  std::error_code ec;
  if (!fs::exists(meta, ec)) return std::nullopt;
  try {
    base::UniqueFd fd = base::open_regular_file(meta, kSnapshotStep);
    return info_from_json(json::parse(base::read_fd(fd.get(), kMaxMetaBytes, kSnapshotStep, meta.string())));
  } catch (const std::exception& e) {
    throw http::ApiError("internal_error", "snapshot " + digest + ": unreadable metadata (" + e.what() + ")");
  }
}

std::vector<SnapshotInfo> SnapshotStore::list() const {
  std::vector<SnapshotInfo> out;
  for (const auto& entry : fs::directory_iterator(root_ / "meta")) {
    const std::string name = entry.path().filename().string();
    if (name.size() != 64 + 5 || entry.path().extension() != ".json") continue;
    try {
      if (auto info = find("sha256:" + name.substr(0, 64))) out.push_back(std::move(*info));
    } catch (const std::exception& e) {
      // Removed since the directory was read (a concurrent DELETE or gc), or unreadable: not one to list.
      std::error_code ec;
      if (fs::exists(entry.path(), ec)) spdlog::warn("snapshots: skipping {}: {}", name, e.what());
    }
  }
  std::sort(out.begin(), out.end(), [](const SnapshotInfo& a, const SnapshotInfo& b) {
    return a.created != b.created ? a.created < b.created : a.digest < b.digest;
  });
  return out;
}

fs::path SnapshotStore::tar_path(const std::string& digest) const { return blobs_.path(store::Digest::parse(digest)); }

// The overlay lower is the canonical tar itself unpacked: root-owned, exactly what the digest names, every entry
// dated the snapshot's mtime (not the tar's 0: Maven copies a resource only when it is newer than its target, and a
// missing target reads as 0 too). Not synced (a syncfs here cost seconds on a busy ext4): the tree's meta names
// this boot, and lease() unpacks a tree of an earlier boot again.
void SnapshotStore::unpack_tree(const store::Digest& digest, std::int64_t mtime) const {
  const fs::path tree = tree_path(digest.hex());
  remove_quietly(tree);
  images::UnpackLimits limits = unpack_limits(limits_);
  limits.sync = boot_id() == kUnknownBoot;  // without a boot id a reboot cannot be told: made durable now
  limits.mtime = mtime;
  images::unpack_layer(blobs_.path(digest), tree, limits);
}

std::optional<SnapshotInfo> SnapshotStore::reclaim(const std::string& digest, const json& source, uid_t owner) {
  std::unique_lock lock(mutex_);
  busy_changed_.wait(lock, [&] { return busy_.count(digest) == 0; });
  std::optional<SnapshotInfo> existing = find(digest);
  if (!existing || std::find(existing->owners.begin(), existing->owners.end(), owner) == existing->owners.end()) {
    return std::nullopt;
  }
  existing->last_used = now_rfc3339();  // found again: in use, as a create of it would be
  write_meta(*existing);
  existing->source = source;
  existing->owners = {owner};
  return existing;
}

std::shared_ptr<const SnapshotLease> SnapshotStore::lease(const std::string& digest) {
  std::lock_guard lock(mutex_);
  std::optional<SnapshotInfo> info = find(digest);
  if (!info) throw http::ApiError("snapshot_not_found", "no snapshot " + digest);
  // Unpacked again after a reboot, and when the tree predates snapshot mtimes (unless a live run or session of
  // this capsuled has it mounted: those keep the tree they have, and the next lease without them unpacks it).
  const bool stale_mtime = info->tree_mtime != info->mtime && leases_.count(digest) == 0;
  if (info->tree_boot != boot_id() || stale_mtime) {
    try {
      unpack_tree(store::Digest::parse(digest), info->mtime);
    } catch (const std::exception& e) {
      throw http::ApiError("internal_error", "snapshot " + digest + ": unpacking its tree again failed: " + e.what());
    }
    info->tree_boot = boot_id();
    info->tree_mtime = info->mtime;
    info->last_used = now_rfc3339();
    write_meta(*info);
  } else if (base::parse_instant(info->last_used, false).value_or(0) < now_micros() - kLastUseGranularity) {
    // Dated to within an hour: most leases write nothing, and a failing write costs the GC's precision only.
    info->last_used = now_rfc3339();
    try {
      write_meta(*info);
    } catch (const std::exception& e) {
      spdlog::warn("snapshot {}: recording its use: {}", digest, e.what());
    }
  }
  ++leases_[digest];
  return std::shared_ptr<const SnapshotLease>(
      new SnapshotLease(this, digest, tree_path(store::Digest::parse(digest).hex()).string()));
}

void SnapshotStore::release(const std::string& digest) {
  std::lock_guard lock(mutex_);
  if (--leases_[digest] <= 0) leases_.erase(digest);
}

void SnapshotStore::remove(const std::string& digest, std::optional<uid_t> owner) {
  remove_if(digest, owner, [](const SnapshotInfo&) { return true; });
}

SnapshotStore::Removal SnapshotStore::remove_if(const std::string& digest, std::optional<uid_t> owner,
                                               const std::function<bool(const SnapshotInfo&)>& still) {
  const store::Digest parsed = store::Digest::parse(digest);
  const fs::path trash = root_ / "staging" / ("removed-" + parsed.hex());
  {
    std::unique_lock lock(mutex_);
    busy_changed_.wait(lock, [&] { return busy_.count(digest) == 0; });
    std::optional<SnapshotInfo> info = find(digest);
    if (!info) throw http::ApiError("snapshot_not_found", "no snapshot " + digest);
    if (!still(*info)) return Removal::kKept;
    if (owner) {
      std::erase(info->owners, *owner);
      if (!info->owners.empty()) {  // the others' snapshot stays: only a claim is gone
        write_meta(*info);
        return Removal::kClaimDropped;
      }
    }
    if (leases_.count(digest)) {
      throw http::ApiError("snapshot_in_use", "snapshot " + digest + " is the workspace of a live run or session");
    }
    fs::remove(meta_path(parsed.hex()));  // gone from here on; the rest is space to reclaim
    remove_quietly(trash);
    std::error_code ignored;
    fs::rename(tree_path(parsed.hex()), trash, ignored);
    busy_.insert(digest);  // a create of the same content waits until its blob is gone
  }
  remove_quietly(trash);  // maybe many files on a slow disk: outside the lock
  blobs_.remove(parsed);
  std::lock_guard lock(mutex_);
  busy_.erase(digest);
  busy_changed_.notify_all();
  return Removal::kRemoved;
}

// Oldest use first, so that the size cap takes what has gone unused longest. Each removal checks the metadata again
// under the lock (remove_if): a snapshot created again, claimed by another caller or leased since the listing stays.
SnapshotGcReport SnapshotStore::collect_garbage(const std::function<std::set<std::string>()>& pinned_digests,
                                                const SnapshotGc& gc) {
  auto used_at = [](const SnapshotInfo& info) { return base::parse_instant(info.last_used, false).value_or(0); };
  auto owned = [&](const SnapshotInfo& info) {
    return !gc.owner || std::find(info.owners.begin(), info.owners.end(), *gc.owner) != info.owners.end();
  };
  std::vector<std::pair<base::Micros, SnapshotInfo>> all;  // (last use, snapshot), each parsed once
  std::uint64_t total = 0;
  bool any_owned = false;
  for (SnapshotInfo& info : list()) {
    total += info.size;
    any_owned = any_owned || owned(info);
    all.emplace_back(used_at(info), std::move(info));
  }
  SnapshotGcReport report;
  if (!any_owned) return report;  // nothing to ask the ledger about
  std::stable_sort(all.begin(), all.end(), [](const auto& a, const auto& b) { return a.first < b.first; });
  const std::set<std::string> pinned = pinned_digests();
  for (const auto& [used, listed] : all) {
    if (pinned.count(listed.digest) || !owned(listed)) continue;
    const bool over_cap = gc.max_total_bytes > 0 && total > gc.max_total_bytes;
    auto collectable_at = [&](base::Micros at) {
      return at < gc.kept_if_used_after_us && (at < gc.unused_before_us || over_cap);
    };
    if (!collectable_at(used)) continue;
    Removal outcome = !gc.owner || listed.owners.size() == 1 ? Removal::kRemoved : Removal::kClaimDropped;
    if (gc.dry_run) {
      std::lock_guard lock(mutex_);
      if (outcome == Removal::kRemoved && leases_.count(listed.digest)) {
        ++report.in_use;
        continue;
      }
    } else {
      try {
        outcome = remove_if(listed.digest, gc.owner,
                            [&](const SnapshotInfo& now) { return owned(now) && collectable_at(used_at(now)); });
      } catch (const http::ApiError& e) {
        if (e.code() == "snapshot_in_use") ++report.in_use;  // leased: a live run or session uses it
        if (e.code() == "snapshot_in_use" || e.code() == "snapshot_not_found") continue;
        throw;
      }
    }
    if (outcome == Removal::kClaimDropped) report.released.push_back(listed.digest);
    if (outcome != Removal::kRemoved) continue;  // kKept: used or claimed again meanwhile
    total -= listed.size;
    report.bytes_freed += listed.size;
    report.removed.push_back(listed);
  }
  return report;
}

}  // namespace capsule::daemon
