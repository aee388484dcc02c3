// RunSpec parsing: defaults, clamping to the daemon's maxima, unit strings, and 400 errors that name
// the field; resolution of a workspace into a copy-on-write overlay, ro or rw bind.
#include <gtest/gtest.h>

#include <filesystem>

#include "daemon/api_error.h"
#include "daemon/run_spec.h"

namespace capsule::daemon {
namespace {

using nlohmann::json;

std::string error_of(const json& body) {
  try {
    parse_run_spec(body, default_limit_policy());
  } catch (const ApiError& e) {
    EXPECT_EQ(e.status, 400u);
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
  EXPECT_THROW(resolve_run_spec(spec, context), ApiError);
  spec.workspace_path.reset();
  spec.policy = "nonexistent";
  try {
    resolve_run_spec(spec, context);
    ADD_FAILURE() << "unknown policy accepted";
  } catch (const ApiError& e) {
    EXPECT_EQ(e.status, 404u);
  }
  spec.policy = "default";
  spec.image = "python:3.12";
  EXPECT_THROW(resolve_run_spec(spec, context), ApiError);
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace capsule::daemon
