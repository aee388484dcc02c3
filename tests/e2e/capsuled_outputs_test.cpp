// Run outputs through a real capsuled: a cow run's writes fetched after it (files, directory tars, symlinks never
// followed) over the API and `capsule runs cp`, hidden from other users; collect.outputs; committing what a run
// installed into an image that an offline run then uses; the rw owner rule; retention of deleted runs' outputs.
#include <archive.h>
#include <archive_entry.h>
#include <sys/stat.h>
#include <unistd.h>

#include <map>

#include "http/unix_client.h"
#include "tests/support/auth_users.h"
#include "tests/support/capsuled_fixture.h"

namespace capsule::testing {
namespace {

const std::string kOutputsGroup = account_name("capsule-t-out");

struct TarItem {
  char type = '?';  // f, d, l, h
  std::string data, link;
};

std::map<std::string, TarItem> tar_items(const std::string& bytes) {
  std::map<std::string, TarItem> items;
  struct archive* a = archive_read_new();
  archive_read_support_format_tar(a);
  EXPECT_EQ(archive_read_open_memory(a, bytes.data(), bytes.size()), ARCHIVE_OK);
  archive_entry* entry;
  while (archive_read_next_header(a, &entry) == ARCHIVE_OK) {
    TarItem item;
    const auto type = archive_entry_filetype(entry);
    item.type = archive_entry_hardlink(entry) ? 'h' : type == AE_IFDIR ? 'd' : type == AE_IFLNK ? 'l' : 'f';
    if (archive_entry_symlink(entry)) item.link = archive_entry_symlink(entry);
    char buffer[4096];
    for (la_ssize_t n; (n = archive_read_data(a, buffer, sizeof buffer)) > 0;) item.data.append(buffer, n);
    std::string name = archive_entry_pathname(entry);
    if (name.ends_with('/')) name.pop_back();
    items[name] = item;
  }
  archive_read_free(a);
  return items;
}

class CapsuledOutputs : public Capsuled {
 protected:
  static void SetUpTestSuite() {
    try {
      create_group(kOutputsGroup);
      other_ = create_user(account_name("capsule-t-out-bob"), kOutputsGroup, {});
    } catch (const std::exception& e) {
      setup_error_ = e.what();
    }
  }
  static void TearDownTestSuite() {
    remove_user(account_name("capsule-t-out-bob"));
    remove_group(kOutputsGroup);
  }

  void SetUp() override {
    ASSERT_TRUE(setup_error_.empty()) << setup_error_;
    Capsuled::SetUp();
    const fs::path config = dir_ / "capsuled.json";
    write_file(config, json{{"socket_group", kOutputsGroup}}.dump());
    start({"--config", config.string()});
  }

  // A cow run of `script` in a workspace holding gone.txt and kept.txt; the finished run object.
  json cow_run(const std::string& script, const json& collect = nullptr) {
    const fs::path workspace = make_dir("ws-" + std::to_string(++runs_));
    write_file(workspace / "gone.txt", "x\n");
    write_file(workspace / "kept.txt", "kept\n");
    json spec = sh(script);
    spec["workspace"] = {{"path", workspace.string()}, {"mode", "cow"}};
    if (!collect.is_null()) spec["collect"] = collect;
    return run_and_wait(spec);
  }

  HttpResponse file(const std::string& id, const std::string& path) const {
    return call("GET", "/v1/runs/" + id + "/files?path=" + http::url_encode(path));
  }

  // A rootfs with a shell, cat, ls, mkdir and rm, a marker file, imported as `ref`; its digest.
  std::string import_base(const std::string& ref) {
    const fs::path root = make_dir("rootfs");
    for (const char* binary : {"/bin/sh", "/bin/cat", "/bin/ls", "/bin/mkdir", "/bin/rm"}) copy_with_libraries(binary, root);
    if (fs::exists("/lib64")) fs::create_directories(root / "lib64");
    write_file(root / "marker", "base\n");
    const HttpResponse imported =
        call("POST", "/v1/images", {{"source", root.string()}, {"format", "rootfs"}, {"ref", ref}});
    EXPECT_EQ(imported.status, 201) << imported.body;
    return body_json(imported).value("digest", "");
  }

  static inline TestUser other_;
  static inline std::string setup_error_;
  int runs_ = 0;
};

constexpr const char* kBuild =
    "mkdir -p target/classes/pkg && echo A > target/classes/pkg/A.class && echo top > out.txt && "
    "ln -s /etc/shadow target/escape && rm gone.txt && mkdir -p /opt/made && echo r > /opt/made/r";

TEST_F(CapsuledOutputs, ACowRunsWritesAreFetchedAfterItFilesDirectoriesAndSymlinksUnfollowed) {
  const json run = cow_run(kBuild);
  ASSERT_EQ(run["state"], "succeeded") << run.dump();
  const std::string id = run["id"];
  const json& outputs = run["outputs"];
  ASSERT_TRUE(outputs["workspace"].is_object()) << outputs.dump();
  EXPECT_TRUE(outputs["workspace"]["digest"].get<std::string>().starts_with("sha256:"));
  EXPECT_GT(outputs["workspace"]["files"].get<int>(), 4);
  EXPECT_TRUE(outputs["root"].is_object()) << outputs.dump();
  EXPECT_GT(outputs["kept_until"].get<std::int64_t>(), run["times"]["finished"].get<std::int64_t>());

  const HttpResponse out = file(id, "out.txt");
  ASSERT_EQ(out.status, 200) << out.body;
  EXPECT_EQ(out.body, "top\n");
  EXPECT_TRUE(out.headers.at("content-type").starts_with("application/octet-stream"));
  EXPECT_EQ(file(id, "./target/../x").status, 400);
  EXPECT_EQ(file(id, "/opt/made/r").body, "r\n") << "an absolute path reads the root filesystem's layer";

  const HttpResponse dir = file(id, "target");
  ASSERT_EQ(dir.status, 200) << dir.body;
  EXPECT_TRUE(dir.headers.at("content-type").starts_with("application/x-tar"));
  const auto items = tar_items(dir.body);
  ASSERT_TRUE(items.count("classes/pkg/A.class")) << dir.body.size();
  EXPECT_EQ(items.at("classes/pkg/A.class").data, "A\n");
  EXPECT_EQ(items.at("classes").type, 'd');
  ASSERT_TRUE(items.count("escape"));
  EXPECT_EQ(items.at("escape").type, 'l');
  EXPECT_EQ(items.at("escape").link, "/etc/shadow");
  EXPECT_EQ(items.at("escape").data, "");

  // A symlink itself: a one-entry tar of the link, never what it points at.
  const HttpResponse link = file(id, "target/escape");
  ASSERT_EQ(link.status, 200) << link.body;
  EXPECT_TRUE(link.headers.at("content-type").starts_with("application/x-tar"));
  const auto link_items = tar_items(link.body);
  ASSERT_EQ(link_items.size(), 1u);
  EXPECT_EQ(link_items.at("escape").link, "/etc/shadow");

  expect_error(file(id, "gone.txt"), 404, "not_found", "gone.txt");  // deleted: only its whiteout is kept
  expect_error(file(id, "kept.txt"), 404, "not_found", "kept.txt");  // untouched: not in the outputs
  expect_error(file(id, "target/../../etc/passwd"), 400, "invalid_query", "..");
  // A NUL never reaches the route: the HTTP layer refuses such a target (400 bad_request).
  expect_error(call("GET", "/v1/runs/" + id + "/files?path=a%00b"), 400, "bad_request", "malformed");
  expect_error(call("GET", "/v1/runs/" + id + "/files"), 400, "invalid_query", "path");
  expect_error(file("0123456789abcdef", "out.txt"), 404, "not_found", "0123456789abcdef");

  // Another user sees no such run.
  const UserCall foreign = call_as(other_, socket_, "GET", "/v1/runs/" + id + "/files?path=out.txt");
  EXPECT_EQ(foreign.status, 404) << foreign.body << foreign.failure;
  EXPECT_EQ(foreign.json()["error"]["code"], "not_found");

  // The CLI: a file, and a directory unpacked with its symlink kept as a link.
  const fs::path dest = dir_ / "fetched";
  Cli cli = run_capsule_cli(dir_, {"--socket", socket_, "runs", "cp", id + ":target", dest.string()});
  ASSERT_EQ(cli.code, 0) << cli.err;
  EXPECT_EQ(slurp(dest / "classes/pkg/A.class"), "A\n");
  EXPECT_TRUE(fs::is_symlink(dest / "escape"));
  EXPECT_EQ(fs::read_symlink(dest / "escape"), "/etc/shadow");
  cli = run_capsule_cli(dir_, {"--socket", socket_, "runs", "cp", id + ":out.txt", (dir_ / "out-copy").string()});
  ASSERT_EQ(cli.code, 0) << cli.err;
  EXPECT_EQ(slurp(dir_ / "out-copy"), "top\n");
}

TEST_F(CapsuledOutputs, CollectOutputsKeepsOnlyWhatItsGlobsNameAndEmptyKeepsNothing) {
  const json some = cow_run(kBuild, {{"outputs", {"target/**/*.class"}}});
  ASSERT_EQ(some["state"], "succeeded") << some.dump();
  EXPECT_TRUE(some["outputs"]["root"].is_null()) << "no absolute glob: the root filesystem's changes are not kept";
  EXPECT_EQ(file(some["id"], "target/classes/pkg/A.class").body, "A\n");
  expect_error(file(some["id"], "out.txt"), 404, "not_found", "out.txt");
  expect_error(file(some["id"], "/opt/made/r"), 404, "outputs_not_kept", "root");

  const json none = cow_run(kBuild, {{"outputs", json::array()}});
  EXPECT_TRUE(none["outputs"]["workspace"].is_null()) << none.dump();
  EXPECT_TRUE(none["outputs"]["reason"].get<std::string>().find("[]") != std::string::npos) << none.dump();
  expect_error(file(none["id"], "out.txt"), 404, "outputs_not_kept", "no kept outputs");
  expect_error(call("POST", "/v1/runs/" + none["id"].get<std::string>() + "/commit", {{"ref", "x:1"}}), 400,
               "not_committable", "host image");
}

TEST_F(CapsuledOutputs, ACommittedRunIsAnImageAnOfflineRunUses) {
  const std::string base = import_base("test/out-base:1");
  const json a = run_and_wait({{"image", "test/out-base:1"},
                               {"argv", {"/bin/sh", "-c", "mkdir -p /root/.m2 && echo dep > /root/.m2/dep.jar && rm /marker"}}});
  ASSERT_EQ(a["state"], "succeeded") << a.dump();
  ASSERT_TRUE(a["outputs"]["root"].is_object()) << a.dump();
  const std::string run_a = a["id"];

  expect_error(call("POST", "/v1/runs/" + run_a + "/commit", {{"ref", "sha256:" + std::string(64, 'a')}}), 400,
               "invalid_ref", "name");
  expect_error(call("POST", "/v1/runs/" + run_a + "/commit", json::object()), 400, "invalid_request", "ref");
  const UserCall foreign = call_as(other_, socket_, "POST", "/v1/runs/" + run_a + "/commit", {{"ref", "bob:1"}});
  EXPECT_EQ(foreign.status, 404) << foreign.body;

  const HttpResponse committed = call("POST", "/v1/runs/" + run_a + "/commit", {{"ref", "test/out-built:1"}});
  ASSERT_EQ(committed.status, 201) << committed.body;
  const json image = body_json(committed);
  EXPECT_EQ(image["refs"], json::array({"test/out-built:1"}));
  EXPECT_EQ(image, body_json(call("GET", "/v1/images/" + http::url_encode("test/out-built:1"))));
  EXPECT_EQ(image["config"]["labels"]["org.capsule.committed.from_run"], run_a) << image.dump();
  EXPECT_NE(image["digest"], base);

  const json b = run_and_wait({{"image", "test/out-built:1"},
                               {"network", "none"},
                               {"argv", {"/bin/sh", "-c", "cat /root/.m2/dep.jar; ls /marker 2>/dev/null || echo no-marker"}}});
  ASSERT_EQ(b["state"], "succeeded") << b.dump();
  EXPECT_EQ(b["result"]["stdout"]["head"], "dep\nno-marker\n");
  EXPECT_EQ(b["pinned"]["image_digests"][0], image["digest"]) << "the run pins the committed image";

  const Cli cli = run_capsule_cli(dir_, {"--socket", socket_, "runs", "commit", run_a, "test/out-built:2"});
  ASSERT_EQ(cli.code, 0) << cli.err;
  EXPECT_EQ(cli.out, image["digest"].get<std::string>() + "\n") << "the same layer on the same base: the same image";
}

TEST_F(CapsuledOutputs, WhatAProxyRunFetchedIntoItsM2IsCommittedForAnOfflineRun) {
  import_base("test/out-base:1");
  // ~/.m2 of a proxy run is a bind of the run's own dir, not in the root's upper: it is packed into the root layer.
  const json a = run_and_wait({{"image", "test/out-base:1"}, {"network", "proxy"}, {"as_of", "2024-01-01"},
                               {"argv", {"/bin/sh", "-c", "mkdir -p $HOME/.m2/repository/g && echo jar > $HOME/.m2/repository/g/a.jar"}}});
  ASSERT_EQ(a["state"], "succeeded") << a.dump();
  const HttpResponse committed = call("POST", "/v1/runs/" + a["id"].get<std::string>() + "/commit", {{"ref", "test/out-m2:1"}});
  ASSERT_EQ(committed.status, 201) << committed.body;
  const json b = run_and_wait({{"image", "test/out-m2:1"}, {"network", "none"},
                               {"argv", {"/bin/sh", "-c", "cat $HOME/.m2/repository/g/a.jar"}}});
  EXPECT_EQ(b["result"]["stdout"]["head"], "jar\n") << b.dump();
}

TEST_F(CapsuledOutputs, ALiveSessionIsCommittedWithWhatItInstalled) {
  import_base("test/out-base:1");
  const HttpResponse created = call("POST", "/v1/sessions", {{"image", "test/out-base:1"}});
  ASSERT_EQ(created.status, 201) << created.body;
  const std::string session = body_json(created)["id"];
  const std::string target = "/v1/sessions/" + session;
  const HttpResponse exec = call("POST", target + "/exec", {{"script", "mkdir -p /opt/venv && echo pkg > /opt/venv/pkg"}});
  ASSERT_EQ(exec.status, 200) << exec.body;
  const UserCall foreign = call_as(other_, socket_, "POST", target + "/commit", {{"ref", "bob:1"}});
  EXPECT_EQ(foreign.status, 404) << foreign.body;
  const HttpResponse committed = call("POST", target + "/commit", {{"ref", "test/out-session:1"}});
  ASSERT_EQ(committed.status, 201) << committed.body;
  EXPECT_EQ(body_json(committed)["config"]["labels"]["org.capsule.committed.from_session"], session);
  const Cli cli = run_capsule_cli(dir_, {"--socket", socket_, "session", "commit", session, "test/out-session:2"});
  ASSERT_EQ(cli.code, 0) << cli.err;
  // The digest the API gave the ref (the image's config carries its creation time, so two commits of the same
  // changes a second apart differ: compare with the ref, not with the first commit).
  const HttpResponse second = call("GET", "/v1/images/" + http::url_encode("test/out-session:2"));
  ASSERT_EQ(second.status, 200) << second.body;
  EXPECT_EQ(cli.out, body_json(second)["digest"].get<std::string>() + "\n");
  const Cli unknown = run_capsule_cli(dir_, {"--socket", socket_, "session", "commit", "nosuch", "x:1"});
  EXPECT_NE(unknown.code, 0);
  EXPECT_NE(unknown.err.find("no session with id nosuch"), std::string::npos) << unknown.err;
  const json run = run_and_wait({{"image", "test/out-session:1"}, {"argv", {"/bin/cat", "/opt/venv/pkg"}}});
  EXPECT_EQ(run["result"]["stdout"]["head"], "pkg\n") << run.dump();
  EXPECT_EQ(call("DELETE", target).status, 200);

  const HttpResponse host = call("POST", "/v1/sessions", json::object());
  ASSERT_EQ(host.status, 201) << host.body;
  const std::string host_session = body_json(host)["id"];
  expect_error(call("POST", "/v1/sessions/" + host_session + "/commit", {{"ref", "x:1"}}), 400, "not_committable",
               "host image");
  EXPECT_EQ(call("DELETE", "/v1/sessions/" + host_session).status, 200);
}

TEST_F(CapsuledOutputs, AnRwWorkspaceOwnedByRootIsRefusedNamingTheOwnerAndTheFix) {
  const fs::path workspace = make_dir("root-owned");
  json spec = sh("echo x > /workspace/f");
  spec["workspace"] = {{"path", workspace.string()}, {"mode", "rw"}};
  const HttpResponse refused = call("POST", "/v1/runs?wait=true", spec);
  expect_error(refused, 400, "invalid_spec", workspace.string());
  EXPECT_NE(refused.body.find("uid 0"), std::string::npos) << refused.body;
  EXPECT_NE(refused.body.find("chown"), std::string::npos) << refused.body;
  EXPECT_NE(refused.body.find("cow"), std::string::npos) << refused.body;
}

TEST_F(CapsuledOutputs, TheOutputsOfADeletedRunGoWithTheNextSweep) {
  const json run = cow_run(kBuild);
  const std::string id = run["id"];
  const std::string hex = run["outputs"]["workspace"]["digest"].get<std::string>().substr(7);
  const fs::path blob = state_ / "outputs/blobs/sha256" / hex;
  ASSERT_TRUE(fs::exists(blob));
  ASSERT_TRUE(fs::exists(state_ / "outputs/runs" / (id + ".json")));
  ASSERT_EQ(call("DELETE", "/v1/runs/" + id).status, 200);
  stop();
  restart();  // the sweep runs at start (and every retention_interval_s)
  EXPECT_FALSE(fs::exists(blob));
  EXPECT_FALSE(fs::exists(state_ / "outputs/runs" / (id + ".json")));
  EXPECT_TRUE(fs::is_empty(state_ / "outputs/blobs/sha256")) << "nothing of the run is left";
}

}  // namespace
}  // namespace capsule::testing
