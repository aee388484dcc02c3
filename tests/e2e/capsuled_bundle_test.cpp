// Audit bundles end to end: a run on a small imported image with a snapshot workspace, and a network "proxy" run,
// each exported, the state dir wiped, imported into the fresh daemon and replayed there with no upstream: the
// same verdict, output and dependency set, replay_of linking the original. Hostile imports are clean 400s; a run
// whose pinned image is gone is a 409; other users' runs are not theirs to export.
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <set>

#include "tests/support/auth_users.h"
#include "tests/support/capsuled_fixture.h"

namespace capsule::testing {
namespace {

std::set<std::string> dependency_set(const json& run) {
  std::set<std::string> out;
  for (const auto& dependency : run["pinned"]["dependencies"]) out.insert(dependency["url"].get<std::string>() + " " + dependency["sha256"].get<std::string>());
  return out;
}

class CapsuledBundle : public Capsuled {
 protected:
  Cli capsule(std::vector<std::string> args) const {
    args.insert(args.begin(), {"--socket", socket_});
    return run_capsule_cli(dir_, args);
  }

  // bundle.json of a bundle tar.
  json manifest_of(const fs::path& bundle) const {
    const fs::path out = make_dir("manifest-" + bundle.stem().string());
    sh_ok("tar -xf " + bundle.string() + " -C " + out.string() + " bundle.json");
    return json::parse(slurp(out / "bundle.json"));
  }

  // Stops the daemon, removes its whole state dir and starts a fresh one with `flags`.
  void wipe_and_start(std::vector<std::string> flags = {}) {
    stop();
    fs::remove_all(state_);
    start(std::move(flags));
    ASSERT_EQ(list().size(), 0u);
  }

  json replay(const std::string& id) const {
    const HttpResponse response = call("POST", "/v1/runs/" + id + "/replay?wait=true");
    EXPECT_EQ(response.status, 200) << response.body;
    const json runs = body_json(response)["runs"];
    return runs.empty() ? json() : runs[0];
  }
};

TEST_F(CapsuledBundle, ImageAndSnapshotRunReplaysAfterTheStateIsWiped) {
  start();
  const fs::path root = make_dir("rootfs");
  for (const char* binary : {"/bin/sh", "/bin/cat", "/bin/ls"}) copy_with_libraries(binary, root);
  const HttpResponse imported = call("POST", "/v1/images", {{"source", root.string()}, {"format", "rootfs"}, {"ref", "t/bundle:1"}});
  ASSERT_EQ(imported.status, 201) << imported.body;
  const std::string image = body_json(imported)["digest"];
  const fs::path tree = make_dir("tree");
  write_file(tree / "input.txt", "the audited input\n");
  const HttpResponse snapshot = call("POST", "/v1/snapshots", {{"dir", tree.string()}});
  ASSERT_EQ(snapshot.status, 201) << snapshot.body;
  const std::string snapshot_digest = body_json(snapshot)["digest"];

  json spec = sh("cat /workspace/input.txt && echo to-stderr >&2 && ls /workspace");
  spec["image"] = "t/bundle:1";
  spec["workspace"] = {{"snapshot", snapshot_digest}};
  const json original = run_and_wait(spec);
  ASSERT_EQ(original["state"], "succeeded") << original.dump(2);
  const std::string id = original["id"];

  const Cli exported = capsule({"runs", "export", id, "-o", (dir_ / "a.tar").string()});
  ASSERT_EQ(exported.code, 0) << exported.err;
  ASSERT_EQ(capsule({"runs", "export", id, "-o", (dir_ / "b.tar").string()}).code, 0);
  EXPECT_EQ(slurp(dir_ / "a.tar"), slurp(dir_ / "b.tar")) << "an export is deterministic";
  const json manifest = manifest_of(dir_ / "a.tar");
  EXPECT_EQ(manifest["format"], "capsule-bundle/1");
  EXPECT_EQ(manifest["run"], get_run(id));
  EXPECT_EQ(manifest["replayable"], true) << manifest["not_replayable"];
  ASSERT_EQ(manifest["images"].size(), original["pinned"]["image_digests"].size());
  EXPECT_EQ(manifest["images"].back()["digest"], image);
  EXPECT_EQ(manifest["snapshot"]["digest"], snapshot_digest);
  EXPECT_EQ(manifest["logs"]["stderr"]["size"], 10);

  wipe_and_start();
  EXPECT_EQ(call("GET", "/v1/images/" + image).status, 404);
  const Cli imported_cli = capsule({"runs", "import", (dir_ / "a.tar").string(), "--json"});
  ASSERT_EQ(imported_cli.code, 0) << imported_cli.err;
  const json stored = json::parse(imported_cli.out);
  EXPECT_EQ(stored["id"], id);
  EXPECT_EQ(stored["state"], "succeeded");
  EXPECT_EQ(stored["imported"]["from"], (dir_ / "a.tar").string());
  EXPECT_EQ(stored["spec"], original["spec"]);
  EXPECT_EQ(stored["result"], original["result"]);
  EXPECT_EQ(capsule({"runs", "logs", id, "--stderr"}).out, "to-stderr\n");
  expect_error(call("POST", "/v1/runs/import", {{"path", (dir_ / "a.tar").string()}}), 409, "run_exists", id);

  const json again = replay(id);
  EXPECT_EQ(again["state"], "succeeded") << again.dump(2);
  EXPECT_EQ(again["replay_of"], id);
  EXPECT_EQ(again["result"]["stdout"], original["result"]["stdout"]);
  EXPECT_EQ(again["pinned"]["image_digests"], original["pinned"]["image_digests"]);
  EXPECT_EQ(again["pinned"]["workspace_digest"], snapshot_digest);

  // A pinned image no longer installed: the export names it.
  for (const auto& digest : original["pinned"]["image_digests"]) {
    ASSERT_EQ(call("DELETE", "/v1/images/" + digest.get<std::string>()).status, 200);
  }
  ASSERT_EQ(call("POST", "/v1/images/gc").status, 200);
  expect_error(call("GET", "/v1/runs/" + id + "/bundle"), 409, "bundle_incomplete", image);
}

// A bundle comes from another machine: the host path its spec names as the workspace is never opened by a
// replay here (it could be anyone's home); the auditor names the workspace, or the bundle carries a snapshot.
TEST_F(CapsuledBundle, AnImportedRunNeverReplaysOnAHostPathFromItsBundle) {
  start();
  const fs::path root = make_dir("rootfs");
  for (const char* binary : {"/bin/sh", "/bin/cat"}) copy_with_libraries(binary, root);
  ASSERT_EQ(call("POST", "/v1/images", {{"source", root.string()}, {"format", "rootfs"}, {"ref", "t/bundle:1"}}).status, 201);
  const fs::path victim = make_dir("victim");
  write_file(victim / "input.txt", "what the original read\n");
  json spec = sh("cat /workspace/input.txt");
  spec["image"] = "t/bundle:1";
  spec["workspace"] = {{"path", victim.string()}};
  const json original = run_and_wait(spec);
  ASSERT_EQ(original["state"], "succeeded") << original.dump(2);
  const std::string id = original["id"];
  ASSERT_EQ(capsule({"runs", "export", id, "-o", (dir_ / "path.tar").string()}).code, 0);

  wipe_and_start();
  write_file(victim / "input.txt", "someone else's secret\n");  // what that path holds on this machine
  ASSERT_EQ(call("POST", "/v1/runs/import", {{"path", (dir_ / "path.tar").string()}}).status, 201);
  const HttpResponse refused = call("POST", "/v1/runs/" + id + "/replay?wait=true");
  expect_error(refused, 400, "invalid_request", "imported from another machine");
  EXPECT_EQ(refused.body.find("secret"), std::string::npos);

  const fs::path mine = make_dir("mine");
  write_file(mine / "input.txt", "the auditor's copy\n");
  const HttpResponse named = call("POST", "/v1/runs/" + id + "/replay?wait=true", {{"workspace", {{"path", mine.string()}}}});
  ASSERT_EQ(named.status, 200) << named.body;
  const json replayed = body_json(named)["runs"][0];
  EXPECT_EQ(replayed["result"]["stdout"]["head"], "the auditor's copy\n") << replayed.dump(2);
  EXPECT_EQ(replayed["spec"]["workspace"]["path"], mine.string());
  expect_error(call("POST", "/v1/runs/" + id + "/replay", {{"workspace", {{"path", "relative"}}}}), 400, "invalid_spec",
               "workspace.path");
  EXPECT_EQ(call("GET", "/v1/health").status, 200);
}

// A run on an image committed from an earlier run: the bundle carries the base's layers and the committed one, and
// `capsule replay` on a wiped daemon runs it on the very same image.
TEST_F(CapsuledBundle, ARunOnACommittedImageTravelsWithItsLayersAndReplaysFromTheCli) {
  start();
  const fs::path root = make_dir("rootfs");
  for (const char* binary : {"/bin/sh", "/bin/cat", "/bin/mkdir"}) copy_with_libraries(binary, root);
  ASSERT_EQ(call("POST", "/v1/images", {{"source", root.string()}, {"format", "rootfs"}, {"ref", "t/base:1"}}).status, 201);
  json install = sh("mkdir -p /opt/tool && echo installed-by-run-a > /opt/tool/version");
  install["image"] = "t/base:1";
  const json a = run_and_wait(install);
  ASSERT_EQ(a["state"], "succeeded") << a.dump(2);
  const HttpResponse committed = call("POST", "/v1/runs/" + a["id"].get<std::string>() + "/commit", {{"ref", "t/committed:1"}});
  ASSERT_EQ(committed.status, 201) << committed.body;
  const std::string image = body_json(committed)["digest"];

  json use = sh("cat /opt/tool/version");
  use["image"] = "t/committed:1";
  use["network"] = "none";
  const json b = run_and_wait(use);
  ASSERT_EQ(b["state"], "succeeded") << b.dump(2);
  ASSERT_EQ(b["pinned"]["image_digests"], json::array({image})) << b["pinned"];
  const std::string id = b["id"];
  const Cli exported = capsule({"runs", "export", id, "-o", (dir_ / "committed.tar").string()});
  ASSERT_EQ(exported.code, 0) << exported.err;
  const json manifest = manifest_of(dir_ / "committed.tar");
  ASSERT_EQ(manifest["images"].size(), 1u) << manifest["images"];
  EXPECT_EQ(manifest["images"][0]["digest"], image);

  wipe_and_start();
  ASSERT_EQ(capsule({"runs", "import", (dir_ / "committed.tar").string()}).code, 0);
  EXPECT_EQ(body_json(call("GET", "/v1/images/" + image))["config"]["labels"]["org.capsule.committed.from_run"], a["id"]);
  const Cli replayed = capsule({"replay", id, "--json"});
  ASSERT_EQ(replayed.code, 0) << replayed.err << replayed.out;
  const json again = json::parse(replayed.out);
  EXPECT_EQ(again["state"], "succeeded") << again.dump(2);
  EXPECT_EQ(again["replay_of"], id);
  EXPECT_EQ(again["pinned"]["image_digests"], json::array({image}));
  EXPECT_EQ(again["result"]["stdout"]["head"], "installed-by-run-a\n");
}

TEST_F(CapsuledBundle, ProxyRunReplaysOfflineFromTheImportedObjects) {
  const std::string script = std::string(CAPSULE_SOURCE_DIR) + "/tests/proxy/fixtures/package_upstream.py";
  FILE* out = popen(("python3 " + script + " " + (dir_ / "fixture").string()).c_str(), "r");
  ASSERT_NE(out, nullptr);
  char line[4096] = {};
  const bool read = fgets(line, sizeof line, out) != nullptr;
  ASSERT_EQ(pclose(out), 0);
  ASSERT_TRUE(read);
  const json fixture = json::parse(line);
  write_file(dir_ / "config.json", json{{"proxy", {{"pypi_mirror", fixture["pypi_mirror"]}}}}.dump());
  start({"--config", (dir_ / "config.json").string()});

  json spec = sh("cd /tmp && python3 -m pip download -q --no-cache-dir -d dl alpha >&2 && ls dl");
  spec["network"] = "proxy";
  spec["as_of"] = "2022-07-01";
  const json original = run_and_wait(spec);
  ASSERT_EQ(original["state"], "succeeded") << original.dump(2);
  ASSERT_FALSE(original["pinned"]["dependencies"].empty());
  const std::string id = original["id"];
  ASSERT_EQ(capsule({"runs", "export", id, "-o", (dir_ / "proxy.tar").string()}).code, 0);
  const json manifest = manifest_of(dir_ / "proxy.tar");
  EXPECT_EQ(manifest["replayable"], false) << "the host image does not replay byte for byte";
  EXPECT_FALSE(manifest["not_replayable"].empty());
  EXPECT_EQ(manifest["dependencies"].size(), original["pinned"]["dependencies"].size());

  // The upstream goes, with the whole state: the new daemon's proxy is offline with an empty cache.
  fs::remove_all(dir_ / "fixture");
  write_file(dir_ / "offline.json", json{{"proxy", {{"offline", true}}}}.dump());
  wipe_and_start({"--config", (dir_ / "offline.json").string()});
  const HttpResponse imported = call("POST", "/v1/runs/import", {{"path", (dir_ / "proxy.tar").string()}});
  ASSERT_EQ(imported.status, 201) << imported.body;
  const json again = replay(id);
  EXPECT_EQ(again["state"], "succeeded") << again.dump(2);
  EXPECT_EQ(again["replay_of"], id);
  EXPECT_EQ(again["result"]["stdout"]["head"], original["result"]["stdout"]["head"]);
  EXPECT_EQ(dependency_set(again), dependency_set(original));
}

TEST_F(CapsuledBundle, HostileBundlesAreCleanRefusals) {
  start();
  const fs::path files = make_dir("hostile");
  write_file(files / "bundle.json", "{}");
  sh_ok("cd " + files.string() + " && ln -s /etc/shadow link && tar -cf " + (dir_ / "symlink.tar").string() +
        " bundle.json link");
  expect_error(call("POST", "/v1/runs/import", {{"path", (dir_ / "symlink.tar").string()}}), 400, "invalid_bundle", "link");
  sh_ok("cd " + files.string() + " && tar -cf " + (dir_ / "dotdot.tar").string() + " -P ../hostile/bundle.json");
  expect_error(call("POST", "/v1/runs/import", {{"path", (dir_ / "dotdot.tar").string()}}), 400, "invalid_bundle", "..");
  sh_ok("cd " + files.string() + " && tar -cf " + (dir_ / "absolute.tar").string() + " -P " + (files / "bundle.json").string());
  expect_error(call("POST", "/v1/runs/import", {{"path", (dir_ / "absolute.tar").string()}}), 400, "invalid_bundle", "entry");
  write_file(dir_ / "text.tar", std::string(4096, 'x'));
  expect_error(call("POST", "/v1/runs/import", {{"path", (dir_ / "text.tar").string()}}), 400, "invalid_bundle", "tar");
  expect_error(call("POST", "/v1/runs/import", {{"path", (files / "bundle.json").string()}, {"x", 1}}), 400,
               "invalid_request", "path");
  expect_error(call("GET", "/v1/runs/0000000000000000/bundle"), 404, "not_found", "0000000000000000");
  EXPECT_TRUE(fs::is_empty(state_ / "bundle-staging")) << "a staging dir was left behind";
  EXPECT_EQ(health()["status"], "ok");
}

// ---- Other users.
const std::string kBundleGroup = account_name("capsule-b");

class CapsuledBundleUsers : public CapsuledBundle {
 protected:
  static void SetUpTestSuite() {
    try {
      create_group(kBundleGroup);
      alice_ = create_user(account_name("capsule-b-alice"), kBundleGroup, {});
      bob_ = create_user(account_name("capsule-b-bob"), kBundleGroup, {});
    } catch (const std::exception& e) {
      setup_error_ = e.what();
    }
  }
  static void TearDownTestSuite() {
    remove_user(account_name("capsule-b-alice"));
    remove_user(account_name("capsule-b-bob"));
    remove_group(kBundleGroup);
  }
  void SetUp() override {
    ASSERT_TRUE(setup_error_.empty()) << setup_error_;
    Capsuled::SetUp();
    write_file(dir_ / "capsuled.json", json{{"socket_group", kBundleGroup}}.dump());
    start({"--config", (dir_ / "capsuled.json").string()});
  }
  static inline TestUser alice_, bob_;
  static inline std::string setup_error_;
};

TEST_F(CapsuledBundleUsers, OnlyTheRunsOwnerExportsItAndAnImportIsTheImporters) {
  const UserCall submitted = call_as(alice_, socket_, "POST", "/v1/runs?wait=true", sh("echo alice"));
  ASSERT_EQ(submitted.status, 200) << submitted.body;
  const std::string id = submitted.json()["id"];
  const UserCall refused = call_as(bob_, socket_, "GET", "/v1/runs/" + id + "/bundle");
  EXPECT_EQ(refused.status, 404) << refused.body;
  const UserCall own = call_as(alice_, socket_, "GET", "/v1/runs/" + id + "/bundle");
  EXPECT_EQ(own.status, 200);
  write_file(dir_ / "alice.tar", own.body);
  sh_ok("chmod 600 " + (dir_ / "alice.tar").string() + " && chown " + std::to_string(alice_.uid) + " " +
        (dir_ / "alice.tar").string());
  const UserCall unreadable = call_as(bob_, socket_, "POST", "/v1/runs/import", {{"path", (dir_ / "alice.tar").string()}});
  EXPECT_EQ(unreadable.status, 403) << unreadable.body;
  ASSERT_EQ(call("DELETE", "/v1/runs/" + id).status, 200);
  sh_ok("chown " + std::to_string(bob_.uid) + " " + (dir_ / "alice.tar").string());
  const UserCall imported = call_as(bob_, socket_, "POST", "/v1/runs/import", {{"path", (dir_ / "alice.tar").string()}});
  ASSERT_EQ(imported.status, 201) << imported.body;
  EXPECT_EQ(imported.json()["peer"]["uid"], bob_.uid);
  EXPECT_EQ(imported.json()["imported"]["peer"]["uid"], alice_.uid);
  EXPECT_EQ(call_as(alice_, socket_, "GET", "/v1/runs/" + id).status, 404) << "the imported run is bob's";
}

}  // namespace
}  // namespace capsule::testing
