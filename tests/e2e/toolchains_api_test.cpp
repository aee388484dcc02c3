// The /v1/toolchains routes through a real capsuled: what is installed per toolchain (layers with their base),
// the resolve dry run answering exactly what a run with the same toolchains is pinned to (or the same error
// body), `capsule toolchains ls|resolve` and the Python client's resolve_toolchains.
#include <sys/wait.h>

#include <cstdio>

#include "tests/support/capsuled_fixture.h"

namespace capsule::testing {
namespace {

struct Output {
  int status = -1;
  std::string text;  // stdout
};

Output run_command(const std::string& command) {
  Output out;
  FILE* pipe = ::popen(command.c_str(), "r");
  if (pipe == nullptr) return out;
  char buffer[4096];
  for (std::size_t n; (n = fread(buffer, 1, sizeof buffer, pipe)) > 0;) out.text.append(buffer, n);
  const int status = ::pclose(pipe);
  out.status = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  return out;
}

class CapsuledToolchains : public Capsuled {
 protected:
  void SetUp() override {
    Capsuled::SetUp();
    start();
    py312_ = import("test/py:3.12", {{"org.capsule.toolchain.python", "3.12.8"}});
    py313_ = import("test/py:3.13", {{"org.capsule.toolchain.python", "3.13.14"}});
    jdk_ = import("test/jdk:17", {{"org.capsule.toolchain.java", "17.0.15"}, {"org.capsule.toolchain.maven", "3.8.7"}});
    layer_ = import("test/java25-layer:1", {{"org.capsule.toolchain.java", "25.0.3"},
                                            {"org.capsule.layer.base", "test/py:3.12"}});
    orphan_ = import("test/orphan:1", {{"org.capsule.toolchain.java", "21.0.7"},
                                       {"org.capsule.layer.base", "test/absent:1"}});
  }

  // A rootfs of one file: the routes only read labels; the runs compared against them need not start.
  std::string import(const std::string& ref, const json& labels) {
    const fs::path root = make_dir("rootfs-" + std::to_string(imported_++));
    write_file(root / "marker", ref + "\n");
    const HttpResponse response =
        call("POST", "/v1/images", {{"source", root.string()}, {"format", "rootfs"}, {"ref", ref}, {"labels", labels}});
    EXPECT_EQ(response.status, 201) << response.body;
    return body_json(response).value("digest", "");
  }

  std::string cli(const std::string& arguments) const {
    return std::string(CAPSULE_BIN_DIR) + "/capsule --socket " + socket_ + " " + arguments;
  }

  int imported_ = 0;
  std::string py312_, py313_, jdk_, layer_, orphan_;
};

TEST_F(CapsuledToolchains, ListsEveryInstalledVersionPerToolchainNewestFirst) {
  const HttpResponse response = call("GET", "/v1/toolchains");
  ASSERT_EQ(response.status, 200) << response.body;
  const json toolchains = body_json(response).at("toolchains");
  ASSERT_EQ(toolchains.at("python").size(), 3u) << toolchains.dump(2);  // the layer inherits its base's python
  EXPECT_EQ(toolchains["python"][0], json({{"version", "3.13.14"}, {"ref", "test/py:3.13"}, {"digest", py313_}}));
  const json java = toolchains.at("java");
  ASSERT_EQ(java.size(), 3u) << java.dump(2);
  EXPECT_EQ(java[0]["version"], "25.0.3");
  EXPECT_EQ(java[0]["base"], json({{"ref", "test/py:3.12"}, {"digest", py312_}}));
  EXPECT_EQ(java[1]["version"], "21.0.7");
  EXPECT_NE(java[1].value("unusable", "").find("test/absent:1 is not installed"), std::string::npos) << java.dump(2);
  EXPECT_EQ(java[2], json({{"version", "17.0.15"}, {"ref", "test/jdk:17"}, {"digest", jdk_}}));
  EXPECT_EQ(toolchains.at("maven")[0]["version"], "3.8.7");

  const Output table = run_command(cli("toolchains ls"));
  ASSERT_EQ(table.status, 0) << table.text;
  EXPECT_NE(table.text.find("python      3.13.14   test/py:3.13"), std::string::npos) << table.text;
  EXPECT_NE(table.text.find("layer on test/py:3.12"), std::string::npos) << table.text;
  EXPECT_NE(table.text.find("unusable: its base test/absent:1 is not installed"), std::string::npos) << table.text;
  const Output listed = run_command(cli("toolchains ls --json"));
  EXPECT_EQ(json::parse(listed.text), body_json(response));
}

TEST_F(CapsuledToolchains, ResolveAnswersWhatARunIsPinnedTo) {
  const HttpResponse response = call("GET", "/v1/toolchains/resolve?python=auto&as_of=2025-01-01");
  ASSERT_EQ(response.status, 200) << response.body;
  const json answer = body_json(response);
  EXPECT_EQ(answer["image"], json({{"ref", "test/py:3.12"}, {"digest", py312_}}));
  EXPECT_EQ(answer["pinned"]["toolchains"], json({{"python", "3.12.8"}}));
  EXPECT_EQ(answer["python_release"]["version"], "3.12.8");
  EXPECT_EQ(answer["python_release"]["date"], "2024-12-03");  // the release table's entry
  EXPECT_EQ(answer["python_release"]["table"]["complete_through"], "2026-08-06");
  EXPECT_NE(answer["pinned"]["image_choice"]["python_auto"]["reason"].get<std::string>().find(
                "3.12 is the newest minor released at least a year earlier"),
            std::string::npos);

  // A run with the same toolchains is pinned to exactly this (it fails afterwards: the image has no programs).
  const json run = run_and_wait({{"toolchains", {{"python", "auto"}}}, {"as_of", "2025-01-01"}, {"argv", {"/marker"}}});
  for (const char* field : {"image_digests", "image_choice", "toolchains"}) {
    EXPECT_EQ(run["pinned"][field], answer["pinned"][field]) << field;
  }

  // Several toolchains, a toolchain layer: the base first, as a run's pins list them.
  const json stacked = body_json(call("GET", "/v1/toolchains/resolve?java=25&python=3.12"));
  EXPECT_EQ(stacked["pinned"]["image_digests"], json({py312_, layer_})) << stacked.dump(2);
  EXPECT_EQ(stacked["image"]["ref"], "test/java25-layer:1");
  EXPECT_FALSE(stacked.contains("python_release"));
}

TEST_F(CapsuledToolchains, ResolveRefusesAsARunIsRefused) {
  const std::vector<std::pair<std::string, json>> cases = {
      {"python=auto&as_of=2026-09-01", {{"toolchains", {{"python", "auto"}}}, {"as_of", "2026-09-01"}}},
      {"java=11", {{"toolchains", {{"java", "11"}}}}},
      {"java=21", {{"toolchains", {{"java", "21"}}}}},  // only a layer whose base is missing has it
      {"python=auto", {{"toolchains", {{"python", "auto"}}}}},
      {"python=3.x*", {{"toolchains", {{"python", "3.x*"}}}}},
      {"python=auto&as_of=2025-02-30", {{"toolchains", {{"python", "auto"}}}, {"as_of", "2025-02-30"}}},
  };
  for (const auto& [query, spec] : cases) {
    json body = spec;
    body["argv"] = {"/marker"};
    const HttpResponse dry = call("GET", "/v1/toolchains/resolve?" + query);
    const HttpResponse real = call("POST", "/v1/runs", body);
    EXPECT_GE(dry.status, 400) << query;
    EXPECT_LT(dry.status, 500) << query;
    EXPECT_EQ(dry.status, real.status) << query;
    EXPECT_EQ(dry.body, real.body) << query;
  }
  const HttpResponse outdated = call("GET", "/v1/toolchains/resolve?python=auto&as_of=2026-09-01");
  expect_error(outdated, 400, "release_data_outdated", "as_of: as_of 2026-09-01 is after 2026-08-06, the last day");
  EXPECT_NE(outdated.body.find("scripts/refresh-python-releases.py"), std::string::npos) << outdated.body;
  expect_error(call("GET", "/v1/toolchains/resolve?java=21"), 404, "no_matching_image",
               "test/orphan:1 would, but its base test/absent:1 is not installed");
  expect_error(call("GET", "/v1/toolchains/resolve"), 400, "invalid_query", "name at least one toolchain");
  expect_error(call("GET", "/v1/toolchains/resolve?as_of=2025-01-01"), 400, "invalid_query", "?python=auto");
}

TEST_F(CapsuledToolchains, CliAndPythonClientResolve) {
  const Output lines = run_command(cli("toolchains resolve python=auto --as-of 2025-01-01"));
  ASSERT_EQ(lines.status, 0) << lines.text;
  EXPECT_NE(lines.text.find("image     test/py:3.12 " + py312_), std::string::npos) << lines.text;
  EXPECT_NE(lines.text.find("python    3.12.8 (asked auto -> 3.12.8)"), std::string::npos) << lines.text;
  EXPECT_NE(lines.text.find("release   3.12.8 released 2024-12-03 (table complete through 2026-08-06)"),
            std::string::npos) << lines.text;
  const json api = body_json(call("GET", "/v1/toolchains/resolve?python=auto&as_of=2025-01-01"));
  const Output as_json = run_command(cli("toolchains resolve python=auto --as-of 2025-01-01 --json"));
  ASSERT_EQ(as_json.status, 0);
  EXPECT_EQ(json::parse(as_json.text), api);

  const Output refused = run_command(cli("toolchains resolve python=auto --as-of 2026-09-01 --json"));
  EXPECT_EQ(refused.status, 1);
  expect_error_body(refused.text, "release_data_outdated", "after 2026-08-06");
  const Output refused_lines = run_command(cli("toolchains resolve java=11 2>&1"));
  EXPECT_EQ(refused_lines.status, 1);
  EXPECT_NE(refused_lines.text.find("no installed image provides java 11"), std::string::npos) << refused_lines.text;

  const std::string python = "PYTHONPATH=" + std::string(CAPSULE_SOURCE_DIR) + "/client/python python3 -c '"
                             "import capsule, json, sys; c = capsule.Client(sys.argv[1]); "
                             "print(json.dumps(c.resolve_toolchains({\"python\": \"auto\"}, as_of=\"2025-01-01\")))\n"
                             "try:\n  c.resolve_toolchains({\"java\": \"11\"})\n"
                             "except capsule.NotFound as e:\n  print(e.code)' " + socket_;
  const Output client = run_command(python);
  ASSERT_EQ(client.status, 0) << client.text;
  const auto newline = client.text.find('\n');
  EXPECT_EQ(json::parse(client.text.substr(0, newline)), api);
  EXPECT_EQ(client.text.substr(newline + 1), "no_matching_image\n");
}

}  // namespace
}  // namespace capsule::testing
