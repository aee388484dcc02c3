// Integration tests of images through a real capsuled: import a rootfs built here (a shell, cat and their
// libraries from the host), run in it by ref, digest and toolchain (incl. python "auto" by date), stack
// layer images on it (`layers`, and toolchain layers picked by selection), save, re-import, remove and gc,
// and the errors of each.
#include <sys/stat.h>
#include <unistd.h>

#include <regex>
#include <set>
#include <sstream>

#include "http/unix_client.h"
#include "tests/support/capsuled_fixture.h"

namespace capsule::testing {
namespace {

class CapsuledImages : public Capsuled {
 protected:
  // A minimal root: /bin/sh, cat, ls, a marker file (root-owned) and one owned by uid 1000.
  fs::path make_rootfs(const std::string& marker) {
    const fs::path root = make_dir("rootfs-" + marker);
    for (const char* binary : {"/bin/sh", "/bin/cat", "/bin/ls"}) copy_with_libraries(binary, root);
    if (fs::is_symlink("/lib64") || fs::exists("/lib64")) fs::create_directories(root / "lib64");
    write_file(root / "marker", marker + "\n");
    write_file(root / "home-file", "user\n");
    EXPECT_EQ(::chown((root / "home-file").c_str(), 1000, 1000), 0);
    return root;
  }

  // `config`: the import's labels, env, working_dir and user.
  json import_rootfs(const fs::path& root, const std::string& ref, const json& labels = json::object(),
                     const json& config = json::object()) {
    json body = {{"source", root.string()}, {"format", "rootfs"}, {"ref", ref}};
    if (!labels.empty()) body["labels"] = labels;
    body.update(config);
    const HttpResponse response = call("POST", "/v1/images", body);
    EXPECT_EQ(response.status, 201) << response.body;
    return body_json(response);
  }

  // make_rootfs() with an /etc/passwd naming root and tester (uid 1000, home /home/tester).
  fs::path make_base_rootfs() {
    const fs::path root = make_rootfs("base");
    fs::create_directories(root / "etc");
    write_file(root / "etc/passwd", "root:x:0:0:root:/root:/bin/sh\ntester:x:1000:1000::/home/tester:/bin/sh\n");
    return root;
  }
  // A toolchain layer as toolchain-layer.sh makes them: no shell of its own, only /opt/tool/bin/tool.
  fs::path make_tool_layer() {
    const fs::path root = make_dir("tool-layer");
    fs::create_directories(root / "opt/tool/bin");
    write_file(root / "opt/tool/bin/tool", "#!/bin/sh\necho \"tool 2.1.0 at $0\"\n");
    fs::permissions(root / "opt/tool/bin/tool", fs::perms::owner_all | fs::perms::group_read |
                                                    fs::perms::group_exec | fs::perms::others_read |
                                                    fs::perms::others_exec);
    return root;
  }
  // The tool layer imported with its own PATH and toolchain labels, to stack on `base`.
  json import_tool_layer(const fs::path& root, const std::string& ref, const json& toolchains,
                         const std::string& base = "test/base:1") {
    json labels = {{"org.capsule.layer.base", base}};
    for (const auto& [name, version] : toolchains.items()) labels["org.capsule.toolchain." + name] = version;
    return import_rootfs(root, ref, labels, {{"env", {"PATH=/opt/tool/bin"}}});
  }
};

constexpr const char* kDefaultPath = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin";

TEST_F(CapsuledImages, ImportListInspectAndRunByRefAndDigest) {
  start();
  const json image = import_rootfs(make_rootfs("alpha"), "test/alpha:1");
  const std::string digest = image.at("digest");
  EXPECT_EQ(digest.rfind("sha256:", 0), 0u);
  EXPECT_EQ(image.at("refs"), json::array({"test/alpha:1"}));

  const json list = body_json(call("GET", "/v1/images"));
  ASSERT_EQ(list.at("images").size(), 1u);
  EXPECT_EQ(list["images"][0]["digest"], digest);
  EXPECT_EQ(body_json(call("GET", "/v1/images/" + http::url_encode("test/alpha:1"))).at("digest"), digest);
  EXPECT_EQ(body_json(call("GET", "/v1/images/" + http::url_encode(digest))).at("digest"), digest);

  for (const std::string& ref : {std::string("test/alpha:1"), digest}) {
    json spec = {{"image", ref}, {"argv", {"/bin/sh", "-c", "cat /marker; ls -n /marker /home-file; ls /usr/lib/jvm 2>&1"}}};
    const json run = run_and_wait(spec);
    EXPECT_EQ(run.at("state"), "failed") << "ls of a host-only path must fail: " << run.dump();
    const std::string out = run["result"]["stdout"]["head"];
    EXPECT_EQ(out.rfind("alpha\n", 0), 0u) << out;
    EXPECT_TRUE(std::regex_search(out, std::regex(R"(-rw-r--r-- +1 +0 +0 +6 .*/marker)")))
        << "root-owned in the image, root-owned inside: " << out;
    EXPECT_TRUE(std::regex_search(out, std::regex(R"(-rw-r--r-- +1 +1000 +1000 +5 .*/home-file)"))) << out;
    EXPECT_NE(out.find("/usr/lib/jvm': No such file"), std::string::npos)
        << "the host's /usr must not be visible";
    EXPECT_EQ(run["pinned"]["image_digests"][0], digest);
  }
}

TEST_F(CapsuledImages, ToolchainSelectionByVersionAndByDate) {
  start();
  const std::string old_digest =
      import_rootfs(make_rootfs("py310"), "test/py:3.10", {{"org.capsule.toolchain.python", "3.10.11"}})["digest"];
  const std::string new_digest =
      import_rootfs(make_rootfs("py312"), "test/py:3.12", {{"org.capsule.toolchain.python", "3.12.8"}})["digest"];

  json by_version = run_and_wait({{"toolchains", {{"python", "3.12"}}}, {"argv", {"/bin/cat", "/marker"}}});
  EXPECT_EQ(by_version["result"]["stdout"]["head"], "py312\n");
  EXPECT_EQ(by_version["pinned"]["image_digests"][0], new_digest);
  EXPECT_TRUE(by_version["pinned"]["image_choice"].contains("reason"));

  json by_date = run_and_wait(
      {{"toolchains", {{"python", "auto"}}}, {"as_of", "2023-04-11"}, {"argv", {"/bin/cat", "/marker"}}});
  EXPECT_EQ(by_date["result"]["stdout"]["head"], "py310\n") << by_date.dump();
  EXPECT_EQ(by_date["pinned"]["image_digests"][0], old_digest);
  EXPECT_EQ(by_date["pinned"]["image_choice"]["python_auto"]["version"], "3.10.11");

  const HttpResponse missing = call("POST", "/v1/runs", {{"toolchains", {{"python", "auto"}}}, {"as_of", "2025-07-31"},
                                                          {"argv", {"/bin/true"}}});
  expect_error(missing, 404, "no_matching_image", "3.12.11");
  expect_error(call("POST", "/v1/runs", {{"toolchains", {{"java", "17"}}}, {"image", "host"}, {"argv", {"x"}}}), 400,
               "invalid_spec", "image");
  expect_error(call("POST", "/v1/runs", {{"toolchains", {{"python", "auto"}}}, {"as_of", "2023-13-01"},
                                         {"argv", {"x"}}}),
               400, "invalid_spec", "as_of");
}

TEST_F(CapsuledImages, LayersStackOnTheBaseWithMergedEnvAndHome) {
  start();
  const fs::path base_root = make_base_rootfs();
  const std::string base = import_rootfs(base_root, "test/base:1")["digest"];
  const std::string tester_base = import_rootfs(base_root, "test/base:tester", {}, {{"user", "tester"}})["digest"];
  const std::string layer = import_tool_layer(make_tool_layer(), "test/tool:2", {{"tool", "2.1.0"}})["digest"];

  const json run = run_and_wait({{"image", "test/base:1"}, {"layers", {"test/tool:2"}},
                                 {"argv", {"/bin/sh", "-c", "tool; echo PATH=$PATH; echo HOME=$HOME; cat /marker"}}});
  ASSERT_EQ(run.value("state", ""), "succeeded") << run.dump();
  EXPECT_EQ(run["result"]["stdout"]["head"], "tool 2.1.0 at /opt/tool/bin/tool\nPATH=/opt/tool/bin:" +
                                                 std::string(kDefaultPath) + "\nHOME=/root\nbase\n");
  EXPECT_EQ(run["spec"]["layers"], json::array({"test/tool:2"}));
  EXPECT_EQ(run["pinned"]["image_digests"], json::array({base, layer}));

  // The base's User; HOME from its passwd entry. A layer named by digest.
  const json as_tester = run_and_wait(
      {{"image", "test/base:tester"}, {"layers", {layer}},
       {"argv", {"/bin/sh", "-c",
                 "tool; echo HOME=$HOME; while read k v rest; do case $k in Uid:|Gid:) echo $k $v;; esac; done "
                 "< /proc/self/status"}}});
  ASSERT_EQ(as_tester.value("state", ""), "succeeded") << as_tester.dump();
  EXPECT_EQ(as_tester["result"]["stdout"]["head"],
            "tool 2.1.0 at /opt/tool/bin/tool\nHOME=/home/tester\nUid: 1000\nGid: 1000\n");
  EXPECT_EQ(as_tester["pinned"]["image_digests"], json::array({tester_base, layer}));
  // HOME from the run's env wins.
  EXPECT_EQ(run_and_wait({{"image", "test/base:1"}, {"env", {{"HOME", "/w"}}}, {"argv", {"/bin/sh", "-c", "echo $HOME"}}})
                ["result"]["stdout"]["head"],
            "/w\n");

  expect_error(call("POST", "/v1/runs", {{"image", "test/base:1"}, {"layers", {"test/tool:2", "Bad Ref"}}, {"argv", {"x"}}}),
               400, "invalid_spec", "layers[1]");
  expect_error(call("POST", "/v1/runs", {{"image", "test/base:1"}, {"layers", {"test/nope:1"}}, {"argv", {"x"}}}), 404,
               "image_not_found", "layers[0]: 'test/nope:1' is not installed");
  expect_error(call("POST", "/v1/runs", {{"layers", {"test/tool:2"}}, {"argv", {"x"}}}), 400, "invalid_spec",
               "layers: are stacked on an imported image");
}

// 128 layers (the cap) mount although their absolute paths would overflow mount(2)'s one-page option string;
// one more is refused before anything is created.
TEST_F(CapsuledImages, DeepStacksRunUpToTheLayerCap) {
  start();
  import_rootfs(make_base_rootfs(), "test/base:1");
  json layers = json::array();
  for (int i = 0; i < 128; ++i) {
    const fs::path root = make_dir("deep-" + std::to_string(i));
    fs::create_directories(root / "stack");
    write_file(root / "stack" / std::to_string(i), std::to_string(i) + "\n");
    const std::string ref = "test/deep:" + std::to_string(i);
    import_rootfs(root, ref);
    layers.push_back(ref);
  }
  const json too_deep = layers;
  layers.erase(layers.end() - 1);

  const json run = run_and_wait({{"image", "test/base:1"}, {"layers", layers},
                                 {"argv", {"/bin/sh", "-c", "cat /stack/0 /stack/126 /marker; set -- /stack/*; echo $#"}}});
  ASSERT_EQ(run.value("state", ""), "succeeded") << run.dump();
  EXPECT_EQ(run["result"]["stdout"]["head"], "0\n126\nbase\n127\n");
  EXPECT_EQ(run["pinned"]["image_digests"].size(), 128u);

  expect_error(call("POST", "/v1/runs", {{"image", "test/base:1"}, {"layers", too_deep}, {"argv", {"true"}}}), 400,
               "too_many_layers", "129 layers; at most 128 can be stacked");
}

TEST_F(CapsuledImages, ToolchainsPickALayerImageWithItsBase) {
  start();
  const std::string base = import_rootfs(make_base_rootfs(), "test/base:1")["digest"];
  const fs::path layer_root = make_tool_layer();
  const std::string tool = import_tool_layer(layer_root, "test/tool:2", {{"tool", "2.1.0"}})["digest"];
  const std::string python = import_tool_layer(layer_root, "test/py:3.10", {{"python", "3.10.11"}})["digest"];
  import_tool_layer(layer_root, "test/lost:3", {{"tool", "3.0.0"}}, "test/gone:1");

  const json run = run_and_wait({{"toolchains", {{"tool", "2"}}}, {"argv", {"tool"}}});
  ASSERT_EQ(run.value("state", ""), "succeeded") << run.dump();
  EXPECT_EQ(run["result"]["stdout"]["head"], "tool 2.1.0 at /opt/tool/bin/tool\n");
  EXPECT_EQ(run["pinned"]["image_choice"]["images"][0]["ref"], "test/base:1");
  EXPECT_EQ(run["pinned"]["image_digests"], json::array({base, tool}));
  const json& choice = run["pinned"]["image_choice"];
  EXPECT_EQ(choice["provided"], json({{"tool", "2.1.0"}}));
  EXPECT_EQ(choice["images"], json::array({{{"ref", "test/base:1"}, {"digest", base}},
                                           {{"ref", "test/tool:2"}, {"digest", tool}}}));
  EXPECT_NE(choice.value("reason", "").find("stacked on test/base:1"), std::string::npos) << choice.dump();

  const json by_date = run_and_wait(
      {{"toolchains", {{"python", "auto"}}}, {"as_of", "2023-04-11"}, {"argv", {"/bin/sh", "-c", "echo $PATH"}}});
  ASSERT_EQ(by_date.value("state", ""), "succeeded") << by_date.dump();
  EXPECT_EQ(by_date["pinned"]["image_digests"], json::array({base, python}));
  EXPECT_EQ(by_date["pinned"]["image_choice"]["python_auto"]["version"], "3.10.11");
  EXPECT_EQ(by_date["result"]["stdout"]["head"], "/opt/tool/bin:" + std::string(kDefaultPath) + "\n");

  expect_error(call("POST", "/v1/runs", {{"toolchains", {{"tool", "3"}}}, {"argv", {"tool"}}}), 404,
               "no_matching_image", "test/lost:3 would, but its base test/gone:1 is not installed");
}

// The basis of replay: 20 varied stored runs (images, layers, toolchains, workspaces in each mode, limits in
// units, stdin, labels, JUnit, failures and a timeout), each submitted again as its stored {spec, pinned}, give
// the same spec and the same pins; a ref moved since does not change what a pinned run uses.
TEST_F(CapsuledImages, TwentyStoredRunsResubmitToTheSameSpecAndPins) {
  start();
  const fs::path base_root = make_base_rootfs();
  const std::string base = import_rootfs(base_root, "test/base:1", {{"org.capsule.toolchain.shell", "1.0.0"}})["digest"];
  import_rootfs(base_root, "test/base:tester", {}, {{"user", "tester"}});
  import_tool_layer(make_tool_layer(), "test/tool:2", {{"tool", "2.1.0"}});
  const fs::path workspace = make_dir("replay-ws");
  const fs::path rw_workspace = make_dir("replay-rw");  // an rw workspace must not be root's (docs/api.md)
  ASSERT_EQ(::chown(rw_workspace.c_str(), 1000, 1000), 0);
  fs::create_directories(workspace / "reports");
  write_file(workspace / "reports/TEST-a.xml",
             "<testsuite name=\"a\" tests=\"2\" failures=\"1\"><testcase name=\"x\"/><testcase name=\"y\">"
             "<failure message=\"no\"/></testcase></testsuite>");
  const std::vector<json> specs = {
      sh("echo plain"),
      sh("exit 3"),
      {{"argv", {"/bin/sh", "-c", "cat"}}, {"stdin", "typed input\n"}},
      {{"argv", {"/bin/sh", "-c", "echo $A $B"}}, {"env", {{"A", "1"}, {"B", "two words"}}}},
      {{"argv", {"/bin/sh", "-c", "pwd"}}, {"cwd", "/tmp"}},
      {{"argv", {"true"}}, {"limits", {{"wall_time", "90s"}, {"memory", "512m"}, {"pids", 64}, {"cpus", 1.5}}}},
      {{"argv", {"true"}}, {"limits", {{"tmp_size", "32m"}, {"output_cap", "64k"}, {"kill_grace", 1500}}}},
      {{"argv", {"true"}}, {"limits", {{"disk", "64m"}, {"inodes", 4096}, {"cpu_time", "1m"}}}},
      {{"argv", {"sleep", "5"}}, {"limits", {{"wall_time", 300}, {"kill_grace", 100}}}},
      {{"argv", {"true"}}, {"labels", {{"bench", "replay"}, {"case", "labels"}}}},
      {{"argv", {"/bin/sh", "-c", "ls /workspace"}}, {"workspace", workspace.string()}},
      {{"argv", {"/bin/sh", "-c", "ls /workspace"}}, {"workspace", {{"path", workspace.string()}, {"mode", "ro"}}}},
      {{"argv", {"/bin/sh", "-c", "touch /workspace/rw-mark"}}, {"workspace", {{"path", rw_workspace.string()}, {"mode", "rw"}}}},
      {{"argv", {"cp", "/workspace/reports/TEST-a.xml", "/workspace/reports/TEST-run.xml"}},
       {"workspace", workspace.string()}, {"collect", {{"junit", {"reports/*.xml"}}}}},
      {{"image", "test/base:1"}, {"argv", {"cat", "/marker"}}},
      {{"image", base}, {"argv", {"cat", "/marker"}}},
      {{"image", "test/base:tester"}, {"argv", {"/bin/sh", "-c", "echo $HOME"}}},
      {{"image", "test/base:1"}, {"layers", {"test/tool:2"}}, {"argv", {"tool"}}},
      {{"toolchains", {{"tool", "2"}}}, {"argv", {"tool"}}},
      {{"toolchains", {{"shell", "1"}}}, {"argv", {"cat", "/marker"}}, {"policy", "default"}},
  };
  ASSERT_EQ(specs.size(), 20u);
  std::vector<json> stored;
  for (const json& spec : specs) {
    const json run = get_run(run_and_wait(spec)["id"]);
    ASSERT_TRUE(is_finished(run["state"])) << run.dump();
    ASSERT_TRUE(run["spec"].is_object() && run["pinned"].is_object()) << run.dump();
    EXPECT_EQ(run["pinned"]["policy_sha256"].get<std::string>().rfind("sha256:", 0), 0u) << run.dump();
    stored.push_back(run);
  }
  EXPECT_EQ(stored[8]["state"], "timed_out");
  EXPECT_EQ(stored[13]["tests"]["failed"], 1) << stored[13].dump();
  EXPECT_EQ(stored[18]["pinned"]["toolchains"], json({{"tool", "2.1.0"}}));

  // Move a ref: a resubmitted run keeps the digest it was pinned to; the plain spec alone follows the ref.
  const fs::path other_root = make_rootfs("moved");
  const std::string moved = import_rootfs(other_root, "test/base:1")["digest"];
  ASSERT_NE(moved, base);
  for (const json& old : stored) {
    const json again = run_and_wait({{"spec", old["spec"]}, {"pinned", old["pinned"]}});
    EXPECT_EQ(again["state"], old["state"]) << again.dump();
    EXPECT_EQ(again["spec"], old["spec"]) << "the stored spec is a request that stores as itself";
    EXPECT_EQ(again["pinned"], old["pinned"]) << again.dump();
  }
  const json by_pins = get_run(run_and_wait({{"spec", stored[14]["spec"]}, {"pinned", stored[14]["pinned"]}})["id"]);
  EXPECT_EQ(by_pins["result"]["stdout"]["head"], "base\n") << "the pinned image, not the moved ref";
  const json by_ref = run_and_wait(stored[14]["spec"]);
  EXPECT_EQ(by_ref["result"]["stdout"]["head"], "moved\n");
  EXPECT_EQ(by_ref["pinned"]["image_digests"], json::array({moved}));

  // Pins that no longer hold are refused with the field: an image gone, pins that do not fit the spec.
  json gone = stored[15]["pinned"];
  gone["image_digests"] = json::array({"sha256:" + std::string(64, 'e')});
  expect_error(call("POST", "/v1/runs", {{"spec", stored[15]["spec"]}, {"pinned", gone}}), 404, "image_not_found",
               "pinned.image_digests[0]");
  expect_error(call("POST", "/v1/runs", {{"spec", stored[0]["spec"]}, {"pinned", stored[15]["pinned"]}}), 400,
               "invalid_spec", "pinned.image_digests");
  expect_error(call("POST", "/v1/runs", {{"spec", stored[0]["spec"]}, {"pinned", {{"bogus", 1}}}}), 400,
               "invalid_spec", "pinned.bogus");
  expect_error(call("POST", "/v1/runs", {{"spec", stored[0]["spec"]}, {"extra", 1}}), 400, "invalid_spec", "extra");
}

TEST_F(CapsuledImages, StreamedImportSaveReimportRemoveAndGc) {
  start();
  const fs::path root = make_rootfs("beta");
  std::vector<json> events;
  const HttpResponse streamed = client().stream_lines(
      "POST", "/v1/images", {{"source", root.string()}, {"format", "rootfs"}, {"ref", "test/beta:1"}},
      {{"Accept", "application/x-ndjson"}}, [&](std::string_view line) { events.push_back(json::parse(line)); });
  ASSERT_EQ(streamed.status, 200);
  ASSERT_EQ(events.size(), 2u);
  EXPECT_EQ(events[0]["event"], "importing");
  EXPECT_EQ(events[1]["event"], "imported");
  const std::string digest = events[1]["image"]["digest"];

  const fs::path archive = dir_ / "beta.tar";
  ASSERT_EQ(call("POST", "/v1/images/" + http::url_encode("test/beta:1") + "/save", {{"path", archive.string()}}).status,
            200);
  ASSERT_TRUE(fs::exists(archive));
  const HttpResponse again = call("POST", "/v1/images", {{"source", archive.string()}, {"format", "archive"}, {"ref", "test/copy:1"}});
  ASSERT_EQ(again.status, 201) << again.body;
  EXPECT_EQ(body_json(again)["digest"], digest) << "save then import keeps the digest";

  EXPECT_EQ(body_json(call("DELETE", "/v1/images/" + http::url_encode("test/beta:1")))["removed"],
            json::array({"test/beta:1"}));
  EXPECT_EQ(call("POST", "/v1/images/gc").status, 200);
  EXPECT_EQ(run_and_wait({{"image", "test/copy:1"}, {"argv", {"/bin/cat", "/marker"}}})["result"]["stdout"]["head"],
            "beta\n");
  EXPECT_EQ(body_json(call("DELETE", "/v1/images/" + http::url_encode(digest)))["removed"], json::array({"test/copy:1"}));
  const json gc = body_json(call("POST", "/v1/images/gc"));
  EXPECT_GE(gc["blobs"].size(), 3u) << gc.dump();  // manifest, config, layer
  expect_error(call("POST", "/v1/runs", {{"image", "test/copy:1"}, {"argv", {"/bin/true"}}}), 404, "image_not_found",
               "test/copy:1");
}

TEST_F(CapsuledImages, ImportErrors) {
  start();
  expect_error(call("POST", "/v1/images", {{"source", "relative"}, {"format", "rootfs"}, {"ref", "a:1"}}), 400,
               "invalid_request", "source");
  expect_error(call("POST", "/v1/images", {{"source", "/x"}, {"format", "zip"}, {"ref", "a:1"}}), 400,
               "invalid_request", "format");
  expect_error(call("POST", "/v1/images", {{"source", "/x"}, {"format", "rootfs"}}), 400, "invalid_request", "ref");
  expect_error(call("POST", "/v1/images", {{"source", "/x"}, {"format", "layout"}, {"ref", "a:1"}, {"labels", {{"k", "v"}}}}),
               400, "invalid_request", "rootfs");
  expect_error(call("POST", "/v1/images", {{"source", "/nonexistent-dir"}, {"format", "layout"}, {"ref", "a:1"}}), 400,
               "invalid_image", "/nonexistent-dir");
  expect_error(call("POST", "/v1/images", {{"source", make_rootfs("x").string()}, {"format", "rootfs"}, {"ref", "Bad Ref"}}),
               400, "invalid_ref", "Bad Ref");
  expect_error(call("POST", "/v1/images", {{"source", make_rootfs("y").string()}, {"format", "rootfs"}, {"ref", "a:1"},
                                          {"labels", {{"org.capsule.layer.base", "Not A Ref"}}}}),
               400, "invalid_request", "labels.org.capsule.layer.base: not an image ref");
  expect_error(call("GET", "/v1/images/" + http::url_encode("no/such:1")), 404, "image_not_found", "no/such");
  expect_error(call("DELETE", "/v1/images/" + http::url_encode("no/such:1")), 404, "image_not_found", "no/such");
  EXPECT_TRUE(body_json(call("GET", "/v1/images"))["images"].empty());
}

}  // namespace
}  // namespace capsule::testing
