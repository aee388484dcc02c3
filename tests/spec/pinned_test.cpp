// Pinned's new fields (kernel, capsule, host_image, replayable, dependencies) round-trip, older stored rows
// still read, and the run object derives pinned.dependencies and replay_of from what the run recorded.
#include <gtest/gtest.h>

#include "http/response.h"
#include "spec/pinned.h"
#include "spec/run_object.h"

namespace capsule::spec {
namespace {

using nlohmann::json;

const std::string kHex(64, 'c');

TEST(PinnedFields, RoundTripKernelCapsuleHostImageReplayabilityAndDependencies) {
  Pinned pinned;
  pinned.policy_sha256 = "sha256:" + kHex;
  pinned.kernel = "6.1.0-13-amd64";
  pinned.capsule = "0.1.0";
  pinned.host_image = "sha256:" + kHex;
  pinned.not_replayable = std::vector<std::string>{"the host image is the host's /usr"};
  pinned.dependencies = {{"/pypi/x", kHex, 12}};
  const json printed = to_json(pinned);
  EXPECT_EQ(printed["replayable"], false);
  EXPECT_EQ(printed["not_replayable"], json::array({"the host image is the host's /usr"}));
  EXPECT_EQ(printed["dependencies"], json::array({{{"url", "/pypi/x"}, {"sha256", kHex}, {"size", 12}}}));
  EXPECT_EQ(to_json(parse_pinned(printed)), printed);
  pinned.not_replayable = std::vector<std::string>{};
  EXPECT_EQ(to_json(pinned)["replayable"], true);
}

TEST(PinnedFields, AnOlderStoredShapeStillReadsWithDefaults) {
  const json old = {{"image_digests", json::array()}, {"image_choice", json::object()},
                    {"policy_sha256", "sha256:" + kHex}, {"workspace_digest", nullptr},
                    {"cutoff", nullptr}, {"toolchains", json::object()}};
  const Pinned pinned = parse_pinned(old);
  EXPECT_FALSE(pinned.kernel);
  EXPECT_FALSE(pinned.not_replayable);
  EXPECT_TRUE(pinned.dependencies.empty());
  EXPECT_TRUE(to_json(pinned)["replayable"].is_null()) << "unknown, not claimed replayable";
  EXPECT_NO_THROW(parse_pinned(json::object()));
}

TEST(PinnedFields, BadValuesAreRefusedByName) {
  auto refused = [](json body, const std::string& field) {
    try {
      parse_pinned(body);
      ADD_FAILURE() << "accepted " << body.dump();
    } catch (const http::ApiError& e) {
      EXPECT_NE(std::string(e.what()).find(field), std::string::npos) << e.what();
    }
  };
  refused({{"host_image", "nope"}}, "pinned.host_image");
  refused({{"replayable", "yes"}}, "pinned.replayable");
  refused({{"dependencies", json::array({{{"url", "/x"}, {"sha256", "zz"}, {"size", 1}}})}}, "pinned.dependencies[0].sha256");
  refused({{"dependencies", json::array({{{"url", "/x"}, {"sha256", kHex}, {"size", -1}}})}}, "pinned.dependencies[0].size");
  refused({{"dependencies", json::array({{{"url", "/x"}, {"sha256", kHex}, {"size", 1}, {"more", 1}}})}}, "more");
}

TEST(PinnedFields, DependenciesAreTheServedObjectsOncePerUrl) {
  const json served = json::array({{{"url", "/a"}, {"sha256", kHex}, {"size", 1}, {"source", "upstream"}},
                                   {{"url", "/b"}, {"sha256", kHex}, {"size", 2}, {"source", "cache"}},
                                   {{"url", "/a"}, {"sha256", kHex}, {"size", 1}, {"source", "cache"}}});
  const auto dependencies = dependencies_of(served);
  ASSERT_EQ(dependencies.size(), 2u);
  EXPECT_EQ(dependencies[0].url, "/a");
  EXPECT_EQ(dependencies[1].size, 2u);
}

TEST(RunObjectReplay, DependenciesComeFromProxyServedAndReplayOfFromTheLabels) {
  RunObject run;
  run.id = "r2";
  run.pinned = to_json(Pinned{});
  run.labels = {{"team", "a"}, {kReplayOfLabel, "r1"}, {kReplayVaryLabel, "cpus,order"}};
  run.outcome = json{{"proxy", {{"served", json::array({{{"url", "/a"}, {"sha256", kHex}, {"size", 1}, {"source", "cache"}}})}}}};
  const json out = run.to_json();
  EXPECT_EQ(out["pinned"]["dependencies"], json::array({{{"url", "/a"}, {"sha256", kHex}, {"size", 1}}}));
  EXPECT_EQ(out["replay_of"], "r1");
  EXPECT_EQ(out["replay_vary"], json::array({"cpus", "order"}));
  run.labels = json::object();
  run.outcome.reset();
  EXPECT_TRUE(run.to_json()["replay_of"].is_null());
  EXPECT_TRUE(run.to_json()["replay_vary"].is_null());
  EXPECT_EQ(run.to_json()["pinned"]["dependencies"], json::array());
}

}  // namespace
}  // namespace capsule::spec
