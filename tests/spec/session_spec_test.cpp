// SessionSpec and ExecSpec: round trips through to_json, defaults, and the precise 400 for each bad field.
#include "spec/session_spec.h"

#include <gtest/gtest.h>

#include "http/response.h"

namespace capsule::spec {
namespace {

using nlohmann::json;

std::string error_of_parse(const std::function<void()>& parse) {
  try {
    parse();
  } catch (const http::ApiError& e) {
    return e.code() + ": " + e.what();
  }
  return "no error";
}

TEST(SessionSpec, RoundTripsWithDefaultsFilled) {
  const LimitPolicy policy = default_limit_policy();
  const SessionSpec spec = parse_session_spec(
      {{"image", "host"}, {"workspace", {{"path", "/srv/p"}}}, {"protect", {"tests/**"}}, {"ttl", "1h"},
       {"idle_ttl", 60000}, {"on_expiry", "freeze"}, {"persist_shell_state", true}, {"labels", {{"task", "t1"}}}, {"env", {{"A", "b"}}}},
      policy);
  EXPECT_EQ(spec.ttl, std::chrono::hours(1));
  EXPECT_EQ(spec.idle_ttl, std::chrono::minutes(1));
  EXPECT_EQ(spec.on_expiry, OnExpiry::kFreeze);
  EXPECT_TRUE(spec.persist_shell_state);
  EXPECT_EQ(spec.protect, std::vector<std::string>{"tests/**"});
  EXPECT_EQ(spec.environment.workspace->path, "/srv/p");
  const json printed = to_json(spec);
  EXPECT_FALSE(printed.contains("argv")) << printed;
  EXPECT_FALSE(printed.contains("collect")) << printed;
  EXPECT_EQ(to_json(parse_session_spec(printed, policy)), printed);

  const SessionSpec proxied = parse_session_spec({{"network", "proxy"}, {"as_of", "2022-07-01"}}, policy);
  EXPECT_EQ(proxied.environment.network, "proxy");
  EXPECT_EQ(to_json(parse_session_spec(to_json(proxied), policy)), to_json(proxied));
}

TEST(SessionSpec, RefusesRunOnlyAndUnknownFieldsAndBadValues) {
  const LimitPolicy policy = default_limit_policy();
  auto parse = [&](const json& body) { return error_of_parse([&] { parse_session_spec(body, policy); }); };
  EXPECT_EQ(parse({{"argv", {"true"}}}), "invalid_spec: argv: unknown field");
  EXPECT_EQ(parse({{"ttl", "soon"}}).rfind("invalid_spec: ttl: ", 0), 0u) << parse({{"ttl", "soon"}});
  EXPECT_EQ(parse({{"on_expiry", "explode"}}), "invalid_spec: on_expiry: must be \"destroy\" or \"freeze\"");
  EXPECT_EQ(parse({{"protect", {"../etc"}}}), "invalid_spec: protect: '../etc' is not a glob of 1-4096 bytes without ..");
  EXPECT_EQ(parse({{"cwd", "relative"}}), "invalid_spec: cwd: must be an absolute path without ..");
  EXPECT_EQ(parse({{"network", "proxy"}}).rfind("invalid_spec: as_of: is required", 0), 0u) << parse({{"network", "proxy"}});
  EXPECT_EQ(parse({{"network", "host"}}), "invalid_spec: network: must be \"none\" or \"proxy\"");
}

TEST(ExecSpec, RoundTripsAndDecodesStdin) {
  const ExecSpec spec = parse_exec_spec({{"script", "echo hi\ncat <<EOF\nx\nEOF\n"}, {"stdin_b64", "AAEC"},
                                         {"timeout", "5s"}, {"idle_timeout", 1000}, {"background", true},
                                         {"cwd", "/workspace"}, {"labels", {{"step", "1"}}}});
  EXPECT_EQ(spec.stdin_data, std::string("\0\1\2", 3));
  EXPECT_EQ(spec.command(), (std::vector<std::string>{"/bin/sh", "-c", "echo hi\ncat <<EOF\nx\nEOF\n"}));
  EXPECT_EQ(spec.timeout, std::chrono::seconds(5));
  const json printed = to_json(spec);
  EXPECT_EQ(to_json(parse_exec_spec(printed)), printed);
  EXPECT_EQ(parse_exec_spec({{"argv", {"ls"}}, {"stdin", "text"}}).stdin_data, "text");
  const ExecSpec terminal = parse_exec_spec({{"argv", {"bash"}}, {"pty", true}, {"rows", 50}, {"cols", 132}});
  EXPECT_TRUE(terminal.pty);
  EXPECT_EQ(terminal.rows, 50);
  EXPECT_EQ(terminal.cols, 132);
  EXPECT_EQ(to_json(parse_exec_spec(to_json(terminal))), to_json(terminal));
}

TEST(ExecSpec, RefusesAmbiguousOrBadFields) {
  auto parse = [&](const json& body) { return error_of_parse([&] { parse_exec_spec(body); }); };
  EXPECT_EQ(parse(json::object()), "invalid_spec: argv: give either argv or script");
  EXPECT_EQ(parse({{"argv", {"ls"}}, {"script", "ls"}}), "invalid_spec: argv: give either argv or script");
  EXPECT_EQ(parse({{"argv", {"ls"}}, {"stdin", "a"}, {"stdin_b64", "YQ=="}}),
            "invalid_spec: stdin: give either stdin or stdin_b64");
  EXPECT_EQ(parse({{"argv", {"ls"}}, {"stdin_b64", "!!"}}), "invalid_spec: stdin_b64: is not padded base64");
  EXPECT_EQ(parse({{"argv", {"ls"}}, {"tty", true}}), "invalid_spec: tty: unknown field");
  EXPECT_EQ(parse({{"argv", {"ls"}}, {"pty", "yes"}}), "invalid_spec: pty: must be true or false");
  EXPECT_EQ(parse({{"argv", {"ls"}}, {"pty", true}, {"rows", 0}}), "invalid_spec: rows: must be 1 to 4096");
  EXPECT_EQ(parse({{"script", std::string(kMaxScriptBytes + 1, 'x')}}).rfind("invalid_spec: script: is ", 0), 0u);
  EXPECT_EQ(parse({{"argv", {"ls"}}, {"background", "yes"}}), "invalid_spec: background: must be true or false");
}

TEST(ExecSpec, CollectsAsARunWithoutOutputs) {
  const ExecSpec spec = parse_exec_spec({{"argv", {"pytest"}},
                                         {"collect", {{"junit", {"build/junit.xml"}}, {"coverage", {"build/cov.xml"}},
                                                      {"classfiles", {"target/**/*.class"}}, {"tail_lines", 7}}}});
  EXPECT_EQ(spec.junit_globs, std::vector<std::string>{"build/junit.xml"});
  EXPECT_EQ(spec.coverage_globs, std::vector<std::string>{"build/cov.xml"});
  EXPECT_EQ(spec.classfile_globs, std::vector<std::string>{"target/**/*.class"});
  EXPECT_EQ(spec.tail_lines, 7u);
  const json printed = to_json(spec);
  EXPECT_EQ(printed["collect"], json::parse(R"({"junit": ["build/junit.xml"], "coverage": ["build/cov.xml"],
                                                "classfiles": ["target/**/*.class"], "tail_lines": 7})"));
  EXPECT_EQ(to_json(parse_exec_spec(printed)), printed);
  RunSpec run;
  apply_collect(spec, run);
  EXPECT_EQ(run.junit_globs, spec.junit_globs);
  EXPECT_EQ(run.tail_lines, 7u);
  const ExecSpec plain = parse_exec_spec({{"argv", {"ls"}}});
  EXPECT_TRUE(plain.junit_globs.empty());
  EXPECT_EQ(plain.tail_lines, sandbox::kDefaultTailLines);

  auto parse = [&](const json& collect) {
    return error_of_parse([&] { parse_exec_spec({{"argv", {"ls"}}, {"collect", collect}}); });
  };
  EXPECT_EQ(parse({{"outputs", json::array()}}).rfind("invalid_spec: collect.outputs: an exec keeps no outputs", 0), 0u);
  EXPECT_EQ(parse({{"junit", {"/etc/x.xml"}}}),
            "invalid_spec: collect.junit: '/etc/x.xml' must be a relative glob inside the workspace");
  EXPECT_EQ(parse({{"xml", {"a"}}}), "invalid_spec: collect.xml: unknown field");
  EXPECT_EQ(parse("junit").rfind("invalid_spec: collect: must be an object", 0), 0u) << parse("junit");
}

TEST(ExecSpec, TakesABaselineAsARunDoes) {
  const ExecSpec spec = parse_exec_spec({{"argv", {"pytest"}},
                                         {"collect", {{"junit", {"junit.xml"}}}},
                                         {"baseline", {{"run", "r1"}, {"allow_removed", true}}}});
  ASSERT_TRUE(spec.baseline);
  EXPECT_EQ(spec.baseline->run, "r1");
  EXPECT_TRUE(spec.baseline->allow_removed);
  const json printed = to_json(spec);
  EXPECT_EQ(printed["baseline"], json({{"run", "r1"}, {"allow_removed", true}}));
  EXPECT_EQ(to_json(parse_exec_spec(printed)), printed);
  RunSpec run;
  apply_collect(spec, run);
  ASSERT_TRUE(run.baseline);
  EXPECT_EQ(run.baseline->run, "r1");
  EXPECT_FALSE(to_json(parse_exec_spec({{"argv", {"ls"}}})).contains("baseline"));
  EXPECT_EQ(error_of_parse([] { parse_exec_spec({{"argv", {"ls"}}, {"baseline", {{"run", "r1"}}}}); }),
            "invalid_spec: baseline: needs collect.junit: the test cases are what is compared");
}

TEST(NetworkSwitch, IsNoneOrProxy) {
  EXPECT_TRUE(parse_network_switch({{"mode", "proxy"}}));
  EXPECT_FALSE(parse_network_switch({{"mode", "none"}}));
  auto parse = [&](const json& body) { return error_of_parse([&] { parse_network_switch(body); }); };
  EXPECT_EQ(parse({{"mode", "host"}}), "invalid_spec: mode: must be \"none\" or \"proxy\"");
  EXPECT_EQ(parse(json::object()).rfind("invalid_spec: mode: is required", 0), 0u);
  EXPECT_EQ(parse({{"mode", "none"}, {"egress", "x"}}), "invalid_spec: egress: unknown field");
  EXPECT_EQ(parse({{"mode", 1}}).rfind("invalid_spec: mode: ", 0), 0u);
}

}  // namespace
}  // namespace capsule::spec
