// RunSpec parsing: defaults, clamping to the daemon's maxima, unit strings, and 400 errors that name
// the field; resolution of a workspace into a copy-on-write overlay, ro or rw bind; images stacked with
// `layers` or a toolchain layer, their merged environment and HOME.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <memory>

#include "http/error_status.h"
#include "http/response.h"
#include "spec/run_spec.h"

namespace capsule::daemon {
namespace {

using nlohmann::json;

std::string error_of(const json& body) {
  try {
    parse_run_spec(body, default_limit_policy());
  } catch (const http::ApiError& e) {
    EXPECT_EQ(http::status_for(e.code()), 400u);
    return e.what();
  }
  return "no error";
}

TEST(RunSpecParse, DefaultsApply) {
  RunSpec spec = parse_run_spec(json{{"argv", {"true"}}}, default_limit_policy());
  EXPECT_EQ(spec.image, "host");
  EXPECT_EQ(spec.policy, "default");
  EXPECT_EQ(spec.limits.wall_time, std::chrono::minutes(15));
  EXPECT_EQ(spec.limits.pids, 4096u);
  EXPECT_FALSE(spec.workspace_path);
}

TEST(RunSpecParse, UnitsAndNumbersAreAccepted) {
  RunSpec spec = parse_run_spec(
      json{{"argv", {"mvn", "-B", "verify"}},
           {"limits", {{"wall_time", "10m"}, {"memory", "4g"}, {"cpus", 2}, {"pids", 100}, {"cpu_time", 90000}}},
           {"workspace", {{"path", "/srv/project"}, {"mode", "rw"}}},
           {"labels", {{"bench", "java17"}}},
           {"collect", {{"junit", {"target/surefire-reports/*.xml"}}}}},
      default_limit_policy());
  EXPECT_EQ(spec.limits.wall_time, std::chrono::minutes(10));
  EXPECT_EQ(spec.limits.memory_bytes, 4ull << 30);
  EXPECT_EQ(spec.limits.cpu_time, std::chrono::seconds(90));
  EXPECT_EQ(spec.limits.cpus, 2.0);
  EXPECT_EQ(spec.workspace_mode, WorkspaceMode::kReadWrite);
  EXPECT_EQ(spec.labels.at("bench"), "java17");
  EXPECT_EQ(spec.junit_globs.size(), 1u);
}

TEST(RunSpecParse, LimitsAreClampedToTheDaemonMaxima) {
  RunSpec spec = parse_run_spec(json{{"argv", {"true"}}, {"limits", {{"wall_time", "100h"}, {"pids", 1000000}}}},
                                default_limit_policy());
  EXPECT_EQ(spec.limits.wall_time, std::chrono::hours(6));
  EXPECT_EQ(spec.limits.pids, 65536u);
}

TEST(RunSpecParse, ErrorsNameTheField) {
  EXPECT_NE(error_of(json::array()).find("body"), std::string::npos);
  EXPECT_NE(error_of(json{{"env", json::object()}}).find("argv: is required"), std::string::npos);
  EXPECT_NE(error_of(json{{"argv", json::array()}}).find("argv"), std::string::npos);
  EXPECT_NE(error_of(json{{"argv", {1}}}).find("argv[0]: must be a string"), std::string::npos);
  EXPECT_NE(error_of(json{{"argv", {"x"}}, {"bogus", 1}}).find("bogus: unknown field"), std::string::npos);
  EXPECT_NE(error_of(json{{"argv", {"x"}}, {"limits", {{"memory", "4x"}}}}).find("limits.memory"), std::string::npos);
  EXPECT_NE(error_of(json{{"argv", {"x"}}, {"limits", {{"memory", "1k"}}}}).find("limits.memory"), std::string::npos);
  EXPECT_NE(error_of(json{{"argv", {"x"}}, {"limits", {{"speed", 1}}}}).find("limits.speed: unknown field"),
            std::string::npos);
  EXPECT_NE(error_of(json{{"argv", {"x"}}, {"limits", {{"cpus", -1}}}}).find("limits.cpus"), std::string::npos);
  EXPECT_NE(error_of(json{{"argv", {"x"}}, {"workspace", "relative"}}).find("workspace.path"), std::string::npos);
  EXPECT_NE(error_of(json{{"argv", {"x"}}, {"workspace", {{"path", "/x"}, {"mode", "rwx"}}}}).find("workspace.mode"),
            std::string::npos);
  EXPECT_NE(error_of(json{{"argv", {"x"}}, {"network", "host"}}).find("network"), std::string::npos);
  EXPECT_NE(error_of(json{{"argv", {"x"}}, {"policy", "../etc/passwd"}}).find("policy"), std::string::npos);
  EXPECT_NE(error_of(json{{"argv", {"x"}}, {"cwd", "tmp"}}).find("cwd"), std::string::npos);
  EXPECT_NE(error_of(json{{"argv", {"x"}}, {"env", {{"A=B", "c"}}}}).find("env.A=B"), std::string::npos);
  EXPECT_NE(error_of(json{{"argv", {"x"}}, {"collect", {{"junit", {"../x.xml"}}}}}).find("collect.junit"),
            std::string::npos);
  EXPECT_NE(error_of(json{{"argv", {"x"}}, {"labels", {{"a b", "c"}}}}).find("labels.a b"), std::string::npos);
}

// Found by fuzz/fuzz_run_spec.cpp: each was accepted and then misbehaved later.
TEST(RunSpecParse, FuzzFindingsAreRejected) {
  EXPECT_NE(error_of(json{{"argv", {"x"}}, {"limits", {{"wall_time", 18446744073709551615ull}}}})
                .find("limits.wall_time: must be at most 100 years"),
            std::string::npos);
  EXPECT_NE(error_of(json{{"argv", {"x"}}, {"limits", {{"cpu_time", "1000000h"}}}}).find("limits.cpu_time"),
            std::string::npos);
  EXPECT_NE(error_of(json{{"argv", {"x", std::string("a\0b", 3)}}}).find("argv[1]: must not contain a NUL byte"),
            std::string::npos);
  EXPECT_NE(error_of(json{{"argv", {"x"}}, {"env", {{"A", std::string("1\0" "2", 3)}}}}).find("env.A"),
            std::string::npos);
  EXPECT_NE(error_of(json{{"argv", {"x"}}, {"limits", {{"tmp_size", "100b"}}}}).find("limits.tmp_size"),
            std::string::npos);
  EXPECT_NO_THROW(parse_run_spec(json{{"argv", {"cat"}}, {"stdin", std::string("a\0b", 3)}}, default_limit_policy()));
}

TEST(RunSpecParse, LayersAreImageRefsStackedOnAnImportedImage) {
  const std::string digest = "sha256:" + std::string(64, 'a');
  RunSpec spec = parse_run_spec(json{{"argv", {"tool"}}, {"image", "base:1"}, {"layers", {"tools/tool:2", digest}}},
                                default_limit_policy());
  EXPECT_EQ(spec.layers, (std::vector<std::string>{"tools/tool:2", digest}));
  EXPECT_EQ(spec.to_json()["layers"], json::array({"tools/tool:2", digest}));
  EXPECT_EQ(spec.to_json()["image_digests"], json::array()) << "nothing pinned yet";
  spec = parse_run_spec(json{{"argv", {"x"}}, {"toolchains", {{"java", "25"}}}, {"layers", {"data:1"}}},
                        default_limit_policy());
  EXPECT_EQ(spec.layers.size(), 1u);
  EXPECT_TRUE(parse_run_spec(json{{"argv", {"x"}}}, default_limit_policy()).layers.empty());

  EXPECT_NE(error_of(json{{"argv", {"x"}}, {"image", "b:1"}, {"layers", "tool:1"}}).find("layers: must be an array"),
            std::string::npos);
  EXPECT_NE(error_of(json{{"argv", {"x"}}, {"image", "b:1"}, {"layers", {"tool:1", "Bad Ref"}}}).find("layers[1]: "),
            std::string::npos);
  EXPECT_NE(error_of(json{{"argv", {"x"}}, {"image", "b:1"}, {"layers", {"tool:1", 7}}}).find("layers[1]: must be a string"),
            std::string::npos);
  EXPECT_NE(error_of(json{{"argv", {"x"}}, {"layers", {"tool:1"}}}).find("layers: are stacked on an imported image"),
            std::string::npos);
  EXPECT_NE(error_of(json{{"argv", {"x"}}, {"image", "Bad Ref"}}).find("image: "), std::string::npos);
}

TEST(RunSpecResolve, WorkspaceModesAndNames) {
  const std::string dir = "/tmp/capsule-test/runspec-" + std::to_string(getpid());
  std::filesystem::create_directories(dir + "/ws");
  ResolveContext context{dir + "/images", std::string(CAPSULE_SOURCE_DIR) + "/policies", dir + "/run"};
  RunSpec spec = parse_run_spec(json{{"argv", {"true"}}, {"workspace", dir + "/ws"}, {"env", {{"LANG", "C"}}}},
                                default_limit_policy());
  sandbox::SandboxSpec cow = resolve_run_spec(spec, context);
  ASSERT_EQ(cow.overlays.size(), 1u);
  EXPECT_EQ(cow.overlays[0].target, "/workspace");
  EXPECT_EQ(cow.overlays[0].upper_dir, dir + "/run/upper");
  EXPECT_EQ(cow.cwd, "/workspace");
  EXPECT_NE(std::find(cow.env.begin(), cow.env.end(), "LANG=C"), cow.env.end());
  EXPECT_FALSE(cow.seccomp_profile.empty());

  spec.workspace_mode = WorkspaceMode::kReadOnly;
  sandbox::SandboxSpec ro = resolve_run_spec(spec, context);
  EXPECT_TRUE(ro.overlays.empty());
  EXPECT_TRUE(ro.mounts.back().read_only);
  EXPECT_EQ(ro.mounts.back().target, "/workspace");

  spec.workspace_path = dir + "/missing";
  EXPECT_THROW(resolve_run_spec(spec, context), http::ApiError);
  spec.workspace_path.reset();
  spec.policy = "nonexistent";
  try {
    resolve_run_spec(spec, context);
    ADD_FAILURE() << "unknown policy accepted";
  } catch (const http::ApiError& e) {
    EXPECT_EQ(http::status_for(e.code()), 404u);
  }
  spec.policy = "default";
  spec.image = "python:3.12";
  EXPECT_THROW(resolve_run_spec(spec, context), http::ApiError);
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
    RunSpec spec = parse_run_spec(body, default_limit_policy());
    pin_image(spec, ImageCatalog{store_.get(), nullptr});
    pinned_ = spec;
    return resolve_run_spec(
        spec, ResolveContext{dir_ + "/images", std::string(CAPSULE_SOURCE_DIR) + "/policies", dir_ + "/run", store_.get()});
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
  RunSpec pinned_;
};

TEST_F(RunSpecLayers, LayersStackInOrderWithMergedEnvAndHome) {
  const sandbox::SandboxSpec out = resolve({{"image", "test/base:1"}, {"layers", {"test/tool:2"}}, {"argv", {"tool"}}});
  EXPECT_EQ(pinned_.image_digest, base_);
  EXPECT_EQ(pinned_.layer_digests, std::vector<std::string>{layer_});
  EXPECT_EQ(pinned_.to_json()["image_digests"], json::array({base_, layer_}));
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
  EXPECT_EQ(pinned_.to_json()["image_digests"], json::array({tester_base_, layer_}));
}

TEST_F(RunSpecLayers, ToolchainsPickTheLayerWithItsBase) {
  const sandbox::SandboxSpec out = resolve({{"toolchains", {{"tool", "2"}}}, {"argv", {"tool"}}});
  EXPECT_EQ(pinned_.image, "test/base:1");
  EXPECT_EQ(pinned_.to_json()["image_digests"], json::array({base_, layer_}));
  EXPECT_EQ(pinned_.image_choice["provided"], json({{"tool", "2.1.0"}}));
  EXPECT_EQ(pinned_.image_choice["images"],
            json::array({{{"ref", "test/base:1"}, {"digest", base_}}, {{"ref", "test/tool:2"}, {"digest", layer_}}}));
  EXPECT_EQ(env_of(out, "PATH").rfind("/opt/tool/bin:", 0), 0u) << env_of(out, "PATH");

  // Explicit layers go on top of the toolchain's. The stack also provides the base's python, but the base alone
  // is preferred at equal versions.
  resolve({{"toolchains", {{"tool", "2"}}}, {"layers", {"test/base:tester"}}, {"argv", {"tool"}}});
  EXPECT_EQ(pinned_.to_json()["image_digests"], json::array({base_, layer_, tester_base_}));
  resolve({{"toolchains", {{"python", "3.11"}}}, {"argv", {"python3"}}});
  EXPECT_EQ(pinned_.to_json()["image_digests"], json::array({base_}));
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
