// The batch directory and input without a daemon: values round-trip through their one parser, a torn results
// line is skipped and counted, a chunk's lock excludes a second worker, the cache misses on damage, batch ids
// cannot name a path, and input is refused by file and line.
#include <gtest/gtest.h>

#include <fcntl.h>
#include <unistd.h>

#include <fstream>

#include "base/file_util.h"
#include "client/batch/batch_dir.h"
#include "client/batch/batch_input.h"
#include "client/batch/batch_summary.h"
#include "client/batch/batch_worker.h"

namespace capsule::client::batch {
namespace {

using nlohmann::json;

class BatchDirTest : public ::testing::Test {
 protected:
  void SetUp() override { root_ = base::make_temp_dir(fs::temp_directory_path(), "batch-test-", "test"); }
  void TearDown() override { fs::remove_all(root_); }
  BatchDir make(std::size_t count, std::size_t chunk_size) {
    BatchMeta meta;
    meta.id = new_batch_id();
    meta.specs = count;
    meta.chunk_size = chunk_size;
    std::vector<BatchSpec> specs;
    for (std::size_t i = 0; i < count; ++i) {
      const json spec = {{"argv", {"echo", std::to_string(i)}}};
      specs.push_back({"k" + std::to_string(i), spec, manifest_digest(spec)});
    }
    return BatchDir::create(root_, meta, specs);
  }
  static BatchResult result(const std::string& key, const std::string& state) {
    BatchResult r;
    r.key = key;
    r.manifest = manifest_digest(json{{"argv", {"echo", key}}});
    r.state = state;
    r.exit_code = state == "succeeded" ? 0 : 1;
    r.wall_ms = 12;
    r.labels = {{"group", "a"}};
    r.run = {{"id", "run-" + key}};
    return r;
  }
  void write(const fs::path& file, const std::string& text) { std::ofstream(file, std::ios::binary) << text; }

  fs::path root_;
};

TEST_F(BatchDirTest, ValuesRoundTripThroughTheirParsers) {
  const BatchDir dir = make(5, 2);
  EXPECT_EQ(dir.meta().chunks(), 3u);
  const BatchDir again(root_, dir.meta().id);
  EXPECT_EQ(to_json(again.meta()), to_json(dir.meta()));
  EXPECT_EQ(again.specs().size(), 5u);
  EXPECT_EQ(again.specs()[4].key, "k4");
  BatchResult r = result("k1", "failed");
  r.cached_from = json{{"key", "x"}, {"run_id", "r"}};
  EXPECT_EQ(to_json(parse_result(to_json(r))), to_json(r));
  Launch launch{"local", 42, "1234", "", "2026-01-01T00:00:00Z"};
  EXPECT_EQ(to_json(parse_launch(to_json(launch))), to_json(launch));
}

TEST_F(BatchDirTest, ATornLineIsSkippedAndALaterLineForAKeyWins) {
  const BatchDir dir = make(4, 2);
  auto fd = dir.lock_chunk(0);
  ASSERT_TRUE(fd);
  BatchDir::append_result(fd->get(), result("k0", "failed"));
  BatchDir::append_result(fd->get(), result("k0", "succeeded"));
  const std::string torn = "{\"key\": \"k1\", \"state\": \"succ";
  ASSERT_EQ(::write(fd->get(), torn.data(), torn.size()), static_cast<ssize_t>(torn.size()));
  std::size_t corrupt = 0;
  const auto results = dir.results(&corrupt);
  EXPECT_EQ(corrupt, 1u);
  ASSERT_EQ(results.size(), 1u);
  EXPECT_EQ(results.at("k0").state, "succeeded");
}

// A hand-made line past the result ceiling (20 MiB of one JSON string, no newline for 20 MiB) is one corrupt
// line, read in blocks and dropped, and the lines around it still count.
TEST_F(BatchDirTest, ALineOverTheCeilingIsCorruptAndItsNeighboursStillCount) {
  const BatchDir dir = make(4, 2);
  auto fd = dir.lock_chunk(0);
  ASSERT_TRUE(fd);
  BatchDir::append_result(fd->get(), result("k0", "succeeded"));
  const std::string huge = "{\"key\": \"k1\", \"state\": \"" + std::string(20u << 20, 'x') + "\"}\n";
  ASSERT_EQ(::write(fd->get(), huge.data(), huge.size()), static_cast<ssize_t>(huge.size()));
  BatchDir::append_result(fd->get(), result("k1", "failed"));
  std::size_t corrupt = 0;
  const auto results = dir.results(&corrupt);
  EXPECT_EQ(corrupt, 1u);
  ASSERT_EQ(results.size(), 2u);
  EXPECT_EQ(results.at("k0").state, "succeeded");
  EXPECT_EQ(results.at("k1").state, "failed");
}

// A Slurm task reads its own chunk: the specs at its offsets (the rest counted, not parsed) and its own results.
TEST_F(BatchDirTest, OneChunksSpecsAndResultsAreReadAlone) {
  const BatchDir dir = make(7, 3);  // chunks k0-k2 | k3-k5 | k6
  const auto middle = dir.specs(3, 3);
  ASSERT_EQ(middle.size(), 3u);
  EXPECT_EQ(middle[0].key, "k3");
  EXPECT_EQ(middle[2].key, "k5");
  const auto last = dir.specs(6, 3);
  ASSERT_EQ(last.size(), 1u);
  EXPECT_EQ(last[0].key, "k6");
  for (std::size_t chunk : {0u, 1u}) {
    auto fd = dir.lock_chunk(chunk);
    ASSERT_TRUE(fd);
    BatchDir::append_result(fd->get(), result("k" + std::to_string(chunk * 3), "succeeded"));
  }
  EXPECT_EQ(dir.results(nullptr, 1).size(), 1u);
  EXPECT_EQ(dir.results(nullptr, 1).count("k3"), 1u);
  EXPECT_EQ(dir.results().size(), 2u);
  // A damaged specs.jsonl is still noticed by a task that reads one chunk.
  std::ofstream(dir.path() / "specs.jsonl", std::ios::app) << "{\"key\": \"extra\"}\n";
  EXPECT_THROW(dir.specs(3, 3), std::runtime_error);
}

TEST_F(BatchDirTest, AChunkLockExcludesASecondWorkerAndDiesWithIt) {
  const BatchDir dir = make(2, 1);
  EXPECT_FALSE(dir.chunk_locked(0));
  {
    auto held = dir.lock_chunk(0);
    ASSERT_TRUE(held);
    EXPECT_TRUE(dir.chunk_locked(0));
    EXPECT_FALSE(dir.lock_chunk(0));  // flock is per open file: a second open in this process is refused too
    EXPECT_TRUE(dir.lock_chunk(1));
  }
  EXPECT_FALSE(dir.chunk_locked(0));
  EXPECT_TRUE(dir.lock_chunk(0));
}

TEST_F(BatchDirTest, TheCacheHoldsResultsOnlyAndADamagedEntryIsAMiss) {
  const BatchDir dir = make(1, 1);
  const BatchResult ok = result("k0", "succeeded");
  EXPECT_FALSE(dir.cached(ok.manifest));
  dir.store_in_cache(ok);
  ASSERT_TRUE(dir.cached(ok.manifest));
  EXPECT_EQ(dir.cached(ok.manifest)->run_id, ok.run_id);
  write(dir.cache_dir() / (ok.manifest.substr(7) + ".json"), "{\"key\": ");
  EXPECT_FALSE(dir.cached(ok.manifest));
  EXPECT_THROW(dir.cached("sha256:../../etc/passwd"), std::runtime_error);
  fs::permissions(dir.cache_dir(), fs::perms::group_write, fs::perm_options::add);  // another could plant results
  EXPECT_THROW(dir.cached(ok.manifest), std::runtime_error);
  fs::permissions(dir.cache_dir(), fs::perms::group_write, fs::perm_options::remove);
  EXPECT_FALSE(is_result_state("cancelled"));
  EXPECT_FALSE(is_result_state("interrupted"));
  EXPECT_TRUE(is_result_state("setup_failed"));
}

TEST_F(BatchDirTest, AnIdThatIsNotABatchIdNamesNoPath) {
  EXPECT_THROW(BatchDir(root_, "../etc"), std::runtime_error);
  EXPECT_THROW(BatchDir(root_, "b-20260101-000000-0000000g"), std::runtime_error);
  EXPECT_THROW(BatchDir(root_, "b-20260101-000000-00000000"), std::runtime_error);  // well formed, absent
}

TEST_F(BatchDirTest, TheSummaryCountsByStateAndLabelInInputOrder) {
  const BatchDir dir = make(3, 3);
  auto fd = dir.lock_chunk(0);
  BatchDir::append_result(fd->get(), result("k2", "failed"));
  BatchDir::append_result(fd->get(), result("k0", "succeeded"));
  const json s = summarize(dir, false);
  EXPECT_EQ(s["state"], "incomplete");
  EXPECT_EQ(s["done"], 2);
  EXPECT_EQ(s["by_state"], (json{{"failed", 1}, {"succeeded", 1}}));
  EXPECT_EQ(s["by_label"]["group=a"], (json{{"failed", 1}, {"succeeded", 1}}));
  EXPECT_EQ(s["failures"][0]["key"], "k2");
  EXPECT_EQ(s["duration_ms"]["histogram"], (json::array({{{"le_ms", 16}, {"count", 2}}})));
  EXPECT_NE(summary_html(s).find("<svg"), std::string::npos);
  EXPECT_EQ(summary_html(s).find("<script"), std::string::npos);
}

// A failure shows the last lines of its output: stderr's when it has any, else stdout's (Maven prints its errors
// there); bounded, and nothing a run wrote reaches the terminal as a control character.
TEST_F(BatchDirTest, TheSummaryShowsTheLastLinesOfEachFailuresOutput) {
  const BatchDir dir = make(3, 3);
  auto fd = dir.lock_chunk(0);
  BatchResult noisy = result("k0", "failed");
  noisy.run = {{"result", {{"stderr", {{"tail_lines", {"e1", "e2", "", "e3", "e4", "e5", "e6\x1b[2J", std::string(500, 'x')}}}},
                           {"stdout", {{"tail_lines", {"o1"}}}}}}};
  BatchResult maven = result("k1", "failed");
  maven.run = {{"result", {{"stderr", {{"tail_lines", json::array()}, {"tail", ""}}},
                           {"stdout", {{"tail", "[INFO] Building\n[ERROR] BUILD FAILURE\n"}}}}}};
  BatchResult silent = result("k2", "failed");
  for (const BatchResult& r : {noisy, maven, silent}) BatchDir::append_result(fd->get(), r);
  const json s = summarize(dir, false);
  ASSERT_EQ(s["failures"].size(), 3u);
  EXPECT_EQ(s["failures"][0]["output_tail"],
            (json{{"stream", "stderr"}, {"lines", {"e3", "e4", "e5", "e6?[2J", std::string(300, 'x')}}}));
  EXPECT_EQ(s["failures"][1]["output_tail"],
            (json{{"stream", "stdout"}, {"lines", {"[INFO] Building", "[ERROR] BUILD FAILURE"}}}));
  EXPECT_EQ(s["failures"][2]["output_tail"], nullptr);
  const std::string text = summary_text(s);
  EXPECT_NE(text.find("    stderr| e5\n"), std::string::npos) << text;
  EXPECT_NE(text.find("    stdout| [ERROR] BUILD FAILURE\n"), std::string::npos) << text;
  EXPECT_NE(summary_html(s).find("<pre>[INFO] Building\n[ERROR] BUILD FAILURE\n</pre>"), std::string::npos);
}

TEST_F(BatchDirTest, InputIsReadByLineAndRefusedByLine) {
  write(root_ / "a.jsonl", "# comment\n{\"key\": \"x\", \"argv\": [\"true\"]}\n\n{\"argv\": [\"false\"]}\n");
  const auto specs = read_input((root_ / "a.jsonl").string());
  ASSERT_EQ(specs.size(), 2u);
  EXPECT_EQ(specs[0].key, "x");
  EXPECT_FALSE(specs[0].body.contains("key"));
  EXPECT_EQ(specs[1].key, "a.jsonl:4");
  fs::create_directory(root_ / "d");
  write(root_ / "d" / "one.json", "{\"argv\": [\"true\"]}");
  write(root_ / "d" / "two.jsonl", "{\"argv\": [\"true\"]}\n");
  write(root_ / "d" / "ignored.txt", "not a spec");
  const auto from_dir = read_input((root_ / "d").string());
  ASSERT_EQ(from_dir.size(), 2u);
  EXPECT_EQ(from_dir[0].key, "one");
  EXPECT_EQ(from_dir[1].key, "two.jsonl:1");
  write(root_ / "b.jsonl", "{\"argv\": [\"true\"]}\n\"text\"\n");
  try {
    read_input((root_ / "b.jsonl").string());
    FAIL() << "accepted a line that is not an object";
  } catch (const std::runtime_error& e) {
    EXPECT_STREQ(e.what(), "b.jsonl:2: a spec must be a JSON object");
  }
  write(root_ / "empty.jsonl", "\n# nothing\n");
  EXPECT_THROW(read_input((root_ / "empty.jsonl").string()), std::runtime_error);
  EXPECT_FALSE(valid_key(std::string(129, 'a')));
  EXPECT_FALSE(valid_key("a b"));
  EXPECT_TRUE(valid_key("repo/module@v1.2:test+x"));
}

TEST(ManifestDigest, LabelsDoNotCountAndEverythingElseDoes) {
  const json a = {{"argv", {"true"}}, {"labels", {{"x", "1"}}}};
  const json b = {{"labels", {{"x", "2"}}}, {"argv", {"true"}}};
  EXPECT_EQ(manifest_digest(a), manifest_digest(b));
  EXPECT_NE(manifest_digest(a), manifest_digest(json{{"argv", {"true"}}, {"env", {{"A", "1"}}}}));
  EXPECT_EQ(manifest_digest(json{{"spec", {{"argv", {"true"}}, {"labels", {{"x", "1"}}}}}, {"pinned", json::object()}}),
            manifest_digest(json{{"spec", {{"argv", {"true"}}}}, {"pinned", json::object()}}));
}

// What a batch exports for other nodes: the spec's image, then its layers, or a stored run's pins; and the
// paths they go to, built only from a digest's own hex.
TEST(BatchObjects, ImagesComeFromTheSpecOrTheRunsPinsAndPathsOnlyFromDigests) {
  const std::string a = "sha256:" + std::string(64, 'a'), b = "sha256:" + std::string(64, 'b');
  EXPECT_EQ(image_digests(json{{"image", a}, {"layers", {b, "name:tag"}}, {"argv", {"true"}}}),
            (std::vector<std::string>{a, b}));
  EXPECT_TRUE(image_digests(json{{"image", "host"}, {"argv", {"true"}}}).empty());
  EXPECT_EQ(image_digests(json{{"spec", {{"image", "name:tag"}}}, {"pinned", {{"image_digests", {b, a}}}}}),
            (std::vector<std::string>{b, a}));
  EXPECT_EQ(image_object("/r", a), fs::path("/r/objects/images/" + std::string(64, 'a') + ".tar"));
  EXPECT_EQ(snapshot_object("/r", b), fs::path("/r/objects/snapshots/" + std::string(64, 'b') + ".tar"));
  EXPECT_THROW(image_object("/r", "sha256:../../../etc/passwd"), std::runtime_error);
  EXPECT_THROW(snapshot_object("/r", "sha256:" + std::string(64, 'A')), std::runtime_error);
}

}  // namespace
}  // namespace capsule::client::batch
