// SnapshotStore and check_source_tar without a daemon: canonical digests from differently made tars, the limits
// named in 413s, refused entries named in 400s, no-op re-creation, leases blocking removal, nothing left behind.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>

#include "base/file_util.h"
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

}  // namespace
}  // namespace capsule::daemon
