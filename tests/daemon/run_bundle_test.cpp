// Audit bundles without a daemon: the tar reader refuses hostile entries, and import_bundle checks bundle.json
// against the files and the run's pins, storing nothing (no row, no blob, no staging dir) when anything is off.
#include <archive.h>
#include <archive_entry.h>
#include <fcntl.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <functional>

#include "base/unique_fd.h"
#include "daemon/bundle/bundle_import.h"
#include "daemon/bundle/bundle_tar.h"
#include "http/response.h"
#include "store/digest.h"
#include "tests/support/scratch_dir_test.h"

namespace capsule::daemon {
namespace {

using nlohmann::json;
namespace fs = std::filesystem;

struct RawEntry {
  RawEntry(std::string entry_name, std::string bytes, unsigned entry_type = AE_IFREG, std::string target = "",
           bool is_hardlink = false)
      : name(std::move(entry_name)), content(std::move(bytes)), type(entry_type), link(std::move(target)),
        hardlink(is_hardlink) {}
  std::string name;
  std::string content;
  unsigned type;
  std::string link;  // symlink target, or hard link source
  bool hardlink;
};

// A tar written with libarchive as it is given, names and types unchecked: what a hostile bundle can hold.
void write_raw_tar(const std::string& path, const std::vector<RawEntry>& entries) {
  struct archive* tar = archive_write_new();
  archive_write_set_format_pax_restricted(tar);
  ASSERT_EQ(archive_write_open_filename(tar, path.c_str()), ARCHIVE_OK);
  for (const RawEntry& raw : entries) {
    struct archive_entry* entry = archive_entry_new();
    archive_entry_set_pathname(entry, raw.name.c_str());
    archive_entry_set_filetype(entry, raw.type);
    archive_entry_set_perm(entry, 0644);
    if (raw.hardlink) archive_entry_set_hardlink(entry, raw.link.c_str());
    else if (raw.type == AE_IFLNK) archive_entry_set_symlink(entry, raw.link.c_str());
    const bool has_data = raw.type == AE_IFREG && !raw.hardlink;
    archive_entry_set_size(entry, has_data ? static_cast<la_int64_t>(raw.content.size()) : 0);
    archive_write_header(tar, entry);
    if (has_data) archive_write_data(tar, raw.content.data(), raw.content.size());
    archive_entry_free(entry);
  }
  archive_write_close(tar);
  archive_write_free(tar);
}

std::string hex_of(const std::string& bytes) { return store::sha256_of(bytes).hex(); }

json file_entry(const std::string& path, const std::string& bytes) {
  return {{"path", path}, {"sha256", hex_of(bytes)}, {"size", bytes.size()}};
}

class BundleTest : public testing::ScratchDirTest {
 protected:
  void SetUp() override {
    ScratchDirTest::SetUp();
    images_ = std::make_unique<images::ImageStore>(dir_ + "/store");
    proxy_blobs_ = std::make_unique<store::BlobStore>(dir_ + "/proxy");
    stores_ = std::make_unique<BundleStores>(*images_, *proxy_blobs_, dir_ + "/staging");
    logs_ = std::make_unique<LogStore>(dir_ + "/logs");
  }

  std::map<std::string, StagedEntry> read(const std::string& tar, const BundleLimits& limits = {}) {
    base::UniqueFd fd(open(tar.c_str(), O_RDONLY | O_CLOEXEC));
    const fs::path staging = stores_->make_staging();
    return read_bundle_tar(fd.get(), staging, limits);
  }

  // The reader's refusal of `entries` as a bundle, or "" when it accepted them.
  std::string refusal(const std::vector<RawEntry>& entries, const BundleLimits& limits = {}) {
    write_raw_tar(dir_ + "/hostile.tar", entries);
    try {
      read(dir_ + "/hostile.tar", limits);
    } catch (const http::ApiError& e) {
      return e.code() + ": " + e.what();
    }
    return "";
  }

  // A finished host-image run that received one dependency object, as bundle.json holds it.
  json manifest() const {
    const json served = json::array({{{"url", "/pypi/simple/six/"}, {"sha256", hex_of(kDependency)},
                                      {"size", kDependency.size()}, {"source", "upstream"}}});
    const json run = {{"id", "0123456789abcdef"},
                      {"state", "succeeded"},
                      {"labels", {{"team", "audit"}}},
                      {"peer", {{"uid", 4242}, {"pid", 7}}},
                      {"times", {{"created", 1000}, {"started", 2000}, {"finished", 3000}}},
                      {"spec", {{"argv", {"true"}}, {"labels", {{"team", "audit"}}}}},
                      {"pinned", {{"image_digests", json::array()},
                                  {"dependencies", {{{"url", "/pypi/simple/six/"}, {"sha256", hex_of(kDependency)},
                                                     {"size", kDependency.size()}}}}}},
                      {"result", {{"exit_code", 0}}},
                      {"proxy", {{"served", served}}}};
    json dependency = file_entry(dependency_entry(hex_of(kDependency)), kDependency);
    dependency["url"] = "/pypi/simple/six/";
    return {{"format", kBundleFormat},
            {"run", run},
            {"images", json::array()},
            {"snapshot", nullptr},
            {"dependencies", {dependency}},
            {"logs", {{"stdout", file_entry(log_entry("stdout"), kStdout)}, {"stderr", file_entry(log_entry("stderr"), "")}}}};
  }

  // Writes the bundle: bundle.json, then the dependency and the logs (plus `extra` entries).
  std::string write_bundle(const json& bundle_json, const std::vector<RawEntry>& extra = {}) {
    std::vector<RawEntry> entries = {{kBundleManifest, bundle_json.dump()},
                                     {dependency_entry(hex_of(kDependency)), kDependency},
                                     {log_entry("stdout"), kStdout},
                                     {log_entry("stderr"), ""}};
    entries.insert(entries.end(), extra.begin(), extra.end());
    const std::string path = dir_ + "/bundle.tar";
    write_raw_tar(path, entries);
    return path;
  }

  json import(const std::string& path) {
    base::UniqueFd fd(open(path.c_str(), O_RDONLY | O_CLOEXEC));
    Caller importer;
    importer.known = true;
    importer.uid = 1000;
    return import_bundle({fd.get(), path, importer, 99}, *stores_, nullptr, ledger_, *logs_, spec::default_limit_policy());
  }

  // The import's refusal code and message; checks that it left nothing behind.
  std::string import_refusal(const std::string& path) {
    std::string out;
    try {
      import(path);
    } catch (const http::ApiError& e) {
      out = e.code() + ": " + e.what();
    }
    EXPECT_FALSE(ledger_.get("0123456789abcdef").has_value());
    EXPECT_FALSE(proxy_blobs_->has(store::Digest::from_hex(hex_of(kDependency))));
    EXPECT_FALSE(logs_->exists("0123456789abcdef", Stream::kStdout));
    EXPECT_TRUE(fs::is_empty(dir_ + "/staging")) << "a staging dir was left behind";
    return out;
  }

  const std::string kDependency = "<html>six-1.16.0.tar.gz</html>";
  const std::string kStdout = "hello from the original machine\n";
  std::unique_ptr<images::ImageStore> images_;
  std::unique_ptr<store::BlobStore> proxy_blobs_;
  std::unique_ptr<BundleStores> stores_;
  std::unique_ptr<LogStore> logs_;
  Ledger ledger_{":memory:"};
};

TEST_F(BundleTest, WriterOutputReadsBackWithDigests) {
  const std::string path = dir_ + "/written.tar";
  std::ofstream(dir_ + "/payload", std::ios::binary) << "payload bytes";
  {
    std::ofstream out(path, std::ios::binary);
    BundleTarWriter tar([&](std::string_view chunk) { out.write(chunk.data(), static_cast<std::streamsize>(chunk.size())); });
    tar.add_bytes(kBundleManifest, "{}");
    tar.add_file(image_entry(0), dir_ + "/payload", 13);
    tar.finish();
  }
  const auto entries = read(path);
  ASSERT_EQ(entries.size(), 2u);
  EXPECT_EQ(entries.at("images/0.tar").sha256, hex_of("payload bytes"));
  EXPECT_EQ(entries.at("images/0.tar").size, 13u);
  EXPECT_EQ(entries.at("bundle.json").sha256, hex_of("{}"));
}

TEST_F(BundleTest, ReaderRefusesHostileEntries) {
  EXPECT_NE(refusal({{"../escape", "x"}}).find("invalid_bundle: entry '../escape'"), std::string::npos);
  EXPECT_NE(refusal({{"logs/../../x", "x"}}).find("invalid_bundle"), std::string::npos);
  EXPECT_NE(refusal({{"/etc/passwd", "x"}}).find("invalid_bundle: entry '/etc/passwd'"), std::string::npos);
  EXPECT_NE(refusal({{"link", "", AE_IFLNK, "/etc/shadow"}}).find("not a regular file"), std::string::npos);
  EXPECT_NE(refusal({{"a", "x"}, {"b", "", AE_IFREG, "a", true}}).find("not a regular file"), std::string::npos);
  EXPECT_NE(refusal({{"fifo", "", AE_IFIFO}}).find("not a regular file"), std::string::npos);
  EXPECT_NE(refusal({{"a", "x"}, {"a", "y"}}).find("appears twice"), std::string::npos);
  BundleLimits small;
  small.max_bytes = 10;
  EXPECT_NE(refusal({{"a", "0123456789abc"}}, small).find("bundle_too_large"), std::string::npos);
  small = {};
  small.max_entries = 2;
  EXPECT_NE(refusal({{"a", "1"}, {"b", "2"}, {"c", "3"}}, small).find("more than 2 entries"), std::string::npos);
  std::ofstream(dir_ + "/junk.tar") << "this is not a tar at all, just text that goes on";
  base::UniqueFd fd(open((dir_ + "/junk.tar").c_str(), O_RDONLY | O_CLOEXEC));
  EXPECT_THROW(read_bundle_tar(fd.get(), stores_->make_staging(), {}), http::ApiError);
  EXPECT_EQ(refusal({{"dir", "", AE_IFDIR}, {"dir/file.txt", "ok"}}), "");
}

TEST_F(BundleTest, ImportStoresTheRunAsTheImportersWithItsObjectsAndLogs) {
  const json run = import(write_bundle(manifest()));
  EXPECT_EQ(run["id"], "0123456789abcdef");
  EXPECT_EQ(run["state"], "succeeded");
  EXPECT_EQ(run["peer"]["uid"], 1000);
  EXPECT_EQ(run["times"]["finished"], 3000);
  EXPECT_EQ(run["labels"]["team"], "audit");
  EXPECT_EQ(run["imported"]["from"], dir_ + "/bundle.tar");
  EXPECT_EQ(run["imported"]["peer"]["uid"], 4242);
  EXPECT_EQ(run["pinned"]["dependencies"][0]["sha256"], hex_of(kDependency));
  EXPECT_TRUE(proxy_blobs_->has(store::Digest::from_hex(hex_of(kDependency))));
  EXPECT_EQ(logs_->read_all("0123456789abcdef", Stream::kStdout), kStdout);
  EXPECT_TRUE(fs::is_empty(dir_ + "/staging"));
  try {
    import(write_bundle(manifest()));
    ADD_FAILURE() << "a second import of the same id was accepted";
  } catch (const http::ApiError& e) {
    EXPECT_EQ(e.code(), "run_exists");
  }
}

TEST_F(BundleTest, ImportRefusesBundlesThatDoNotCheckOut) {
  json bad = manifest();
  bad["dependencies"][0]["path"] = "../../etc/passwd";
  EXPECT_NE(import_refusal(write_bundle(bad)).find("'../../etc/passwd' is not a file of the bundle"), std::string::npos);
  bad = manifest();
  bad["logs"]["stdout"]["path"] = "bundle.json";
  EXPECT_NE(import_refusal(write_bundle(bad)).find("is not a file of the bundle"), std::string::npos);
  bad = manifest();
  bad["logs"]["stdout"]["sha256"] = hex_of("something else");
  EXPECT_NE(import_refusal(write_bundle(bad)).find("logs.stdout: 'logs/stdout' is"), std::string::npos);
  EXPECT_NE(import_refusal(write_bundle(manifest(), {{"extra/file", "x"}})).find("'extra/file': not named"),
            std::string::npos);
  bad = manifest();
  bad["dependencies"] = json::array();
  EXPECT_NE(import_refusal(write_bundle(bad)).find("which the bundle does not hold"), std::string::npos);
  bad = manifest();
  bad["run"]["id"] = "../../etc";
  EXPECT_NE(import_refusal(write_bundle(bad)).find("cannot name a run"), std::string::npos);
  bad = manifest();
  bad["run"]["state"] = "running";
  EXPECT_NE(import_refusal(write_bundle(bad)).find("not the state of a finished run"), std::string::npos);
  bad = manifest();
  bad["run"]["spec"] = {{"argv", 7}};
  EXPECT_NE(import_refusal(write_bundle(bad)).find("invalid_bundle: bundle.json run: "), std::string::npos);
  bad = manifest();
  bad["format"] = "capsule-bundle/99";
  EXPECT_NE(import_refusal(write_bundle(bad)).find("format"), std::string::npos);
  bad = manifest();
  bad["images"] = {{{"digest", "sha256:" + std::string(64, 'a')}, {"path", "images/0.tar"}}};
  EXPECT_NE(import_refusal(write_bundle(bad)).find("pinned images"), std::string::npos);
  bad = manifest();
  bad["run"]["proxy"]["served"].push_back({{"url", "/pypi/simple/other/"}, {"sha256", hex_of("other")}, {"size", 5}});
  EXPECT_NE(import_refusal(write_bundle(bad)).find("received /pypi/simple/other/"), std::string::npos);
  bad = manifest();
  json nested = "deep";
  for (int i = 0; i < 100; ++i) nested = json::array({nested});
  bad["run"]["result"]["detail"] = nested;
  EXPECT_NE(import_refusal(write_bundle(bad)).find("nested deeper than 64 levels"), std::string::npos);
  // A dependency whose bytes are not its sha256 (bundle.json agreeing with the tar but not with the run's pins).
  bad = manifest();
  const std::string forged = "forged bytes";
  bad["dependencies"][0] = file_entry(dependency_entry(hex_of(kDependency)), forged);
  std::vector<RawEntry> entries = {{kBundleManifest, bad.dump()}, {dependency_entry(hex_of(kDependency)), forged},
                                   {log_entry("stdout"), kStdout}, {log_entry("stderr"), ""}};
  write_raw_tar(dir_ + "/forged.tar", entries);
  EXPECT_NE(import_refusal(dir_ + "/forged.tar").find("invalid_bundle"), std::string::npos);
}

}  // namespace
}  // namespace capsule::daemon
