// Resolution of an accepted run: a workspace into a copy-on-write overlay, ro or rw bind; images stacked
// with `layers` or a toolchain layer, their merged environment and HOME; pins and their refusals.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <memory>

#include "http/error_status.h"
#include "http/response.h"
#include "daemon/resolve.h"
#include "store/digest.h"
#include "tests/support/test_support.h"

namespace capsule::daemon {
namespace {

using nlohmann::json;

Submission submission(const json& body) {
  Submission run;
  run.spec = spec::parse_run_spec(body, spec::default_limit_policy());
  return run;
}

TEST(RunSpecResolve, WorkspaceModesAndNames) {
  const std::string dir = "/tmp/capsule-test/runspec-" + std::to_string(getpid());
  std::filesystem::create_directories(dir + "/ws");
  ResolveContext context{dir + "/images", std::string(CAPSULE_SOURCE_DIR) + "/policies", dir + "/run"};
  Submission run = submission(json{{"argv", {"true"}}, {"workspace", dir + "/ws"}, {"env", {{"LANG", "C"}}}});
  spec::RunSpec& spec = run.spec;
  sandbox::SandboxSpec cow = resolve_run(run, context);
  ASSERT_EQ(cow.overlays.size(), 1u);
  EXPECT_EQ(cow.overlays[0].target, "/workspace");
  EXPECT_EQ(cow.overlays[0].upper_dir, dir + "/run/upper");
  EXPECT_EQ(cow.cwd, "/workspace");
  EXPECT_NE(std::find(cow.env.begin(), cow.env.end(), "LANG=C"), cow.env.end());
  EXPECT_FALSE(cow.seccomp_profile.empty());

  EXPECT_EQ(run.pinned.policy_sha256.rfind("sha256:", 0), 0u) << "the policy is pinned by its digest";
  spec.workspace->mode = spec::WorkspaceMode::kReadOnly;
  sandbox::SandboxSpec ro = resolve_run(run, context);
  EXPECT_TRUE(ro.overlays.empty());
  EXPECT_TRUE(ro.mounts.back().read_only);
  EXPECT_EQ(ro.mounts.back().target, "/workspace");

  spec.workspace->path = dir + "/missing";
  EXPECT_THROW(resolve_run(run, context), http::ApiError);
  spec.workspace.reset();
  // A stored run's pins: a policy whose text changed since is refused, not run under the new one.
  run.pins_given = true;
  run.pinned.policy_sha256 = store::sha256_of("another policy").str();
  try {
    resolve_run(run, context);
    ADD_FAILURE() << "a changed policy was accepted for pinned runs";
  } catch (const http::ApiError& e) {
    EXPECT_EQ(e.code(), "pin_mismatch");
    EXPECT_EQ(http::status_for(e.code()), 409u);
  }
  run.pins_given = false;
  spec.policy = "nonexistent";
  try {
    resolve_run(run, context);
    ADD_FAILURE() << "unknown policy accepted";
  } catch (const http::ApiError& e) {
    EXPECT_EQ(http::status_for(e.code()), 404u);
  }
  spec.policy = "default";
  spec.image = "python:3.12";
  EXPECT_THROW(resolve_run(run, context), http::ApiError);
  std::filesystem::remove_all(dir);
}

// A store with a base rootfs (an /etc/passwd with root and tester) and a layer holding /opt/tool, with its own
// PATH and toolchain labels, the way toolchain-layer.sh's outputs are imported.
class RunSpecLayers : public ::testing::Test {
 protected:
  void SetUp() override {
    namespace fs = std::filesystem;
    fs::create_directories(dir_ + "/base/etc");
    fs::create_directories(dir_ + "/layer/opt/tool/bin");
    std::ofstream(dir_ + "/base/etc/passwd") << "root:x:0:0:root:/root:/bin/sh\ntester:x:1000:1000::/home/tester:/bin/sh\n";
    std::ofstream(dir_ + "/layer/opt/tool/bin/tool") << "#!/bin/sh\necho tool\n";
    store_ = std::make_unique<images::ImageStore>(dir_ + "/store");
    images::RootfsOptions base;
    base.labels = {{"org.capsule.toolchain.python", "3.11.2"}};
    base_ = store_->import_rootfs(dir_ + "/base", "test/base:1", base).str();
    images::RootfsOptions tester;
    tester.user = "tester";
    tester_base_ = store_->import_rootfs(dir_ + "/base", "test/base:tester", tester).str();
    images::RootfsOptions layer;
    layer.env = {"PATH=/opt/tool/bin", "TOOL_HOME=/opt/tool"};
    layer.labels = {{"org.capsule.toolchain.tool", "2.1.0"}, {"org.capsule.layer.base", "test/base:1"}};
    layer_ = store_->import_rootfs(dir_ + "/layer", "test/tool:2", layer).str();
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }

  sandbox::SandboxSpec resolve(const json& body) {
    Submission run = submission(body);
    pin_images(run, ImageCatalog{store_.get(), nullptr, {}});
    pinned_ = run.pinned;
    return resolve_run(
        run, ResolveContext{dir_ + "/images", std::string(CAPSULE_SOURCE_DIR) + "/policies", dir_ + "/run", store_.get()});
  }
  std::string env_of(const sandbox::SandboxSpec& out, const std::string& name) {
    for (const auto& entry : out.env) {
      if (entry.rfind(name + "=", 0) == 0) return entry.substr(name.size() + 1);
    }
    return "<unset>";
  }
  std::vector<std::string> layer_dirs(const std::string& digest) { return store_->inspect(digest).layer_dirs; }

  const std::string dir_ = "/tmp/capsule-test/runspec-layers-" + std::to_string(getpid());
  std::unique_ptr<images::ImageStore> store_;
  std::string base_, tester_base_, layer_;
  spec::Pinned pinned_;
};

TEST_F(RunSpecLayers, LayersStackInOrderWithMergedEnvAndHome) {
  const sandbox::SandboxSpec out = resolve({{"image", "test/base:1"}, {"layers", {"test/tool:2"}}, {"argv", {"tool"}}});
  EXPECT_EQ(pinned_.image_digests, (std::vector<std::string>{base_, layer_}));
  std::vector<std::string> expected = layer_dirs(layer_);
  for (const auto& dir : layer_dirs(base_)) expected.push_back(dir);
  EXPECT_EQ(out.rootfs_layers, expected) << "topmost first: the layer over the base";
  EXPECT_EQ(env_of(out, "PATH"), "/opt/tool/bin:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin");
  EXPECT_EQ(env_of(out, "TOOL_HOME"), "/opt/tool");
  EXPECT_EQ(env_of(out, "HOME"), "/root") << "root's passwd entry";
  EXPECT_EQ(out.uid, 0u);

  EXPECT_EQ(env_of(resolve({{"image", "test/base:1"}, {"argv", {"x"}}, {"env", {{"HOME", "/w"}}}}), "HOME"), "/w");
  const sandbox::SandboxSpec tester = resolve({{"image", "test/base:tester"}, {"layers", {layer_}}, {"argv", {"x"}}});
  EXPECT_EQ(env_of(tester, "HOME"), "/home/tester");
  EXPECT_EQ(tester.uid, 1000u);
  EXPECT_EQ(tester.gid, 1000u);
  EXPECT_EQ(spec::to_json(pinned_)["image_digests"], json::array({tester_base_, layer_}));
}

TEST_F(RunSpecLayers, ToolchainsPickTheLayerWithItsBase) {
  const sandbox::SandboxSpec out = resolve({{"toolchains", {{"tool", "2"}}}, {"argv", {"tool"}}});
  EXPECT_EQ(pinned_.toolchains, (std::map<std::string, std::string>{{"tool", "2.1.0"}}));
  EXPECT_EQ(spec::to_json(pinned_)["image_digests"], json::array({base_, layer_}));
  EXPECT_EQ(pinned_.image_choice["provided"], json({{"tool", "2.1.0"}}));
  EXPECT_EQ(pinned_.image_choice["images"],
            json::array({{{"ref", "test/base:1"}, {"digest", base_}}, {{"ref", "test/tool:2"}, {"digest", layer_}}}));
  EXPECT_EQ(env_of(out, "PATH").rfind("/opt/tool/bin:", 0), 0u) << env_of(out, "PATH");

  // Explicit layers go on top of the toolchain's. The stack also provides the base's python, but the base alone
  // is preferred at equal versions.
  resolve({{"toolchains", {{"tool", "2"}}}, {"layers", {"test/base:tester"}}, {"argv", {"tool"}}});
  EXPECT_EQ(spec::to_json(pinned_)["image_digests"], json::array({base_, layer_, tester_base_}));
  resolve({{"toolchains", {{"python", "3.11"}}}, {"argv", {"python3"}}});
  EXPECT_EQ(spec::to_json(pinned_)["image_digests"], json::array({base_}));
  EXPECT_EQ(pinned_.image_choice["images"], json::array({{{"ref", "test/base:1"}, {"digest", base_}}}));
}

TEST_F(RunSpecLayers, UnknownLayersAre404NamingTheField) {
  try {
    resolve({{"image", "test/base:1"}, {"layers", {"test/tool:2", "test/nope:1"}}, {"argv", {"x"}}});
    ADD_FAILURE() << "an unknown layer was accepted";
  } catch (const http::ApiError& e) {
    EXPECT_EQ(http::status_for(e.code()), 404u);
    EXPECT_EQ(e.code(), "image_not_found");
    EXPECT_NE(std::string(e.what()).find("layers[1]: 'test/nope:1' is not installed"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace capsule::daemon
