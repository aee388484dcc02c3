// `capsule snapshot create`'s source argument (DIR, TAR, REPO@REV, --git/--rev) -> the POST /v1/snapshots body,
// and `capsule run --workspace-snapshot / --reproducible` -> the run body.
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

#include "client/cli_args.h"
#include "client/cli_run.h"
#include "client/cli_snapshot.h"

namespace capsule::client {
namespace {

using nlohmann::json;
namespace fs = std::filesystem;

class SnapshotArgs : public ::testing::Test {
 protected:
  void SetUp() override {
    char pattern[] = "/tmp/snapshot-args-XXXXXX";
    ASSERT_NE(mkdtemp(pattern), nullptr);
    dir_ = pattern;
  }
  void TearDown() override { fs::remove_all(dir_); }

  json body(const std::string& source, const std::string& git = "", const std::string& rev = "") const {
    SnapshotCommands commands;
    commands.source = source;
    commands.git = git;
    commands.rev = rev;
    return snapshot_create_body(commands);
  }
  fs::path dir_;
};

TEST_F(SnapshotArgs, SourcesByWhatIsOnDisk) {
  fs::create_directories(dir_ / "repo");
  fs::create_directories(dir_ / "odd@name");
  std::ofstream(dir_ / "t.tar") << "x";
  EXPECT_EQ(body((dir_ / "repo").string()), json({{"dir", (dir_ / "repo").string()}}));
  EXPECT_EQ(body((dir_ / "t.tar").string()), json({{"tar", (dir_ / "t.tar").string()}}));
  EXPECT_EQ(body((dir_ / "repo").string() + "@v1.2"), json({{"git", (dir_ / "repo").string()}, {"rev", "v1.2"}}));
  EXPECT_EQ(body((dir_ / "odd@name").string()), json({{"dir", (dir_ / "odd@name").string()}}))
      << "an existing directory wins over REPO@REV";
  EXPECT_EQ(body("", (dir_ / "odd@name").string(), "main"), json({{"git", (dir_ / "odd@name").string()}, {"rev", "main"}}));
  EXPECT_THROW(body((dir_ / "absent").string()), std::invalid_argument);
  EXPECT_THROW(body((dir_ / "absent").string() + "@main"), std::invalid_argument);
  EXPECT_THROW(body("", (dir_ / "repo").string(), ""), std::invalid_argument);
  EXPECT_THROW(body(""), std::invalid_argument);
}

TEST(SnapshotRunFlags, WorkspaceSnapshotAndReproducible) {
  const std::string digest = "sha256:" + std::string(64, 'a');
  CLI::App app{"test"};
  RunOptions options;
  add_run_flags(app, options);
  app.parse(std::vector<std::string>{"--reproducible", digest, "--workspace-snapshot"});
  options.argv = {"true"};
  const json body = build_run_body(options);
  EXPECT_EQ(body["workspace"], json({{"snapshot", digest}}));
  EXPECT_EQ(body["reproducible"], true);
  options.workspace = "/srv/p";
  EXPECT_THROW(build_run_body(options), std::invalid_argument);
}

TEST(SnapshotTable, OneLinePerSnapshot) {
  const json snapshots = json::parse(R"([{"digest": "sha256:0123456789abcdef0123", "size": 10240, "files": 3,
    "created": "2026-01-02T03:04:05Z", "source": {"git": "/r", "rev": "main", "commit": "abcdef0123456789"}}])");
  const std::string table = format_snapshots_table(snapshots);
  EXPECT_NE(table.find("sha256:0123456789ab "), std::string::npos) << table;
  EXPECT_NE(table.find("git /r@main (abcdef012345)"), std::string::npos) << table;
}

}  // namespace
}  // namespace capsule::client
