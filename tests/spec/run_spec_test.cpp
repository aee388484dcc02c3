// RunSpec parsing: defaults, clamping to the daemon's maxima, unit strings, 400 errors that name the field,
// and printing: to_json parses back to the same spec (the stored spec is a valid request).
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <memory>

#include "http/error_status.h"
#include "http/response.h"
#include "spec/pinned.h"
#include "spec/run_spec.h"

namespace capsule::spec {
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
  EXPECT_FALSE(spec.workspace);
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
  EXPECT_EQ(spec.workspace->mode, WorkspaceMode::kReadWrite);
  EXPECT_EQ(spec.labels.at("bench"), "java17");
  EXPECT_EQ(spec.junit_globs.size(), 1u);
  EXPECT_EQ(spec.tail_lines, 100u);  // the default
}

TEST(RunSpecParse, CollectTakesTailLinesClassfilesAndCoverage) {
  const RunSpec spec = parse_run_spec(
      json{{"argv", {"x"}},
           {"collect", {{"tail_lines", 7}, {"classfiles", {"**/*.class"}}, {"coverage", {"coverage.xml"}}}}},
      default_limit_policy());
  EXPECT_EQ(spec.tail_lines, 7u);
  EXPECT_EQ(spec.classfile_globs, std::vector<std::string>{"**/*.class"});
  EXPECT_EQ(spec.coverage_globs, std::vector<std::string>{"coverage.xml"});
  EXPECT_EQ(to_json(spec)["collect"],
            json({{"junit", json::array()}, {"tail_lines", 7}, {"classfiles", {"**/*.class"}}, {"coverage", {"coverage.xml"}}}));
  EXPECT_EQ(parse_run_spec(json{{"argv", {"x"}}, {"collect", {{"tail_lines", 10000}}}}, default_limit_policy()).tail_lines,
            10000u);
}

TEST(RunSpecParse, CollectOutputsIsAbsentEmptyOrGlobsAndPrintsBack) {
  const auto policy = default_limit_policy();
  EXPECT_FALSE(parse_run_spec(json{{"argv", {"x"}}}, policy).output_globs);
  EXPECT_FALSE(to_json(parse_run_spec(json{{"argv", {"x"}}}, policy))["collect"].contains("outputs"));
  const RunSpec none = parse_run_spec(json{{"argv", {"x"}}, {"collect", {{"outputs", json::array()}}}}, policy);
  ASSERT_TRUE(none.output_globs);
  EXPECT_TRUE(none.output_globs->empty());
  EXPECT_EQ(to_json(none)["collect"]["outputs"], json::array());
  const RunSpec some =
      parse_run_spec(json{{"argv", {"x"}}, {"collect", {{"outputs", {"target/**", "/root/.m2/**"}}}}}, policy);
  EXPECT_EQ(*some.output_globs, (std::vector<std::string>{"target/**", "/root/.m2/**"}));
  EXPECT_EQ(parse_run_spec(to_json(some), policy).output_globs, some.output_globs);
  for (const char* bad : {"../x", "/", ""}) {
    EXPECT_THROW(parse_run_spec(json{{"argv", {"x"}}, {"collect", {{"outputs", {bad}}}}}, policy), http::ApiError) << bad;
  }
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
  EXPECT_NE(error_of(json{{"argv", {"x"}}, {"collect", {{"tail_lines", 10001}}}}).find("collect.tail_lines"),
            std::string::npos);
  EXPECT_NE(error_of(json{{"argv", {"x"}}, {"collect", {{"tail_lines", -1}}}}).find("collect.tail_lines"),
            std::string::npos);
  EXPECT_NE(error_of(json{{"argv", {"x"}}, {"collect", {{"classfiles", {"/abs/*.class"}}}}}).find("collect.classfiles"),
            std::string::npos);
  EXPECT_NE(error_of(json{{"argv", {"x"}}, {"collect", {{"coverage", {"../c.xml"}}}}}).find("collect.coverage"),
            std::string::npos);
  EXPECT_NE(error_of(json{{"argv", {"x"}}, {"collect", {{"junit", {"../x.xml"}}}}}).find("collect.junit"),
            std::string::npos);
  EXPECT_NE(error_of(json{{"argv", {"x"}}, {"labels", {{"a b", "c"}}}}).find("labels.a b"), std::string::npos);
}

TEST(RunSpecParse, BaselineAndProtectTestConfig) {
  const json junit = {{"junit", {"build/junit.xml"}}};
  const RunSpec spec = parse_run_spec(json{{"argv", {"x"}}, {"collect", junit}, {"workspace", "/srv/p"},
                                           {"baseline", {{"run", "r-1_a"}, {"allow_removed", true}}},
                                           {"protect_test_config", true}},
                                      default_limit_policy());
  ASSERT_TRUE(spec.baseline);
  EXPECT_EQ(spec.baseline->run, "r-1_a");
  EXPECT_TRUE(spec.baseline->allow_removed);
  EXPECT_TRUE(spec.protect_test_config);
  const json printed = to_json(spec);
  EXPECT_EQ(printed["baseline"], json({{"run", "r-1_a"}, {"allow_removed", true}}));
  EXPECT_EQ(to_json(parse_run_spec(printed, default_limit_policy())), printed);
  EXPECT_FALSE(to_json(parse_run_spec(json{{"argv", {"x"}}}, default_limit_policy())).contains("baseline"));

  EXPECT_NE(error_of(json{{"argv", {"x"}}, {"baseline", {{"run", "r1"}}}}).find("baseline: needs collect.junit"),
            std::string::npos);
  EXPECT_NE(error_of(json{{"argv", {"x"}}, {"collect", junit}, {"baseline", "r1"}}).find("baseline: must be an object"),
            std::string::npos);
  EXPECT_NE(error_of(json{{"argv", {"x"}}, {"collect", junit}, {"baseline", {{"run", "../r1"}}}}).find("baseline.run"),
            std::string::npos);
  EXPECT_NE(error_of(json{{"argv", {"x"}}, {"collect", junit}, {"baseline", json::object()}}).find("baseline.run: is required"),
            std::string::npos);
  EXPECT_NE(error_of(json{{"argv", {"x"}}, {"collect", junit}, {"baseline", {{"run", "r1"}, {"allow", true}}}})
                .find("baseline.allow: unknown field"),
            std::string::npos);
  EXPECT_NE(error_of(json{{"argv", {"x"}}, {"collect", junit},
                          {"baseline", {{"run", "r1"}, {"allow_removed", "yes"}}}}).find("baseline.allow_removed"),
            std::string::npos);
  EXPECT_NE(error_of(json{{"argv", {"x"}}, {"protect_test_config", true}}).find("protect_test_config: needs a cow"),
            std::string::npos);
  EXPECT_NE(error_of(json{{"argv", {"x"}}, {"workspace", {{"path", "/p"}, {"mode", "rw"}}}, {"protect_test_config", true}})
                .find("protect_test_config"),
            std::string::npos);
  EXPECT_NE(error_of(json{{"argv", {"x"}}, {"workspace", "/p"}, {"protect_test_config", 1}}).find("protect_test_config"),
            std::string::npos);
}

TEST(RunSpecParse, ProtectGlobsNeedACowOrRoWorkspace) {
  const RunSpec spec = parse_run_spec(json{{"argv", {"x"}}, {"workspace", "/srv/p"}, {"protect", {"conftest.py", "tests/**"}}},
                                      default_limit_policy());
  EXPECT_EQ(spec.protect, (std::vector<std::string>{"conftest.py", "tests/**"}));
  const json printed = to_json(spec);
  EXPECT_EQ(printed["protect"], json({"conftest.py", "tests/**"}));
  EXPECT_EQ(to_json(parse_run_spec(printed, default_limit_policy())), printed);
  EXPECT_FALSE(to_json(parse_run_spec(json{{"argv", {"x"}}}, default_limit_policy())).contains("protect"));

  EXPECT_EQ(error_of(json{{"argv", {"x"}}, {"protect", {"tests/**"}}}),
            "protect: needs a cow or ro workspace (files created under the globs are read from the copy-on-write diff)");
  EXPECT_EQ(error_of(json{{"argv", {"x"}}, {"workspace", {{"path", "/p"}, {"mode", "rw"}}}, {"protect", {"t/**"}}}),
            "protect: needs a cow or ro workspace (files created under the globs are read from the copy-on-write diff)");
  EXPECT_EQ(error_of(json{{"argv", {"x"}}, {"workspace", "/p"}, {"protect", {"../etc"}}}),
            "protect: '../etc' is not a glob of 1-4096 bytes without ..");
  EXPECT_EQ(error_of(json{{"argv", {"x"}}, {"workspace", "/p"}, {"protect", {"**/**/**/**/**"}}}),
            "protect: '**/**/**/**/**' has more than 4 '**' (matching would explode)");
  EXPECT_EQ(error_of(json{{"argv", {"x"}}, {"workspace", "/p"}, {"protect", "tests/**"}}).rfind("protect: ", 0), 0u);
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
  EXPECT_EQ(to_json(spec)["layers"], json::array({"tools/tool:2", digest}));
  EXPECT_FALSE(to_json(spec).contains("image_digests")) << "pins are not part of the spec";
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

// The stored form is a request: printing and parsing again gives the same spec and the same JSON, for specs
// that use every field and every unit form.
TEST(RunSpecPrint, ToJsonParsesBackToTheSameSpec) {
  const LimitPolicy policy = default_limit_policy();
  const std::vector<json> requests = {
      json{{"argv", {"true"}}},
      json{{"argv", {"mvn", "-B", "verify"}},
           {"image", "jdk:17"},
           {"layers", {"tools/tool:2"}},
           {"env", {{"A", "1"}, {"MAVEN_OPTS", "-Xmx1g"}}},
           {"cwd", "/workspace/sub"},
           {"workspace", "/srv/project"},
           {"limits", {{"wall_time", "10m"}, {"memory", "4g"}, {"cpus", 1.5}, {"pids", 100}, {"cpu_time", 90000},
                       {"kill_grace", "3s"}, {"tmp_size", "64m"}, {"output_cap", "2m"}, {"disk", "1g"}, {"inodes", 5000}}},
           {"labels", {{"bench", "java17"}}},
           {"collect", {{"junit", {"target/surefire-reports/*.xml"}}, {"tail_lines", 250},
                        {"classfiles", {"target/classes/**/*.class"}}, {"coverage", {"target/site/jacoco/jacoco.xml"}}}},
           {"policy", "default"},
           {"stdin", "input\n"}},
      json{{"argv", {"pytest"}}, {"toolchains", {{"python", "3.11"}}}, {"as_of", "2024-03-01"}, {"network", "proxy"},
           {"workspace", {{"path", "/srv/py"}, {"mode", "ro"}}}},
  };
  for (const json& request : requests) {
    const RunSpec first = parse_run_spec(request, policy);
    const json printed = to_json(first);
    const RunSpec again = parse_run_spec(printed, policy);
    EXPECT_EQ(to_json(again), printed) << printed.dump();
    EXPECT_EQ(again.limits.wall_time, first.limits.wall_time);
    EXPECT_EQ(again.limits.memory_bytes, first.limits.memory_bytes);
    EXPECT_EQ(again.limits.disk_inodes, first.limits.disk_inodes);
    EXPECT_EQ(again.workspace.has_value(), first.workspace.has_value());
    EXPECT_EQ(again.stdin_data, first.stdin_data);
  }
  // One vocabulary: the printed limits use the request's names, in ms and bytes.
  const json limits = to_json(parse_run_spec(requests[1], policy))["limits"];
  EXPECT_EQ(limits["wall_time"], 600000);
  EXPECT_EQ(limits["memory"], 4ull << 30);
  EXPECT_EQ(limits["kill_grace"], 3000);
  EXPECT_FALSE(limits.contains("wall_time_ms"));
}

// The daemon's config uses the same table: given fields replace the defaults, 0 in max_limits lifts a ceiling.
TEST(Limits, OverlayAndPolicyShareTheTable) {
  LimitPolicy policy = default_limit_policy();
  overlay(policy.defaults, parse_limit_values(json{{"wall_time", "1m"}, {"memory", "1g"}}, "default_limits"));
  overlay(policy.maxima, parse_limit_values(json{{"wall_time", 0}}, "max_limits"));
  EXPECT_EQ(policy.defaults.wall_time, std::chrono::minutes(1));
  EXPECT_EQ(policy.defaults.memory_bytes, 1ull << 30);
  EXPECT_EQ(policy.defaults.pids, 4096u) << "fields not given keep their value";
  const Limits applied = apply_policy(parse_limit_values(json{{"wall_time", "100h"}}, "limits"), policy);
  EXPECT_EQ(applied.wall_time, std::chrono::hours(100)) << "no ceiling once max_limits.wall_time is 0";
  EXPECT_EQ(applied.memory_bytes, 1ull << 30);
  EXPECT_THROW(parse_limit_values(json{{"pids", 0}}, "limits"), http::ApiError);
}

// Pins from a stored run are read back as printed; anything else names its field, and the image list is bounded
// before the daemon looks a single digest up.
TEST(Pinned, ParsesWhatItPrintsAndBoundsTheImages) {
  Pinned pinned;
  pinned.image_digests = {"sha256:" + std::string(64, 'a'), "sha256:" + std::string(64, 'b')};
  pinned.policy_sha256 = "sha256:" + std::string(64, 'c');
  pinned.cutoff = "2024-01-01";
  pinned.toolchains = {{"java", "17.0.9"}};
  EXPECT_EQ(to_json(parse_pinned(to_json(pinned))), to_json(pinned));
  json many = to_json(pinned);
  many["image_digests"] = json::array();
  for (std::size_t i = 0; i <= kMaxPinnedImages; ++i) many["image_digests"].push_back("sha256:" + std::string(64, 'd'));
  EXPECT_THROW(parse_pinned(many), http::ApiError);
  json bad = to_json(pinned);
  bad["policy_sha256"] = "md5:x";
  try {
    parse_pinned(bad);
    ADD_FAILURE() << "a malformed digest was accepted";
  } catch (const http::ApiError& e) {
    EXPECT_NE(std::string(e.what()).find("pinned.policy_sha256"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace capsule::spec
