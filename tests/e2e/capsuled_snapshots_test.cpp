// Snapshots end to end: one digest for one tree whatever its mtimes, owners or creation order; git and tar
// sources; hostile sources refused; runs on a snapshot workspace (copy-on-write, the snapshot unchanged);
// reproducible runs pinning their directory; removal refused while in use; other users' snapshots hidden; trees
// dated by the snapshot's mtime (the commit's for git); an unchanged directory found again, not made again.
#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <set>
#include <thread>

#include "base/dates.h"
#include "daemon/snapshots/snapshot_reuse.h"

#include "store/digest.h"
#include "tests/support/auth_users.h"
#include "tests/support/capsuled_fixture.h"

namespace capsule::testing {
namespace {

class CapsuledSnapshots : public Capsuled {
 protected:
  void SetUp() override {
    Capsuled::SetUp();
    start();
  }

  json create(const json& source) const {
    const HttpResponse response = call("POST", "/v1/snapshots", source);
    EXPECT_EQ(response.status, 201) << response.body;
    return body_json(response);
  }
  std::string digest_of(const json& source) const { return create(source).value("digest", ""); }

  // The exported canonical tar.
  std::string export_tar(const std::string& digest) const {
    const HttpResponse response = call("GET", "/v1/snapshots/" + digest);
    EXPECT_EQ(response.status, 200) << response.body;
    return response.body;
  }
  // The exported tar unpacked into a new dir; that dir.
  fs::path unpacked(const std::string& digest, const std::string& name) const {
    const fs::path tar = dir_ / (name + ".tar");
    write_file(tar, export_tar(digest));
    const fs::path out = make_dir(name);
    EXPECT_EQ(std::system(("tar -xf " + tar.string() + " -C " + out.string()).c_str()), 0);
    return out;
  }

  // A tree: files, an executable, a subdirectory, a symlink; `reversed` creates them in another order.
  fs::path tree(const std::string& name, bool reversed) const {
    const fs::path root = make_dir(name);
    const std::string forward = "mkdir -p sub/deep && echo one > a.txt && seq 1 3000 > sub/big && "
                                "printf '#!/bin/sh\\n' > run.sh && chmod 755 run.sh && ln -s a.txt link && echo deep > sub/deep/f";
    const std::string backward = "ln -s a.txt link && mkdir -p sub/deep && echo deep > sub/deep/f && printf '#!/bin/sh\\n' > run.sh && "
                                 "chmod 755 run.sh && seq 1 3000 > sub/big && echo one > a.txt";
    sh_ok("cd " + root.string() + " && " + (reversed ? backward : forward));
    return root;
  }
};

TEST_F(CapsuledSnapshots, OneDigestForOneTreeWhateverMtimesOwnersAndOrder) {
  const fs::path first = tree("first", false);
  const fs::path second = tree("second", true);
  sh_ok("touch -h -d '2001-02-03' " + second.string() + "/* " + second.string() + "/sub/* && chown -hR 1234:5678 " +
        second.string());
  const json made = create({{"dir", first.string()}});
  const std::string digest = made.value("digest", "");
  ASSERT_EQ(digest.rfind("sha256:", 0), 0u) << made;
  EXPECT_EQ(made["source"], json({{"dir", first.string()}}));
  EXPECT_EQ(made["files"], 7);  // a.txt, link, run.sh, sub, sub/big, sub/deep, sub/deep/f
  EXPECT_EQ(digest_of({{"dir", second.string()}}), digest);
  EXPECT_EQ(digest_of({{"dir", first.string()}}), digest) << "creating it again is a no-op";

  // The export is the canonical tar: its sha256 is the digest.
  const std::string tar = export_tar(digest);
  EXPECT_EQ(store::sha256_of(tar).str(), digest);
  const HttpResponse info = call("GET", "/v1/snapshots/" + digest + "?info=true");
  EXPECT_EQ(body_json(info)["size"], tar.size());

  sh_ok("chmod 700 " + second.string() + "/run.sh");
  const std::string mode_changed = digest_of({{"dir", second.string()}});
  EXPECT_NE(mode_changed, digest);
  sh_ok("chmod 755 " + second.string() + "/run.sh && ln -sfn sub/big " + second.string() + "/link");
  const std::string link_changed = digest_of({{"dir", second.string()}});
  EXPECT_NE(link_changed, digest);
  EXPECT_NE(link_changed, mode_changed);

  const json listed = body_json(call("GET", "/v1/snapshots"));
  EXPECT_EQ(listed["snapshots"].size(), 3u) << listed;
}

TEST_F(CapsuledSnapshots, GitRepositoryAtTwoCommitsWithoutUncommittedChanges) {
  const fs::path repo = make_dir("repo");
  const std::string git = "cd " + repo.string() + " && git -c user.name=t -c user.email=t@t ";
  sh_ok("cd " + repo.string() + " && git init -q && echo v1 > f.txt && mkdir d && echo keep > d/k");
  sh_ok(git + "add -A && " + git + "commit -qm one");
  sh_ok("cd " + repo.string() + " && echo v2 > f.txt && echo new > g.txt");
  sh_ok(git + "add -A && " + git + "commit -qm two");
  sh_ok("cd " + repo.string() + " && echo dirty > f.txt && echo untracked > u.txt");

  const json one = create({{"git", repo.string()}, {"rev", "HEAD~1"}});
  const json two = create({{"git", repo.string()}, {"rev", "HEAD"}});
  ASSERT_TRUE(one.contains("digest") && two.contains("digest")) << one << two;
  EXPECT_NE(one["digest"], two["digest"]);
  EXPECT_EQ(one["source"]["rev"], "HEAD~1");
  EXPECT_EQ(one["source"]["commit"].get<std::string>().size(), 40u) << one;
  EXPECT_NE(one["source"]["commit"], two["source"]["commit"]);

  const fs::path at_one = unpacked(one["digest"], "at-one");
  EXPECT_EQ(slurp(at_one / "f.txt"), "v1\n");
  EXPECT_FALSE(fs::exists(at_one / "g.txt"));
  const fs::path at_two = unpacked(two["digest"], "at-two");
  EXPECT_EQ(slurp(at_two / "f.txt"), "v2\n") << "uncommitted changes are not part of a commit's snapshot";
  EXPECT_EQ(slurp(at_two / "d/k"), "keep\n");
  EXPECT_FALSE(fs::exists(at_two / "u.txt"));

  // The same commit again, by its id: the same snapshot.
  EXPECT_EQ(digest_of({{"git", repo.string()}, {"rev", two["source"]["commit"]}}), two["digest"]);
  expect_error(call("POST", "/v1/snapshots", {{"git", repo.string()}, {"rev", "no-such-branch"}}), 400,
               "snapshot_source_failed", "no-such-branch");
  expect_error(call("POST", "/v1/snapshots", {{"git", repo.string()}, {"rev", "--output=/tmp/x"}}), 400,
               "invalid_request", "rev");
}

// A directory snapshotted again unchanged is found ("reused": true, the same digest), a touched one made again; a
// run on the snapshot sees every file dated the snapshot's mtime, a git snapshot the commit's date.
TEST_F(CapsuledSnapshots, AnUnchangedDirectoryIsFoundAgainAndItsFilesAreDated) {
  const fs::path ws = tree("reuse", false);
  std::this_thread::sleep_for(std::chrono::seconds(daemon::kRacySeconds + 1));  // older than the racy window
  const json first = create({{"dir", ws.string()}});
  EXPECT_EQ(first["reused"], false) << first;
  const json second = create({{"dir", ws.string()}});
  EXPECT_EQ(second["reused"], true) << second;
  EXPECT_EQ(second["digest"], first["digest"]);
  EXPECT_EQ(second["mtime"], first["mtime"]);
  sh_ok("touch " + (ws / "sub/big").string());
  const json touched = create({{"dir", ws.string()}});
  EXPECT_EQ(touched["reused"], false) << "touched: read again";
  EXPECT_EQ(touched["digest"], first["digest"]) << "the same bytes";

  const std::int64_t mtime = base::parse_instant(first.value("mtime", ""), false).value_or(0) / base::kMicrosPerSecond;
  EXPECT_GT(mtime, 0) << first;
  json spec = sh("stat -c %Y /workspace/a.txt /workspace/sub/big /workspace/sub; stat -c %Y -L /workspace/link");
  spec["workspace"] = {{"snapshot", first["digest"]}};
  const json run = run_and_wait(spec);
  const std::string dated = std::to_string(mtime) + "\n";
  EXPECT_EQ(run["result"]["stdout"]["tail"], dated + dated + dated + dated) << run;

  const fs::path repo = make_dir("dated-repo");
  sh_ok("cd " + repo.string() + " && git init -q && echo v1 > f.txt && git add -A && GIT_COMMITTER_DATE='@1500000000 +0000' "
        "git -c user.name=t -c user.email=t@t commit -qm one");
  const json from_git = create({{"git", repo.string()}, {"rev", "HEAD"}});
  EXPECT_EQ(from_git["mtime"], "2017-07-14T02:40:00Z") << from_git;
  EXPECT_EQ(from_git["reused"], false);
}

TEST_F(CapsuledSnapshots, TarSourcesAreCanonicalisedAndHostileOnesRefused) {
  const fs::path source = tree("source", false);
  const std::string from_dir = digest_of({{"dir", source.string()}});
  sh_ok("tar -czf " + (dir_ / "t.tar.gz").string() + " -C " + source.string() + " .");
  const json from_tar = create({{"tar", (dir_ / "t.tar.gz").string()}});
  EXPECT_EQ(from_tar["digest"], from_dir) << "a tar of the tree is the same snapshot";
  EXPECT_EQ(from_tar["source"], json({{"tar", (dir_ / "t.tar.gz").string()}})) << "the caller's own source";
  EXPECT_NE(call("GET", "/v1/snapshots/" + from_dir + "?info=true").body.find(source.string()), std::string::npos)
      << "the stored snapshot keeps the source that first made it";

  // ../ in a tar: refused, nothing stored.
  const fs::path evil = make_dir("evil");
  write_file(evil / "x", "x");
  sh_ok("tar -cf " + (dir_ / "dotdot.tar").string() + " -C " + evil.string() + " --transform='s,^,../,' x");
  expect_error(call("POST", "/v1/snapshots", {{"tar", (dir_ / "dotdot.tar").string()}}), 400, "invalid_archive", "..");
  // A symlink escaping the tree is stored as a link, never followed.
  const fs::path escaping = make_dir("escaping");
  sh_ok("ln -s /etc/shadow " + escaping.string() + "/secret");
  const fs::path got = unpacked(digest_of({{"dir", escaping.string()}}), "escaping-out");
  EXPECT_TRUE(fs::is_symlink(got / "secret"));
  EXPECT_EQ(fs::read_symlink(got / "secret"), "/etc/shadow");
  // A tar writing through its own symlink: refused by the unpacker.
  sh_ok("cd " + escaping.string() + " && mkdir -p w && ln -s /tmp w/out && tar -cf " + (dir_ / "through.tar").string() +
        " secret w && rm -rf w && mkdir -p w/out && echo pwned > w/out/file && tar -rf " + (dir_ / "through.tar").string() +
        " w/out/file");
  expect_error(call("POST", "/v1/snapshots", {{"tar", (dir_ / "through.tar").string()}}), 400, "invalid_archive", "symlink");
  // A fifo: refused, naming it.
  const fs::path with_fifo = make_dir("with-fifo");
  sh_ok("mkfifo " + with_fifo.string() + "/pipe");
  expect_error(call("POST", "/v1/snapshots", {{"dir", with_fifo.string()}}), 400, "invalid_archive", "pipe");
  expect_error(call("POST", "/v1/snapshots", {{"dir", "/no/such/dir"}}), 400, "invalid_request", "does not exist");
  expect_error(call("GET", "/v1/snapshots/sha256:" + std::string(64, 'a')), 404, "snapshot_not_found", "no snapshot");
  EXPECT_EQ(body_json(call("GET", "/v1/snapshots"))["snapshots"].size(), 2u);
}

TEST_F(CapsuledSnapshots, RunsSeeTheSnapshotCopyOnWriteAndCannotChangeIt) {
  const std::string digest = digest_of({{"dir", tree("ws", false).string()}});
  json spec = sh("cat /workspace/a.txt && stat -c %u:%a /workspace/run.sh && echo changed > /workspace/a.txt && "
                 "rm /workspace/sub/big && cat /workspace/a.txt");
  spec["workspace"] = {{"snapshot", digest}};
  const json run = run_and_wait(spec);
  EXPECT_EQ(run["state"], "succeeded") << run;
  EXPECT_EQ(run["result"]["stdout"]["tail"], "one\n0:755\nchanged\n") << run;
  EXPECT_EQ(run["pinned"]["workspace_digest"], digest);
  EXPECT_EQ(run["spec"]["workspace"], json({{"snapshot", digest}, {"mode", "cow"}}));
  EXPECT_EQ(run["diff"]["modified"].size() + run["diff"]["deleted"].size(), 2u) << run["diff"];
  EXPECT_EQ(store::sha256_of(export_tar(digest)).str(), digest) << "the run's writes changed the snapshot";
  // The stored spec and pins, submitted again, run on the same snapshot.
  const json again = run_and_wait({{"spec", run["spec"]}, {"pinned", run["pinned"]}});
  EXPECT_EQ(again["result"]["stdout"]["tail"], "one\n0:755\nchanged\n") << again;

  json unknown = sh("true");
  unknown["workspace"] = {{"snapshot", "sha256:" + std::string(64, 'b')}};
  expect_error(call("POST", "/v1/runs", unknown), 404, "snapshot_not_found", "workspace.snapshot");
}

TEST_F(CapsuledSnapshots, ReproducibleRunsPinTheirDirectory) {
  const fs::path ws = tree("repro", false);
  json spec = sh("cat /workspace/a.txt");
  spec["workspace"] = ws.string();
  spec["reproducible"] = true;
  const json run = run_and_wait(spec);
  EXPECT_EQ(run["result"]["stdout"]["tail"], "one\n") << run;
  const std::string digest = run["pinned"].value("workspace_digest", "");
  EXPECT_EQ(digest, digest_of({{"dir", ws.string()}}));
  EXPECT_EQ(run["spec"]["reproducible"], true);
  write_file(ws / "a.txt", "two\n");
  const json replayed = run_and_wait({{"spec", run["spec"]}, {"pinned", run["pinned"]}});
  EXPECT_EQ(replayed["result"]["stdout"]["tail"], "one\n") << "the pinned bytes, not the directory as it is now";
  EXPECT_EQ(replayed["pinned"]["workspace_digest"], digest);
  const json fresh = run_and_wait(spec);
  EXPECT_EQ(fresh["result"]["stdout"]["tail"], "two\n");
  EXPECT_NE(fresh["pinned"]["workspace_digest"], digest);

  json rw = sh("true");
  rw["workspace"] = {{"path", ws.string()}, {"mode", "rw"}};
  rw["reproducible"] = true;
  expect_error(call("POST", "/v1/runs", rw), 400, "invalid_spec", "reproducible");

  // A stored run of a plain host directory given a snapshot digest as its pin: the digest would claim bytes never
  // read (and a bundle would carry that snapshot), so it is refused.
  json plain_spec = fresh["spec"];
  plain_spec["reproducible"] = false;
  json forged_pins = fresh["pinned"];
  forged_pins["workspace_digest"] = digest;
  expect_error(call("POST", "/v1/runs", json{{"spec", plain_spec}, {"pinned", forged_pins}}), 409, "pin_mismatch",
               "pinned.workspace_digest");
}

TEST_F(CapsuledSnapshots, RemovalIsRefusedWhileARunUsesIt) {
  const std::string digest = digest_of({{"dir", tree("busy", false).string()}});
  json spec = sh("sleep 30");
  spec["workspace"] = {{"snapshot", digest}};
  const std::string id = submit(spec);
  wait_running(id);
  expect_error(call("DELETE", "/v1/snapshots/" + digest), 409, "snapshot_in_use", digest);
  ASSERT_EQ(call("POST", "/v1/runs/" + id + "/cancel").status, 202);
  wait_finished(id);
  EXPECT_TRUE(eventually([&] { return call("DELETE", "/v1/snapshots/" + digest).status == 200; }));
  expect_error(call("GET", "/v1/snapshots/" + digest), 404, "snapshot_not_found", digest);
  EXPECT_TRUE(fs::is_empty(state_ / "snapshots" / "trees"));
  EXPECT_TRUE(fs::is_empty(state_ / "snapshots" / "staging"));
}

TEST_F(CapsuledSnapshots, SessionsWorkOnASnapshotUntilTheyEnd) {
  const std::string digest = digest_of({{"dir", tree("session-ws", false).string()}});
  const HttpResponse created = call("POST", "/v1/sessions", {{"workspace", {{"snapshot", digest}}}});
  ASSERT_EQ(created.status, 201) << created.body;
  const std::string id = body_json(created)["id"];
  const HttpResponse exec = call("POST", "/v1/sessions/" + id + "/exec",
                                 {{"script", "echo more >> /workspace/a.txt; cat /workspace/a.txt"}});
  ASSERT_EQ(exec.status, 200) << exec.body;
  EXPECT_EQ(body_json(exec)["result"]["stdout"].value("head", ""), "one\nmore\n");
  expect_error(call("DELETE", "/v1/snapshots/" + digest), 409, "snapshot_in_use", "live run or session");
  ASSERT_EQ(call("DELETE", "/v1/sessions/" + id).status, 200);
  EXPECT_TRUE(eventually([&] { return call("DELETE", "/v1/snapshots/" + digest).status == 200; }));
}

TEST_F(CapsuledSnapshots, TheCliCreatesListsExportsUsesAndRemoves) {
  const fs::path repo = tree("cli-repo", false);
  const std::string git = "cd " + repo.string() + " && git -c user.name=t -c user.email=t@t ";
  sh_ok("cd " + repo.string() + " && git init -q && " + git + "add -A && " + git + "commit -qm one");
  const std::vector<std::string> env = {"CAPSULE_SOCKET=" + socket_};
  const Cli from_dir = run_capsule_cli(dir_, {"snapshot", "create", repo.string()}, env);
  ASSERT_EQ(from_dir.code, 0) << from_dir.err;
  const std::string digest = from_dir.out.substr(0, from_dir.out.find('\n'));
  const Cli from_git = run_capsule_cli(dir_, {"snapshot", "create", repo.string() + "@HEAD"}, env);
  ASSERT_EQ(from_git.code, 0) << from_git.err;
  EXPECT_NE(from_git.out, from_dir.out) << "the directory holds .git too";
  const Cli listed = run_capsule_cli(dir_, {"snapshot", "ls"}, env);
  EXPECT_NE(listed.out.find("git " + repo.string() + "@HEAD"), std::string::npos) << listed.out;
  const Cli exported = run_capsule_cli(dir_, {"snapshot", "export", digest, "-o", (dir_ / "out.tar").string()}, env);
  ASSERT_EQ(exported.code, 0) << exported.err;
  EXPECT_EQ(store::sha256_of(slurp(dir_ / "out.tar")).str(), digest);
  const Cli run = run_capsule_cli(dir_, {"run", "--workspace-snapshot", digest, "--", "cat", "/workspace/a.txt"}, env);
  EXPECT_EQ(run.code, 0) << run.err;
  EXPECT_EQ(run.out, "one\n");
  const Cli removed = run_capsule_cli(dir_, {"snapshot", "rm", digest}, env);
  EXPECT_EQ(removed.code, 0) << removed.err;
  const Cli gone = run_capsule_cli(dir_, {"snapshot", "export", digest, "-o", (dir_ / "gone.tar").string()}, env);
  EXPECT_NE(gone.code, 0);
  EXPECT_NE(gone.err.find("no snapshot"), std::string::npos) << gone.err;
  EXPECT_FALSE(fs::exists(dir_ / "gone.tar"));
}

// The collection keeps what a kept record pins and what a live session uses, says first in a dry run what it would
// remove, then removes the rest; the CLI reports the same.
TEST_F(CapsuledSnapshots, GcKeepsWhatRecordsPinOrSessionsUseAndRemovesTheRest) {
  auto distinct = [&](const std::string& name) {
    const fs::path root = tree(name, false);
    write_file(root / "name.txt", name);
    return digest_of({{"dir", root.string()}});
  };
  const std::string pinned = distinct("gc-pinned"), used = distinct("gc-used"), loose = distinct("gc-loose");
  json spec = sh("cat /workspace/name.txt");
  spec["workspace"] = {{"snapshot", pinned}};
  const std::string run = submit(spec);
  wait_finished(run);
  const HttpResponse session = call("POST", "/v1/sessions", {{"workspace", {{"snapshot", used}}}});
  ASSERT_EQ(session.status, 201) << session.body;
  const std::string session_id = body_json(session)["id"];

  expect_error(call("POST", "/v1/snapshots/gc", {{"unused_for", "a while"}}), 400, "invalid_request", "unused_for");
  expect_error(call("POST", "/v1/snapshots/gc", {{"keep", true}}), 400, "invalid_request", "keep: unknown field");
  // Nothing has been unused for a day.
  json report = body_json(call("POST", "/v1/snapshots/gc", {{"unused_for", "24h"}}));
  EXPECT_EQ(report["removed"], json::array()) << report;

  report = body_json(call("POST", "/v1/snapshots/gc", {{"dry_run", true}}));
  ASSERT_EQ(report["removed"].size(), 1u) << report;
  EXPECT_EQ(report["removed"][0]["digest"], loose);
  EXPECT_EQ(report["dry_run"], true);
  EXPECT_EQ(call("GET", "/v1/snapshots/" + loose + "?info=true").status, 200) << "a dry run removes nothing";

  const std::vector<std::string> env = {"CAPSULE_SOCKET=" + socket_};
  const Cli gc = run_capsule_cli(dir_, {"snapshot", "gc"}, env);
  ASSERT_EQ(gc.code, 0) << gc.err;
  EXPECT_NE(gc.out.find("removed " + loose), std::string::npos) << gc.out;
  EXPECT_NE(gc.out.find("1 snapshot(s)"), std::string::npos) << gc.out;
  expect_error(call("GET", "/v1/snapshots/" + loose + "?info=true"), 404, "snapshot_not_found", loose);
  EXPECT_EQ(call("GET", "/v1/snapshots/" + pinned + "?info=true").status, 200) << "run " << run << " pins it";
  EXPECT_EQ(call("GET", "/v1/snapshots/" + used + "?info=true").status, 200) << "the session uses it";

  // Once the run's record is gone and the session has ended (its record still pins `used`), only `pinned` goes.
  ASSERT_EQ(call("DELETE", "/v1/runs/" + run).status, 200);
  ASSERT_EQ(call("DELETE", "/v1/sessions/" + session_id).status, 200);
  EXPECT_TRUE(eventually([&] {  // the run's box (and its lease) may still be on its way out
    report = body_json(call("POST", "/v1/snapshots/gc"));
    return !report["removed"].empty();
  })) << report;
  ASSERT_EQ(report["removed"].size(), 1u) << report;
  EXPECT_EQ(report["removed"][0]["digest"], pinned);
  EXPECT_EQ(call("GET", "/v1/snapshots/" + used + "?info=true").status, 200);
}

// ---- Other users.
const std::string kSnapshotGroup = account_name("capsule-s");

class CapsuledSnapshotUsers : public Capsuled {
 protected:
  static void SetUpTestSuite() {
    try {
      create_group(kSnapshotGroup);
      alice_ = create_user(account_name("capsule-s-alice"), kSnapshotGroup, {});
      bob_ = create_user(account_name("capsule-s-bob"), kSnapshotGroup, {});
    } catch (const std::exception& e) {
      setup_error_ = e.what();
    }
  }
  static void TearDownTestSuite() {
    remove_user(account_name("capsule-s-alice"));
    remove_user(account_name("capsule-s-bob"));
    remove_group(kSnapshotGroup);
  }
  void SetUp() override {
    ASSERT_TRUE(setup_error_.empty()) << setup_error_;
    Capsuled::SetUp();
    const fs::path config = dir_ / "capsuled.json";
    write_file(config, json{{"socket_group", kSnapshotGroup}}.dump());
    start({"--config", config.string()});
  }
  UserCall as(const TestUser& user, const std::string& method, const std::string& target, const json& body = nullptr) const {
    UserCall call = call_as(user, socket_, method, target, body);
    EXPECT_EQ(call.failure, "");
    return call;
  }
  static inline TestUser alice_, bob_;
  static inline std::string setup_error_;
};

TEST_F(CapsuledSnapshotUsers, ACallerReadsOnlyWithItsRightsAndSeesOnlyItsSnapshots) {
  const fs::path mine = make_dir("alice-tree");
  write_file(mine / "f", "alice's\n");
  sh_ok("chown -R " + std::to_string(alice_.uid) + " " + mine.string() + " && chmod 700 " + mine.string());
  const UserCall made = as(alice_, "POST", "/v1/snapshots", {{"dir", mine.string()}});
  ASSERT_EQ(made.status, 201) << made.body;
  const std::string digest = made.json()["digest"];
  EXPECT_EQ(made.json()["creator"], alice_.uid);

  // bob cannot read alice's 0700 directory: 403, and nothing is stored.
  const UserCall refused = as(bob_, "POST", "/v1/snapshots", {{"dir", mine.string()}});
  EXPECT_EQ(refused.status, 403) << refused.body;
  // A readable directory with an unreadable file inside: tar, running as bob, is refused too.
  const fs::path open_dir = make_dir("open-tree");
  write_file(open_dir / "secret", "root only\n");
  sh_ok("chmod 600 " + (open_dir / "secret").string());
  const UserCall partial = as(bob_, "POST", "/v1/snapshots", {{"dir", open_dir.string()}});
  EXPECT_EQ(partial.status, 403) << partial.body;
  EXPECT_NE(partial.body.find("secret"), std::string::npos) << partial.body;

  // bob sees nothing of alice's: not listed, not exported, not usable, not removable.
  EXPECT_EQ(as(bob_, "GET", "/v1/snapshots").json()["snapshots"].size(), 0u);
  EXPECT_EQ(as(bob_, "GET", "/v1/snapshots/" + digest).status, 404);
  json spec = sh("cat /workspace/f");
  spec["workspace"] = {{"snapshot", digest}};
  EXPECT_EQ(as(bob_, "POST", "/v1/runs?wait=true", spec).status, 404);
  EXPECT_EQ(as(bob_, "DELETE", "/v1/snapshots/" + digest).status, 404);

  // alice can use it; root sees it too.
  const UserCall run = as(alice_, "POST", "/v1/runs?wait=true", spec);
  ASSERT_EQ(run.status, 200) << run.body;
  EXPECT_EQ(run.json()["result"]["stdout"]["tail"], "alice's\n");
  EXPECT_EQ(body_json(call("GET", "/v1/snapshots"))["snapshots"].size(), 1u);

  // alice's reproducible run replays from its pinned snapshot after its directory is gone.
  json repro = sh("cat /workspace/f");
  repro["workspace"] = mine.string();
  repro["reproducible"] = true;
  const UserCall pinned_run = as(alice_, "POST", "/v1/runs?wait=true", repro);
  ASSERT_EQ(pinned_run.status, 200) << pinned_run.body;
  sh_ok("mv " + mine.string() + " " + mine.string() + ".moved");
  const UserCall replay =
      as(alice_, "POST", "/v1/runs/" + pinned_run.json()["id"].get<std::string>() + "/replay?wait=true", json::object());
  ASSERT_EQ(replay.status, 200) << replay.body;
  EXPECT_EQ(replay.json()["runs"][0]["result"]["stdout"]["tail"], "alice's\n");
  EXPECT_EQ(pinned_run.json()["pinned"]["workspace_digest"], digest) << "the same tree: the same snapshot";
  EXPECT_EQ(as(alice_, "DELETE", "/v1/snapshots/" + digest).status, 200);
  EXPECT_EQ(call("GET", "/v1/snapshots/" + digest).status, 404);
}

// A caller's collection touches only its own claims: bob's gc drops his claim on a snapshot alice also made (hers
// stays) and never removes alice's unused one; root's gc removes what is left unused.
TEST_F(CapsuledSnapshotUsers, AnotherCallersCollectionDropsOnlyItsOwnClaims) {
  auto tree_of = [&](const std::string& name, const TestUser& owner) {
    const fs::path root = make_dir(name);
    write_file(root / "f", name + "\n");
    sh_ok("chown -R " + std::to_string(owner.uid) + " " + root.string());
    return root;
  };
  const fs::path shared_a = tree_of("shared-a", alice_), shared_b = tree_of("shared-b", bob_);
  const UserCall alices = as(alice_, "POST", "/v1/snapshots", {{"dir", tree_of("alice-only", alice_).string()}});
  ASSERT_EQ(alices.status, 201) << alices.body;
  const std::string alice_only = alices.json()["digest"];
  sh_ok("echo shared > " + (shared_a / "f").string() + " && echo shared > " + (shared_b / "f").string());
  const UserCall a = as(alice_, "POST", "/v1/snapshots", {{"dir", shared_a.string()}});
  const UserCall b = as(bob_, "POST", "/v1/snapshots", {{"dir", shared_b.string()}});
  ASSERT_EQ(a.status, 201) << a.body;
  ASSERT_EQ(b.status, 201) << b.body;
  const std::string shared = a.json()["digest"];
  ASSERT_EQ(b.json()["digest"], shared) << "one tree, one snapshot, two owners";

  const UserCall bobs_gc = as(bob_, "POST", "/v1/snapshots/gc", json::object());
  ASSERT_EQ(bobs_gc.status, 200) << bobs_gc.body;
  EXPECT_EQ(bobs_gc.json()["removed"], json::array()) << bobs_gc.body;
  EXPECT_EQ(bobs_gc.json()["released"], json::array({shared})) << bobs_gc.body;
  EXPECT_EQ(as(bob_, "GET", "/v1/snapshots").json()["snapshots"].size(), 0u);
  EXPECT_EQ(as(alice_, "GET", "/v1/snapshots").json()["snapshots"].size(), 2u) << "alice's claims stay";

  const json roots_gc = body_json(call("POST", "/v1/snapshots/gc"));
  std::set<std::string> removed;
  for (const json& s : roots_gc["removed"]) removed.insert(s["digest"].get<std::string>());
  EXPECT_EQ(removed, std::set<std::string>({shared, alice_only})) << roots_gc;
  EXPECT_EQ(body_json(call("GET", "/v1/snapshots"))["snapshots"].size(), 0u);
}

}  // namespace
}  // namespace capsule::testing
