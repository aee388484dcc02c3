// The workspace's snapshot alternative and `reproducible` in RunSpec and SessionSpec: parsed, refused with the
// field named, and printed back so the stored spec is a valid request again.
#include <gtest/gtest.h>

#include "http/error_status.h"
#include "http/response.h"
#include "spec/run_spec.h"
#include "spec/session_spec.h"

namespace capsule::spec {
namespace {

using nlohmann::json;

const std::string kDigest = "sha256:" + std::string(64, 'a');

std::string snapshot_error_of(const json& body) {
  try {
    parse_run_spec(body, default_limit_policy());
  } catch (const http::ApiError& e) {
    EXPECT_EQ(http::status_for(e.code()), 400u);
    return e.what();
  }
  return "no error";
}

TEST(WorkspaceSnapshot, ParsesAndPrintsBack) {
  const RunSpec spec = parse_run_spec(json{{"argv", {"true"}}, {"workspace", {{"snapshot", kDigest}}}}, default_limit_policy());
  ASSERT_TRUE(spec.workspace);
  EXPECT_EQ(spec.workspace->snapshot, kDigest);
  EXPECT_TRUE(spec.workspace->path.empty());
  EXPECT_TRUE(spec.cow_workspace());
  const json printed = to_json(spec);
  EXPECT_EQ(printed["workspace"], json({{"snapshot", kDigest}, {"mode", "cow"}}));
  EXPECT_FALSE(printed.contains("reproducible"));
  EXPECT_EQ(to_json(parse_run_spec(printed, default_limit_policy())), printed);
}

TEST(WorkspaceSnapshot, RefusesWhatIsNotOneSnapshotDigest) {
  EXPECT_NE(snapshot_error_of(json{{"argv", {"x"}}, {"workspace", {{"snapshot", "sha256:12"}}}}).find("workspace.snapshot"),
            std::string::npos);
  EXPECT_NE(snapshot_error_of(json{{"argv", {"x"}}, {"workspace", {{"snapshot", kDigest}, {"path", "/x"}}}}).find("workspace"),
            std::string::npos);
  EXPECT_NE(snapshot_error_of(json{{"argv", {"x"}}, {"workspace", {{"mode", "cow"}}}}).find("path or snapshot"), std::string::npos);
  EXPECT_NE(snapshot_error_of(json{{"argv", {"x"}}, {"workspace", {{"snapshot", kDigest}, {"mode", "rw"}}}}).find("always cow"),
            std::string::npos);
}

TEST(Reproducible, NeedsACopyOnWriteWorkspaceAndRoundTrips) {
  const json body = {{"argv", {"true"}}, {"workspace", "/srv/p"}, {"reproducible", true}};
  const RunSpec spec = parse_run_spec(body, default_limit_policy());
  EXPECT_TRUE(spec.reproducible);
  const json printed = to_json(spec);
  EXPECT_EQ(printed["reproducible"], true);
  EXPECT_TRUE(parse_run_spec(printed, default_limit_policy()).reproducible);
  EXPECT_NE(snapshot_error_of(json{{"argv", {"x"}}, {"reproducible", true}}).find("reproducible"), std::string::npos);
  EXPECT_NE(snapshot_error_of(json{{"argv", {"x"}}, {"workspace", {{"path", "/p"}, {"mode", "ro"}}}, {"reproducible", true}})
                .find("reproducible"),
            std::string::npos);
  EXPECT_NE(snapshot_error_of(json{{"argv", {"x"}}, {"workspace", "/p"}, {"reproducible", "yes"}}).find("reproducible"),
            std::string::npos);
}

TEST(WorkspaceSnapshot, SessionsShareTheWorkspace) {
  const SessionSpec spec = parse_session_spec(json{{"workspace", {{"snapshot", kDigest}}}}, default_limit_policy());
  ASSERT_TRUE(spec.environment.workspace);
  EXPECT_EQ(spec.environment.workspace->snapshot, kDigest);
}

}  // namespace
}  // namespace capsule::spec
