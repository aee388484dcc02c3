// RunOutputs and layer_files: what keep() records (collect.outputs, the size cap as a reason), reading a path
// back out of a kept layer (files, hard links, subtrees, symlinks as links), and the sweep (gone and expired runs,
// the total cap, unnamed blobs).
#include "daemon/runs/run_outputs.h"

#include <archive.h>
#include <archive_entry.h>
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <map>
#include <tuple>

#include "daemon/runs/layer_files.h"
#include "http/response.h"
#include "tests/support/scratch_dir_test.h"

namespace capsule::daemon {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

constexpr std::int64_t kDayMs = 24ll * 3600 * 1000;

std::string read_path(const fs::path& layer, const std::string& path, LayerEntryKind expected) {
  const auto entry = find_in_layer(layer, path);
  EXPECT_TRUE(entry) << path;
  if (!entry) return "";
  EXPECT_EQ(entry->kind, expected) << path;
  std::string bytes;
  write_from_layer(layer, path, *entry, [&](std::string_view chunk) { bytes.append(chunk); });
  return bytes;
}

std::map<std::string, std::string> tar_names(const std::string& tar) {  // name -> symlink target or data
  std::map<std::string, std::string> names;
  struct archive* a = archive_read_new();
  archive_read_support_format_tar(a);
  archive_read_open_memory(a, tar.data(), tar.size());
  archive_entry* entry;
  while (archive_read_next_header(a, &entry) == ARCHIVE_OK) {
    std::string value = archive_entry_symlink(entry) ? archive_entry_symlink(entry) : "";
    char buffer[256];
    for (la_ssize_t n; (n = archive_read_data(a, buffer, sizeof buffer)) > 0;) value.append(buffer, n);
    names[archive_entry_pathname(entry)] = value;
  }
  archive_read_free(a);
  return names;
}

class RunOutputsTest : public testing::ScratchDirTest {
 protected:
  void SetUp() override {
    ScratchDirTest::SetUp();
    write("ws/target/classes/A.class", "A");
    write("ws/target/classes/B.class", "B");
    write("ws/notes.txt", "notes");
    fs::create_symlink("/etc/shadow", dir_ + "/ws/target/escape");
    fs::create_hard_link(dir_ + "/ws/notes.txt", dir_ + "/ws/target/notes-link");
    write("root/root/.m2/dep.jar", "jar");
  }
  RunUppers uppers() const { return {dir_ + "/ws", dir_ + "/root", 0, 0}; }
};

TEST_F(RunOutputsTest, KeepsBothLayersAndReadsPathsBackWithoutFollowingLinks) {
  RunOutputs outputs(dir_ + "/store", OutputsPolicy{});
  const json kept = outputs.keep("r1", std::nullopt, uppers(), 1000 * kDayMs);
  ASSERT_TRUE(kept["workspace"].is_object()) << kept.dump();
  ASSERT_TRUE(kept["root"].is_object()) << kept.dump();
  EXPECT_EQ(kept["kept_until"], 1007 * kDayMs);
  EXPECT_FALSE(kept.contains("reason"));

  const fs::path ws = outputs.layer("r1", "workspace").path;
  EXPECT_EQ(read_path(ws, "notes.txt", LayerEntryKind::kFile), "notes");
  EXPECT_EQ(read_path(ws, "target/notes-link", LayerEntryKind::kFile), "notes") << "a hard link reads its data";
  EXPECT_EQ(find_in_layer(ws, "target/notes-link")->size, 5u);
  const auto subtree = tar_names(read_path(ws, "target", LayerEntryKind::kDirectory));
  EXPECT_EQ(subtree.at("classes/A.class"), "A");
  EXPECT_EQ(subtree.at("escape"), "/etc/shadow");
  EXPECT_FALSE(subtree.count("target")) << "named relative to the directory, without its own entry";
  EXPECT_EQ(tar_names(read_path(ws, "target/escape", LayerEntryKind::kSymlink)),
            (std::map<std::string, std::string>{{"escape", "/etc/shadow"}}));
  EXPECT_FALSE(find_in_layer(ws, "missing"));
  EXPECT_EQ(read_path(outputs.layer("r1", "root").path, "root/.m2/dep.jar", LayerEntryKind::kFile), "jar");
  EXPECT_THROW(outputs.layer("r2", "workspace"), http::ApiError);
}

// A served subtree names owners as the layer does (the box's view: sandbox root 0:0), as a session's tar does
// (sandbox/tar_in_root.h), without the setuid and setgid bits the layer itself keeps for commits.
TEST_F(RunOutputsTest, ASubtreeIsServedWithTheBoxsOwnersAndNoSetuidOrSetgid) {
  write("ws/out/suid", "s");
  write("ws/out/shared/plain", "p");
  for (const char* path : {"ws/out", "ws/out/suid", "ws/out/shared", "ws/out/shared/plain"}) {
    ASSERT_EQ(::chown((dir_ + "/" + path).c_str(), 100000, 101000), 0) << path;
  }
  ASSERT_EQ(::chmod((dir_ + "/ws/out/suid").c_str(), 06755), 0);
  ASSERT_EQ(::chmod((dir_ + "/ws/out/shared").c_str(), 02775), 0);
  RunOutputs outputs(dir_ + "/store", OutputsPolicy{});
  outputs.keep("r1", std::nullopt, RunUppers{dir_ + "/ws", dir_ + "/root", 100000, 65536}, 1000 * kDayMs);
  const std::string tar = read_path(outputs.layer("r1", "workspace").path, "out", LayerEntryKind::kDirectory);
  std::map<std::string, std::tuple<std::int64_t, std::int64_t, unsigned>> owners;
  struct archive* a = archive_read_new();
  archive_read_support_format_tar(a);
  archive_read_open_memory(a, tar.data(), tar.size());
  archive_entry* entry;
  while (archive_read_next_header(a, &entry) == ARCHIVE_OK) {
    std::string name = archive_entry_pathname(entry);
    if (name.ends_with('/')) name.pop_back();
    owners[name] = {archive_entry_uid(entry), archive_entry_gid(entry), archive_entry_perm(entry)};
  }
  archive_read_free(a);
  EXPECT_EQ(owners.at("suid"), std::make_tuple(std::int64_t{0}, std::int64_t{1000}, 0755u));
  EXPECT_EQ(owners.at("shared"), std::make_tuple(std::int64_t{0}, std::int64_t{1000}, 0775u));
  EXPECT_EQ(owners.at("shared/plain"), std::make_tuple(std::int64_t{0}, std::int64_t{1000}, 0644u));
}

TEST_F(RunOutputsTest, AGraftedBindIsPackedIntoTheRootLayerGlobsIncluded) {
  fs::create_directories(dir_ + "/root/root/.m2");  // the bind's mount point, empty in the upper
  write("m2/repository/g/a/1/a-1.jar", "jar");
  write("m2/settings.xml", "<settings/>");
  RunUppers with_m2 = uppers();
  with_m2.root_grafts["root/.m2"] = dir_ + "/m2";
  RunOutputs outputs(dir_ + "/store", OutputsPolicy{});
  outputs.keep("r1", std::nullopt, with_m2, 0);
  const fs::path root = outputs.layer("r1", "root").path;
  EXPECT_EQ(read_path(root, "root/.m2/repository/g/a/1/a-1.jar", LayerEntryKind::kFile), "jar");
  outputs.keep("r2", std::vector<std::string>{"/root/.m2/repository/**/*.jar"}, with_m2, 0);
  const fs::path only = outputs.layer("r2", "root").path;
  EXPECT_TRUE(find_in_layer(only, "root/.m2/repository/g/a/1/a-1.jar"));
  EXPECT_FALSE(find_in_layer(only, "root/.m2/settings.xml"));
}

TEST_F(RunOutputsTest, CollectOutputsGlobsAndTheCapDecideWhatIsKept) {
  RunOutputs outputs(dir_ + "/store", OutputsPolicy{});
  const json some = outputs.keep("r1", std::vector<std::string>{"target/**/A.class"}, uppers(), 0);
  EXPECT_TRUE(some["root"].is_null()) << "no absolute glob";
  const fs::path ws = outputs.layer("r1", "workspace").path;
  EXPECT_TRUE(find_in_layer(ws, "target/classes/A.class"));
  EXPECT_FALSE(find_in_layer(ws, "target/classes/B.class"));
  EXPECT_FALSE(find_in_layer(ws, "notes.txt"));

  const json none = outputs.keep("r2", std::vector<std::string>{}, uppers(), 0);
  EXPECT_TRUE(none["workspace"].is_null() && none["root"].is_null() && none["kept_until"].is_null());
  EXPECT_NE(none["reason"].get<std::string>().find("[]"), std::string::npos);

  RunOutputs capped(dir_ + "/capped", OutputsPolicy{7, 0, 4096});
  const json big = capped.keep("r3", std::nullopt, uppers(), 0);
  EXPECT_TRUE(big["workspace"].is_null()) << big.dump();
  EXPECT_NE(big["reason"].get<std::string>().find("larger than the cap"), std::string::npos) << big.dump();
}

TEST_F(RunOutputsTest, TheSweepDropsGoneAndExpiredRunsThenTheOldestOverTheTotalAndUnnamedBlobs) {
  RunOutputs outputs(dir_ + "/store", OutputsPolicy{1, 0, 0});
  write("ws2/other.txt", "2");
  write("ws3/third.txt", "3");
  outputs.keep("gone", std::nullopt, {dir_ + "/ws", "", 0, 0}, 10 * kDayMs);
  outputs.keep("old", std::nullopt, {dir_ + "/ws2", "", 0, 0}, 1 * kDayMs);
  outputs.keep("new", std::nullopt, {dir_ + "/ws3", "", 0, 0}, 10 * kDayMs);
  const auto exists = [](const std::string& id) { return id != "gone"; };
  const OutputsSweep sweep = outputs.sweep(exists, 10 * kDayMs + 1);
  EXPECT_EQ(sweep.runs_dropped, 2u);  // "gone" no longer in the ledger, "old" past its day
  EXPECT_EQ(sweep.blobs_removed, 2u);
  EXPECT_NO_THROW(outputs.layer("new", "workspace"));
  EXPECT_THROW(outputs.layer("old", "workspace"), http::ApiError);

  RunOutputs tight(dir_ + "/store", OutputsPolicy{30, 1, 0});  // room for nothing: oldest first, all go
  EXPECT_EQ(tight.sweep(exists, 10 * kDayMs).runs_dropped, 1u);
  EXPECT_TRUE(fs::is_empty(dir_ + "/store/blobs/sha256"));
}

}  // namespace
}  // namespace capsule::daemon
