// SnapshotStore and check_source_tar without a daemon: canonical digests from differently made tars, the limits
// named in 413s, refused entries named in 400s, no-op re-creation, leases blocking removal, nothing left behind,
// trees dated by the snapshot's mtime, and unchanged directories found again by their stat data.
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <optional>
#include <set>
#include <thread>

#include "base/file_util.h"
#include "daemon/snapshots/directory_snapshot.h"
#include "daemon/snapshots/snapshot_reuse.h"
#include "daemon/snapshots/snapshot_store.h"
#include "http/error_status.h"
#include "http/response.h"

namespace capsule::daemon {
namespace {

namespace fs = std::filesystem;

class SnapshotStoreTest : public ::testing::Test {
 protected:
  void SetUp() override { dir_ = base::make_temp_dir("/tmp", "snapshot-store-test-", "test"); }
  void TearDown() override { fs::remove_all(dir_); }

  void sh(const std::string& command) { ASSERT_EQ(std::system(("cd " + dir_.string() + " && " + command).c_str()), 0) << command; }

  // The ApiError code `body` throws, or "none".
  template <typename Body>
  static std::string code_of(Body body, std::string* message = nullptr) {
    try {
      body();
    } catch (const http::ApiError& e) {
      if (message) *message = e.what();
      return e.code();
    }
    return "none";
  }

  fs::path dir_;
};

TEST_F(SnapshotStoreTest, DifferentTarsOfOneTreeGiveOneSnapshot) {
  sh("mkdir -p t/d && echo a > t/d/a && echo b > t/b && chmod 750 t/d && ln -s d/a t/l");
  sh("tar --format=gnu -cf gnu.tar -C t . && tar --format=pax --mtime=@99 --owner=7 --group=8 -czf pax.tgz -C t l b d");
  SnapshotStore store(dir_ / "store");
  const SnapshotInfo first = store.create(dir_ / "gnu.tar", {{"tar", "gnu"}}, 1000);
  const SnapshotInfo second = store.create(dir_ / "pax.tgz", {{"tar", "pax"}}, 1001);
  EXPECT_EQ(first.digest, second.digest);
  EXPECT_EQ(first.files, 4u);
  // Creating it again stores nothing new but the claim, and shows the second caller its own source, not the first's.
  EXPECT_EQ(second.source, nlohmann::json({{"tar", "pax"}}));
  EXPECT_EQ(second.owners, std::vector<uid_t>({1001}));
  EXPECT_EQ(store.find(first.digest)->source, nlohmann::json({{"tar", "gnu"}}));
  EXPECT_EQ(store.find(first.digest)->owners, std::vector<uid_t>({1000, 1001}));
  ASSERT_EQ(store.list().size(), 1u);

  // The tree used as an overlay lower: root-owned, the link kept, mode bits as in the tar.
  std::shared_ptr<const SnapshotLease> lease = store.lease(first.digest);
  const fs::path tree = lease->tree();
  EXPECT_EQ(fs::read_symlink(tree / "l"), "d/a");
  EXPECT_EQ(fs::status(tree / "d").permissions(), fs::perms(0750));
  EXPECT_EQ(fs::status(tree / "b").permissions(), fs::perms(0644));

  // One owner's removal drops its claim only; the last one's removes the snapshot, once no run holds it.
  EXPECT_EQ(code_of([&] { store.remove(first.digest, 1000u); }), "none");
  EXPECT_EQ(store.find(first.digest)->owners, std::vector<uid_t>({1001}));
  std::string message;
  EXPECT_EQ(code_of([&] { store.remove(first.digest, 1001u); }, &message), "snapshot_in_use");
  EXPECT_NE(message.find(first.digest), std::string::npos);
  EXPECT_EQ(http::status_for("snapshot_in_use"), 409u);
  lease.reset();
  EXPECT_EQ(code_of([&] { store.remove(first.digest, 1001u); }), "none");
  EXPECT_FALSE(store.find(first.digest));
  EXPECT_TRUE(fs::is_empty(dir_ / "store" / "trees"));
  EXPECT_TRUE(fs::is_empty(dir_ / "store" / "blobs" / "sha256"));
  EXPECT_EQ(code_of([&] { store.lease(first.digest); }), "snapshot_not_found");
}

TEST_F(SnapshotStoreTest, LimitsAreNamedAndNothingIsLeft) {
  sh("mkdir -p t/a/b/c && seq 1 1000 > t/a/b/c/f && echo x > t/g");
  sh("tar -cf t.tar -C t .");
  SnapshotLimits limits;
  limits.max_files = 3;
  std::string message;
  EXPECT_EQ(code_of([&] { check_source_tar(dir_ / "t.tar", limits); }, &message), "snapshot_too_large");
  EXPECT_NE(message.find("max_files (3)"), std::string::npos) << message;
  limits = {};
  limits.max_bytes = 100;
  EXPECT_EQ(code_of([&] { check_source_tar(dir_ / "t.tar", limits); }, &message), "snapshot_too_large");
  EXPECT_NE(message.find("max_bytes"), std::string::npos) << message;
  limits = {};
  limits.max_depth = 3;
  EXPECT_EQ(code_of([&] { check_source_tar(dir_ / "t.tar", limits); }, &message), "snapshot_too_large");
  EXPECT_NE(message.find("max_depth (3)"), std::string::npos) << message;
  limits = {};
  limits.max_path = 8;
  EXPECT_EQ(code_of([&] { check_source_tar(dir_ / "t.tar", limits); }, &message), "snapshot_too_large");
  EXPECT_NE(message.find("max_path"), std::string::npos) << message;
  EXPECT_EQ(http::status_for("snapshot_too_large"), 413u);

  limits = {};
  limits.max_files = 3;
  SnapshotStore store(dir_ / "store", limits);
  EXPECT_EQ(code_of([&] { store.create(dir_ / "t.tar", {}, 0); }), "snapshot_too_large");
  EXPECT_TRUE(store.list().empty());
  EXPECT_TRUE(fs::is_empty(dir_ / "store" / "staging"));
  EXPECT_TRUE(fs::is_empty(dir_ / "store" / "trees"));
}

TEST_F(SnapshotStoreTest, RefusedEntriesAreNamed) {
  sh("mkdir t && mkfifo t/pipe && tar -cf fifo.tar -C t . && rm t/pipe && echo x > t/.wh.x && tar -cf wh.tar -C t .");
  SnapshotLimits limits;
  std::string message;
  EXPECT_EQ(code_of([&] { check_source_tar(dir_ / "fifo.tar", limits); }, &message), "invalid_archive");
  EXPECT_NE(message.find("pipe': fifos"), std::string::npos) << message;
  EXPECT_EQ(code_of([&] { check_source_tar(dir_ / "wh.tar", limits); }, &message), "invalid_archive");
  EXPECT_NE(message.find(".wh.x"), std::string::npos) << message;
  sh("echo y > y && tar -cf abs.tar -P " + (dir_ / "y").string());
  EXPECT_EQ(code_of([&] { check_source_tar(dir_ / "abs.tar", limits); }, &message), "invalid_archive");
  EXPECT_NE(message.find("absolute"), std::string::npos) << message;
}

TEST_F(SnapshotStoreTest, LeftoversOfACrashAreRemovedAtStart) {
  { SnapshotStore store(dir_ / "store"); }
  sh("mkdir -p store/staging/create-x store/trees/" + std::string(64, 'c') + " store/trees/.half.unpack-1");
  SnapshotStore store(dir_ / "store");
  EXPECT_TRUE(fs::is_empty(dir_ / "store" / "staging"));
  EXPECT_TRUE(fs::is_empty(dir_ / "store" / "trees"));
}

TEST_F(SnapshotStoreTest, ATreeUnpackedInAnotherBootIsUnpackedAgainBeforeUse) {
  sh("mkdir -p t/d && echo a > t/d/a && echo b > t/b && tar -cf t.tar -C t .");
  SnapshotStore store(dir_ / "store");
  const SnapshotInfo info = store.create(dir_ / "t.tar", {{"tar", "t"}}, 0);
  const std::string hex = info.digest.substr(7);
  // What a crash of the machine may leave of a tree written without syncing: a file emptied, one missing.
  sh("truncate -s 0 store/trees/" + hex + "/b && rm store/trees/" + hex + "/d/a");
  { std::shared_ptr<const SnapshotLease> same_boot = store.lease(info.digest); }
  EXPECT_FALSE(fs::exists(dir_ / "store" / "trees" / hex / "d" / "a")) << "in the boot that wrote it, the tree is used as is";
  sh("sed -i 's/\"tree_boot\": \"[^\"]*\"/\"tree_boot\": \"an-earlier-boot\"/' store/meta/" + hex + ".json");
  std::shared_ptr<const SnapshotLease> lease = store.lease(info.digest);
  EXPECT_EQ(fs::file_size(fs::path(lease->tree()) / "b"), 2u);
  EXPECT_TRUE(fs::exists(fs::path(lease->tree()) / "d" / "a"));
  EXPECT_EQ(store.find(info.digest)->tree_boot, info.tree_boot) << "unpacked again in this boot, and recorded";
}

TEST_F(SnapshotStoreTest, ASourceIsNotReadWhenTheStateFilesystemIsBelowItsWatermark) {
  SnapshotStore roomy(dir_ / "store");
  EXPECT_EQ(code_of([&] { roomy.require_room(); }), "none");
  SnapshotStore full(dir_ / "store", {}, StorageWatermark{~0ull, 0});
  std::string message;
  EXPECT_EQ(code_of([&] { full.require_room(); }, &message), "insufficient_storage");
  EXPECT_EQ(http::status_for("insufficient_storage"), 507u);
}

// The collection: pinned digests and leased snapshots stay, a dry run removes nothing, an owner's collection drops
// only its claims, the size cap removes until the store fits, and nothing of a removed snapshot is left.
TEST_F(SnapshotStoreTest, GarbageCollectionKeepsPinnedAndLeasedSnapshots) {
  SnapshotStore store(dir_ / "store");
  auto make = [&](const std::string& name, uid_t owner) {
    sh("mkdir -p " + name + " && echo " + name + " > " + name + "/f && tar -cf " + name + ".tar -C " + name + " .");
    return store.create(dir_ / (name + ".tar"), {{"tar", name}}, owner);
  };
  const SnapshotInfo pinned = make("pinned", 1000), leased = make("leased", 1000), loose = make("loose", 1000);
  const SnapshotInfo shared = make("shared", 1000);
  store.create(dir_ / "shared.tar", {{"tar", "shared"}}, 1001);
  std::shared_ptr<const SnapshotLease> lease = store.lease(leased.digest);
  const base::Micros later = base::parse_instant(loose.created, false).value() + 3 * base::kMicrosPerSecond;
  const auto pinned_only = [&] { return std::set<std::string>{pinned.digest}; };

  SnapshotGc gc;
  gc.unused_before_us = later;
  gc.owner = 1000;
  gc.dry_run = true;
  SnapshotGcReport report = store.collect_garbage(pinned_only, gc);
  ASSERT_EQ(report.removed.size(), 1u);
  EXPECT_EQ(report.removed[0].digest, loose.digest);
  EXPECT_EQ(report.released, std::vector<std::string>({shared.digest}));
  EXPECT_EQ(report.in_use, 1u);
  EXPECT_EQ(store.list().size(), 4u) << "a dry run removes nothing";
  SnapshotGc graced = gc;  // the sweep's grace: what was used after it stays, whatever its age
  graced.kept_if_used_after_us = base::parse_instant(pinned.created, false).value() - base::kMicrosPerSecond;
  EXPECT_TRUE(store.collect_garbage(pinned_only, graced).removed.empty());

  gc.dry_run = false;
  report = store.collect_garbage(pinned_only, gc);
  EXPECT_EQ(report.removed.size(), 1u);
  EXPECT_EQ(report.bytes_freed, loose.size);
  EXPECT_FALSE(store.find(loose.digest));
  EXPECT_EQ(store.find(shared.digest)->owners, std::vector<uid_t>({1001})) << "only uid 1000's claim went";
  EXPECT_TRUE(store.find(leased.digest));
  EXPECT_TRUE(store.find(pinned.digest));

  // Unused since before the epoch: age removes nothing; the cap removes the unpinned, unleased one to fit.
  lease.reset();
  SnapshotGc cap;
  cap.max_total_bytes = pinned.size + leased.size;
  report = store.collect_garbage(pinned_only, cap);
  ASSERT_EQ(report.removed.size(), 1u);
  EXPECT_TRUE(report.removed[0].digest == leased.digest || report.removed[0].digest == shared.digest);
  report = store.collect_garbage(pinned_only, cap);
  EXPECT_TRUE(report.removed.empty()) << "the store fits its cap";
  EXPECT_EQ(store.list().size(), 2u);
  EXPECT_TRUE(fs::is_empty(dir_ / "store" / "staging"));
}

// A store written before uses were dated: its snapshots count as used when it opens, so an upgrade collects
// nothing that was in use the day before.
TEST_F(SnapshotStoreTest, SnapshotsFromBeforeUsesWereDatedCountAsUsedWhenTheStoreOpens) {
  std::string digest;
  {
    SnapshotStore store(dir_ / "store");
    sh("mkdir -p t && echo x > t/f && tar -cf t.tar -C t .");
    digest = store.create(dir_ / "t.tar", {{"tar", "t"}}, 1000).digest;
  }
  const fs::path meta = dir_ / "store" / "meta" / (digest.substr(7) + ".json");
  std::ifstream in(meta);
  nlohmann::json old = nlohmann::json::parse(in);
  in.close();
  old.erase("last_used");
  old["created"] = "2020-01-01T00:00:00Z";
  std::ofstream(meta, std::ios::trunc) << old.dump();

  SnapshotStore store(dir_ / "store");
  const base::Micros year_2025 = base::parse_instant("2025-01-01", true).value();
  EXPECT_GT(base::parse_instant(store.find(digest)->last_used, false).value_or(0), year_2025);
  SnapshotGc gc;
  gc.unused_before_us = year_2025;
  EXPECT_TRUE(store.collect_garbage([] { return std::set<std::string>(); }, gc).removed.empty());
  EXPECT_EQ(store.find(digest)->created, "2020-01-01T00:00:00Z");
}

// The mtime (seconds) of every entry below `tree` and the tree itself, without following symlinks.
std::set<std::int64_t> tree_mtimes(const fs::path& tree) {
  std::set<std::int64_t> mtimes;
  auto add = [&](const fs::path& path) {
    struct stat st {};
    if (::lstat(path.c_str(), &st) == 0) mtimes.insert(st.st_mtim.tv_sec);
  };
  add(tree);
  for (const auto& entry : fs::recursive_directory_iterator(tree)) add(entry.path());
  return mtimes;
}

// Every entry of a snapshot's tree carries the snapshot's mtime: never 0 (Maven's resource copying reads 0 as
// older than a missing target and skips the copy), the same after the tree is unpacked again (a reboot) or the
// store reopened, the first one kept by a later create of the same digest, and never part of the digest.
TEST_F(SnapshotStoreTest, TreesCarryTheSnapshotsMtimeWhichTheDigestIgnores) {
  sh("mkdir -p t/d && echo a > t/d/a && echo b > t/b && ln -s d/a t/l");
  sh("tar --mtime=@99 -cf old.tar -C t . && tar --mtime=@1700000000 -cf new.tar -C t .");
  SnapshotStore store(dir_ / "store");
  const SnapshotInfo first = store.create(dir_ / "old.tar", {{"tar", "old"}}, 0);
  const std::int64_t now = std::chrono::duration_cast<std::chrono::seconds>(
                               std::chrono::system_clock::now().time_since_epoch()).count();
  EXPECT_GT(first.mtime, now - 600) << "a tar or a directory: the time it was first stored";
  EXPECT_LE(first.mtime, now + 1);
  EXPECT_EQ(first.to_json()["mtime"], snapshot_mtime_json(first.mtime));
  const std::string hex = first.digest.substr(7);
  const fs::path tree = dir_ / "store" / "trees" / hex;
  EXPECT_EQ(tree_mtimes(tree), std::set<std::int64_t>({first.mtime}));

  // The same bytes with other mtimes, and later, with a date asked for: the same digest, the first mtime.
  const SnapshotInfo again = store.create(dir_ / "new.tar", {{"tar", "new"}}, 0, 1600000000);
  EXPECT_EQ(again.digest, first.digest);
  EXPECT_EQ(again.mtime, first.mtime);
  // The canonical tar still says 0 for every entry.
  sh("tar --full-time -tvf " + store.tar_path(first.digest).string() + " > listing && ! grep -v ' 1970-01-01 00:00:00 ' listing");

  // Unpacked again (another boot), and read by a store opened again: the same mtime.
  sh("sed -i 's/\"tree_boot\": \"[^\"]*\"/\"tree_boot\": \"an-earlier-boot\"/' store/meta/" + hex + ".json");
  sh("touch -d @5 store/trees/" + hex + "/b");
  { std::shared_ptr<const SnapshotLease> lease = store.lease(first.digest); }
  EXPECT_EQ(tree_mtimes(tree), std::set<std::int64_t>({first.mtime}));
  SnapshotStore reopened(dir_ / "store");
  EXPECT_EQ(reopened.find(first.digest)->mtime, first.mtime);

  // A git source's date (the commit's), clamped above 0.
  sh("mkdir -p g && echo g > g/f && tar -cf g.tar -C g . && mkdir -p z && echo z > z/f && tar -cf z.tar -C z .");
  const SnapshotInfo dated = store.create(dir_ / "g.tar", {{"tar", "g"}}, 0, 1600000000);
  EXPECT_EQ(dated.mtime, 1600000000);
  EXPECT_EQ(dated.to_json()["mtime"], "2020-09-13T12:26:40Z");
  EXPECT_EQ(tree_mtimes(dir_ / "store" / "trees" / dated.digest.substr(7)), std::set<std::int64_t>({1600000000}));
  EXPECT_EQ(store.create(dir_ / "z.tar", {{"tar", "z"}}, 0, 0).mtime, 1);
  EXPECT_EQ(parse_snapshot_mtime("1970-01-01T00:00:00Z"), std::nullopt);
  EXPECT_EQ(parse_snapshot_mtime("2020-09-13T12:26:40.5Z"), std::nullopt);
  EXPECT_EQ(parse_snapshot_mtime(1600000000), std::nullopt);
  EXPECT_EQ(parse_snapshot_mtime("2020-09-13T12:26:40Z"), 1600000000);
}

// Metadata and trees from before snapshots had an mtime: the creation time is the mtime, and the first lease
// unpacks the tree (mtime 0) again with it.
TEST_F(SnapshotStoreTest, TreesFromBeforeMtimesAreUnpackedAgainWithTheCreationTime) {
  sh("mkdir -p t && echo x > t/f && tar -cf t.tar -C t .");
  std::string digest;
  {
    SnapshotStore store(dir_ / "store");
    digest = store.create(dir_ / "t.tar", {{"tar", "t"}}, 1000).digest;
  }
  const std::string hex = digest.substr(7);
  const fs::path meta = dir_ / "store" / "meta" / (hex + ".json");
  std::ifstream in(meta);
  nlohmann::json old = nlohmann::json::parse(in);
  in.close();
  old.erase("mtime");
  old.erase("tree_mtime");
  old["created"] = "2021-02-03T04:05:06Z";
  std::ofstream(meta, std::ios::trunc) << old.dump();
  sh("find store/trees/" + hex + " -exec touch -h -d @0 {} +");

  SnapshotStore store(dir_ / "store");
  const std::int64_t created = base::parse_instant("2021-02-03T04:05:06Z", false).value() / base::kMicrosPerSecond;
  EXPECT_EQ(store.find(digest)->mtime, created);
  std::shared_ptr<const SnapshotLease> lease = store.lease(digest);
  EXPECT_EQ(tree_mtimes(lease->tree()), std::set<std::int64_t>({created}));
  EXPECT_EQ(store.find(digest)->tree_mtime, created);
}

// The stat key changes with anything tar would read differently or that marks a change: contents (touch), modes
// (chmod), a new file; a tree changed in the last kRacySeconds vouches for nothing.
TEST_F(SnapshotStoreTest, TheStatKeyChangesWithTouchChmodAndNewFiles) {
  sh("mkdir -p w/src && echo a > w/src/a && echo b > w/b");
  const Caller root = root_caller();
  const SnapshotLimits limits;
  auto stat_of = [&] {
    const OpenedHostPath dir = open_as_caller(root, (dir_ / "w").string(), HostAccess::kReadDir, "dir", "invalid_request");
    std::optional<TreeStat> stat = read_tree_stat(root, dir, limits);
    EXPECT_TRUE(stat);
    return stat.value_or(TreeStat{});
  };
  const TreeStat first = stat_of();
  EXPECT_EQ(first.entries, 4u) << ". src src/a b";
  EXPECT_EQ(first.key.rfind("sha256:", 0), 0u);
  EXPECT_FALSE(first.settled()) << "just written";
  EXPECT_EQ(stat_of().key, first.key) << "nothing changed";
  std::set<std::string> keys = {first.key};
  sh("touch w/src/a");
  EXPECT_TRUE(keys.insert(stat_of().key).second) << "touch";
  sh("chmod 600 w/b");
  EXPECT_TRUE(keys.insert(stat_of().key).second) << "chmod";
  sh("echo c > w/src/c");
  EXPECT_TRUE(keys.insert(stat_of().key).second) << "a new file";
  sh("mv w/src/c w/src/d");
  EXPECT_TRUE(keys.insert(stat_of().key).second) << "a rename";
  const OpenedHostPath dir = open_as_caller(root, (dir_ / "w").string(), HostAccess::kReadDir, "dir", "invalid_request");
  EXPECT_EQ(tree_stat_key(root, dir, limits), std::nullopt) << "changed in the last seconds";
}

// A directory snapshotted again unchanged is found, not made; a change (touch, chmod, a new file) makes it again;
// the index survives a restart, is bounded, and holds nothing for another caller or a snapshot no longer owned.
TEST_F(SnapshotStoreTest, AnUnchangedDirectoryIsFoundByItsStatData) {
  sh("mkdir -p w/src && echo a > w/src/a && echo b > w/b && chmod 755 . w w/src");
  std::this_thread::sleep_for(std::chrono::seconds(kRacySeconds + 1));  // settled: older than the racy window
  const Caller root = root_caller();
  const std::string path = (dir_ / "w").string();
  auto snapshot = [&](SnapshotStore& store, const Caller& caller) {
    const OpenedHostPath dir = open_as_caller(caller, path, HostAccess::kReadDir, "dir", "invalid_request");
    return snapshot_directory(store, caller, dir, {{"dir", path}});
  };
  std::optional<SnapshotStore> store(std::in_place, dir_ / "store");
  const DirectorySnapshot made = snapshot(*store, root);
  EXPECT_FALSE(made.reused);
  EXPECT_EQ(made.info.files, 3u) << "src src/a b";
  const DirectorySnapshot found = snapshot(*store, root);
  EXPECT_TRUE(found.reused);
  EXPECT_EQ(found.info.digest, made.info.digest);
  EXPECT_EQ(found.info.mtime, made.info.mtime);
  EXPECT_EQ(found.info.source, nlohmann::json({{"dir", path}}));

  store.emplace(dir_ / "store");  // a restart: reuse.json is read again
  EXPECT_TRUE(snapshot(*store, root).reused);

  // Never across callers: uid 65534 reads the tree itself (as itself) and becomes an owner of its own.
  Caller nobody;
  nobody.known = true;
  nobody.uid = 65534;
  nobody.gid = 65534;
  const DirectorySnapshot theirs = snapshot(*store, nobody);
  EXPECT_FALSE(theirs.reused);
  EXPECT_EQ(theirs.info.digest, made.info.digest);
  EXPECT_EQ(store->find(made.info.digest)->owners, std::vector<uid_t>({0, 65534}));
  EXPECT_TRUE(snapshot(*store, nobody).reused);
  // Not once the caller dropped its claim: made again (the same digest, claimed again), then found again.
  store->remove(made.info.digest, 0u);
  const DirectorySnapshot reclaimed = snapshot(*store, root);
  EXPECT_FALSE(reclaimed.reused);
  EXPECT_EQ(reclaimed.info.digest, made.info.digest);
  EXPECT_TRUE(snapshot(*store, root).reused);

  // A change of contents, mode or files: made again (the digest says what changed).
  sh("touch w/src/a");
  DirectorySnapshot after = snapshot(*store, root);
  EXPECT_FALSE(after.reused) << "touch";
  EXPECT_EQ(after.info.digest, made.info.digest) << "same bytes";
  sh("chmod 600 w/b");
  after = snapshot(*store, root);
  EXPECT_FALSE(after.reused) << "chmod";
  EXPECT_NE(after.info.digest, made.info.digest);
  sh("echo c > w/c");
  after = snapshot(*store, root);
  EXPECT_FALSE(after.reused) << "a new file";
  // A part the caller can no longer read: find and tar run with its rights, and tar's 403 is the answer.
  sh("chmod 700 w/src");
  EXPECT_EQ(code_of([&] { snapshot(*store, nobody); }), "forbidden");
}

TEST_F(SnapshotStoreTest, TheReuseIndexIsBoundedAndStartsAfreshFromAnUnreadableFile) {
  const fs::path file = dir_ / "reuse.json";
  const std::string digest = "sha256:" + std::string(64, 'a');
  {
    SnapshotReuseIndex index(file, 3, 1 << 20);
    for (int i = 0; i < 5; ++i) index.remember({"0:0:", "/d" + std::to_string(i)}, "sha256:t", digest);
    EXPECT_EQ(index.size(), 3u);
    EXPECT_FALSE(index.find({"0:0:", "/d0"}, "sha256:t")) << "the least recently used went first";
    EXPECT_TRUE(index.find({"0:0:", "/d4"}, "sha256:t"));
    EXPECT_FALSE(index.find({"0:0:", "/d4"}, "sha256:other")) << "another tree";
    EXPECT_FALSE(index.find({"1000:1000:", "/d4"}, "sha256:t")) << "another caller";
  }
  EXPECT_EQ(SnapshotReuseIndex(file, 3, 1 << 20).size(), 3u) << "kept across a restart";
  EXPECT_EQ(SnapshotReuseIndex(file, 2, 1 << 20).size(), 2u) << "a smaller bound applies to what is read";
  {
    SnapshotReuseIndex index(file, 100, 600);
    index.remember({"0:0:", "/" + std::string(300, 'x')}, "sha256:t", digest);
    EXPECT_LE(fs::file_size(file), 600u);
    EXPECT_EQ(index.size(), 1u) << "the long one leaves room for no other";
    EXPECT_TRUE(index.find({"0:0:", "/" + std::string(300, 'x')}, "sha256:t"));
  }
  std::ofstream(file, std::ios::trunc) << "{not json";
  EXPECT_EQ(SnapshotReuseIndex(file).size(), 0u);
  EXPECT_EQ(ReuseKey::of(Caller{true, 1000, 100, {30, 20}}, "/w").caller, "1000:100:20,30");
}

}  // namespace
}  // namespace capsule::daemon
