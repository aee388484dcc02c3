// The authorization matrix of capsuled, run as real host users: members of the socket's group get exactly
// their own host rights (workspaces, image imports and saves), their own runs only; outsiders cannot connect.
#include <grp.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstdlib>

#include "http/unix_client.h"
#include "tests/support/auth_users.h"
#include "tests/support/capsuled_fixture.h"

namespace capsule::testing {
namespace {

const std::string kGroup = account_name("capsule-t");
const std::string kAdminGroup = account_name("capsule-t-adm");

// alice, bob and carol are members of the socket's group (carol also of the admin group); eve is not.
class CapsuledAuth : public Capsuled {
 protected:
  static void SetUpTestSuite() {
    try {
      create_group(kGroup);
      create_group(kAdminGroup);
      alice_ = create_user(account_name("capsule-t-alice"), kGroup, {});
      bob_ = create_user(account_name("capsule-t-bob"), kGroup, {});
      carol_ = create_user(account_name("capsule-t-carol"), kGroup, {kAdminGroup});
      eve_ = create_user(account_name("capsule-t-eve"), "users", {});
    } catch (const std::exception& e) {
      setup_error_ = e.what();
    }
  }
  static void TearDownTestSuite() {
    for (const char* user : {"capsule-t-alice", "capsule-t-bob", "capsule-t-carol", "capsule-t-eve"}) {
      remove_user(account_name(user));
    }
    remove_group(kAdminGroup);
    remove_group(kGroup);
  }

  void SetUp() override {
    ASSERT_TRUE(setup_error_.empty()) << setup_error_;
    Capsuled::SetUp();
    const fs::path config = dir_ / "capsuled.json";
    write_file(config, json{{"socket_group", kGroup}, {"admin_group", kAdminGroup}}.dump());
    start({"--config", config.string()});
  }

  void TearDown() override {
    if (!dir_.empty()) expect_healthy();
    Capsuled::TearDown();
  }

  // A directory below the test dir owned by `user` (group: the user's primary group) with `mode`.
  fs::path owned_dir(const std::string& name, const TestUser& user, mode_t mode) const {
    const fs::path dir = make_dir(name);
    EXPECT_EQ(::chown(dir.c_str(), user.uid, user.gid), 0);
    EXPECT_EQ(::chmod(dir.c_str(), mode), 0);
    return dir;
  }

  UserCall as(const TestUser& user, const std::string& method, const std::string& target, const json& body = nullptr) const {
    UserCall call = call_as(user, socket_, method, target, body);
    EXPECT_EQ(call.failure, "") << user.name << " " << method << " " << target;
    EXPECT_EQ(call.connect_errno, 0) << user.name << " could not connect: " << std::strerror(call.connect_errno);
    return call;
  }

  // The precise status and error code, and a message containing every one of `parts`.
  static void expect_refusal(const UserCall& call, int status, const std::string& code,
                             const std::vector<std::string>& parts) {
    EXPECT_EQ(call.status, status) << call.body;
    const json body = call.json();
    ASSERT_TRUE(body.contains("error")) << call.body;
    EXPECT_EQ(body["error"].value("code", ""), code) << call.body;
    for (const auto& part : parts) EXPECT_NE(body["error"].value("message", "").find(part), std::string::npos) << call.body;
  }

  void expect_healthy() const { EXPECT_EQ(call("GET", "/v1/health").status, 200) << "the daemon stopped answering"; }

  static json with_workspace(const std::string& script, const fs::path& path, const std::string& mode) {
    json spec = sh(script);
    spec["workspace"] = {{"path", path.string()}, {"mode", mode}};
    return spec;
  }

  static std::string uid_text(const TestUser& user) { return "uid " + std::to_string(user.uid); }

  static inline TestUser alice_, bob_, carol_, eve_;
  static inline std::string setup_error_;
};

TEST_F(CapsuledAuth, OutsiderCannotConnectToTheSocket) {
  const UserCall call = call_as(eve_, socket_, "GET", "/v1/health");
  EXPECT_EQ(call.connect_errno, EACCES) << call.body << call.failure;
  EXPECT_EQ(as(alice_, "GET", "/v1/health").status, 200) << "a member connects";
}

TEST_F(CapsuledAuth, MemberCannotUseSystemOrOtherUsersDirectoriesAsWorkspaces) {
  for (const std::string mode : {"cow", "ro", "rw"}) {
    SCOPED_TRACE(mode);
    // /etc is readable by everyone, but the sandbox would see /etc/shadow as its root-owned self.
    expect_refusal(as(alice_, "POST", "/v1/runs?wait=true", with_workspace("cat /workspace/shadow", "/etc", mode)), 403,
                   "forbidden", {"'/etc'", uid_text(alice_)});
    expect_refusal(as(alice_, "POST", "/v1/runs?wait=true", with_workspace("true", "/etc/shadow", mode)), 403,
                   "forbidden", {"'/etc/shadow'", uid_text(alice_)});
    const fs::path bob_home = owned_dir("bob-" + mode, bob_, 0700);
    write_file(bob_home / "secret", "bob's");
    expect_refusal(as(alice_, "POST", "/v1/runs?wait=true", with_workspace("cat /workspace/secret", bob_home, mode)),
                   403, "forbidden", {bob_home.string(), uid_text(alice_)});
    expect_healthy();
  }
  // A group-readable directory of bob's: alice may read it on the host, but its tree is bob's, not hers.
  const fs::path shared = owned_dir("bob-shared", bob_, 0750);
  expect_refusal(as(alice_, "POST", "/v1/runs?wait=true", with_workspace("ls /workspace", shared, "ro")), 403,
                 "forbidden", {"owned by uid " + std::to_string(bob_.uid), uid_text(alice_)});
  EXPECT_EQ(as(alice_, "GET", "/v1/runs").json()["runs"].size(), 0u) << "refused runs are not recorded";
}

TEST_F(CapsuledAuth, MemberUsesOwnDirectoryAndRwWritesLandAsTheMember) {
  // The daemon's descriptors, except user namespaces (the launcher keeps one per rw owner for reuse).
  auto daemon_fds = [&] {
    std::vector<std::string> targets;
    for (const auto& entry : fs::directory_iterator("/proc/" + std::to_string(daemon_) + "/fd")) {
      std::error_code ec;
      const std::string target = fs::read_symlink(entry.path(), ec).string();
      if (target.rfind("user:[", 0) != 0) targets.push_back(target);
    }
    std::sort(targets.begin(), targets.end());
    return targets;
  };
  const std::vector<std::string> fds_before = daemon_fds();
  const fs::path own = owned_dir("alice-ws", alice_, 0700);
  write_file(own / "input.txt", "alice's input\n");
  ASSERT_EQ(::chown((own / "input.txt").c_str(), alice_.uid, alice_.gid), 0);
  // cow and ro show the tree with sandbox root as alice: her private files are readable, root's are not.
  write_file(own / "private.txt", "alice's private\n");
  ASSERT_EQ(::chown((own / "private.txt").c_str(), alice_.uid, alice_.gid), 0);
  ASSERT_EQ(::chmod((own / "private.txt").c_str(), 0600), 0);
  write_file(own / "root-secret", "root's\n");
  ASSERT_EQ(::chmod((own / "root-secret").c_str(), 0600), 0);
  const UserCall cow = as(alice_, "POST", "/v1/runs?wait=true",
                          with_workspace("cat /workspace/input.txt /workspace/private.txt; cat /workspace/root-secret",
                                         own, "cow"));
  ASSERT_EQ(cow.status, 200) << cow.body;
  EXPECT_EQ(cow.json()["result"]["stdout"]["head"], "alice's input\nalice's private\n") << cow.body;
  EXPECT_NE(cow.json()["result"]["stderr"]["head"].get<std::string>().find("Permission denied"), std::string::npos)
      << "root's 0600 file in alice's tree stays root's: " << cow.body;
  const UserCall ro = as(alice_, "POST", "/v1/runs?wait=true",
                         with_workspace("cat /workspace/input.txt /workspace/private.txt; cat /workspace/root-secret; "
                                        "touch /workspace/new 2>/dev/null && echo wrote; ls -ln /workspace/private.txt",
                                        own, "ro"));
  ASSERT_EQ(ro.status, 200) << ro.body;
  const std::string out = ro.json()["result"]["stdout"]["head"];
  EXPECT_EQ(out.rfind("alice's input\nalice's private\n", 0), 0u) << ro.body;
  EXPECT_EQ(out.find("root's"), std::string::npos) << ro.body;
  EXPECT_EQ(out.find("wrote"), std::string::npos) << "ro is read-only: " << ro.body;
  EXPECT_NE(out.find(" 0 0 "), std::string::npos) << "alice's file shows as sandbox root's: " << ro.body;
  EXPECT_FALSE(fs::exists(own / "new"));
  const UserCall rw = as(alice_, "POST", "/v1/runs?wait=true",
                         with_workspace("echo made > /workspace/made-by-run && mkdir /workspace/sub", own, "rw"));
  ASSERT_EQ(rw.status, 200) << rw.body;
  EXPECT_EQ(rw.json()["state"], "succeeded") << rw.body;
  for (const char* name : {"made-by-run", "sub"}) {
    struct stat st {};
    ASSERT_EQ(::stat((own / name).c_str(), &st), 0) << name;
    EXPECT_EQ(st.st_uid, alice_.uid) << name << " is owned by the caller on the host";
    EXPECT_EQ(st.st_gid, alice_.gid) << name;
  }
  EXPECT_EQ(slurp(own / "made-by-run"), "made\n");
  // Nothing held that was not held before (a connection open at the first look may have closed since).
  auto nothing_new = [&] {
    const std::vector<std::string> now = daemon_fds();
    return std::includes(fds_before.begin(), fds_before.end(), now.begin(), now.end());
  };
  EXPECT_TRUE(eventually(nothing_new))
      << "the opened workspaces are closed once their runs end: " << ::testing::PrintToString(daemon_fds()) << " vs "
      << ::testing::PrintToString(fds_before);

  // Write access is the caller's: a directory of alice's she made read-only is not an rw workspace.
  const fs::path readonly = owned_dir("alice-ro", alice_, 0500);
  expect_refusal(as(alice_, "POST", "/v1/runs?wait=true", with_workspace("true", readonly, "rw")), 403, "forbidden",
                 {readonly.string(), uid_text(alice_)});
  // An rw workspace writes with the directory's group: one alice is not in is refused.
  const fs::path foreign_group = owned_dir("alice-foreign-group", alice_, 0700);
  ASSERT_EQ(::chown(foreign_group.c_str(), alice_.uid, getgrnam("users")->gr_gid), 0);
  expect_refusal(as(alice_, "POST", "/v1/runs?wait=true", with_workspace("true", foreign_group, "rw")), 403,
                 "forbidden", {"group", uid_text(alice_)});
}

TEST_F(CapsuledAuth, RootKeepsItsRights) {
  const json run = run_and_wait(with_workspace("head -c 5 /workspace/shadow >/dev/null && echo read", "/etc", "ro"));
  EXPECT_EQ(run["state"], "succeeded") << run.dump();
  EXPECT_EQ(run["result"]["stdout"]["head"], "read\n") << run.dump();
}

TEST_F(CapsuledAuth, ImportsReadWithTheCallersRights) {
  const fs::path root_only = make_dir("root-only");
  ASSERT_EQ(::chmod(root_only.c_str(), 0700), 0);
  write_file(root_only / "secret", "root's");
  expect_refusal(as(alice_, "POST", "/v1/images", {{"source", root_only.string()}, {"format", "rootfs"}, {"ref", "t/a:1"}}),
                 403, "forbidden", {root_only.string(), uid_text(alice_)});
  expect_refusal(as(alice_, "POST", "/v1/images", {{"source", "/etc/shadow"}, {"format", "archive"}, {"ref", "t/a:1"}}),
                 403, "forbidden", {"/etc/shadow", uid_text(alice_)});
  // Readable by all, but a tree alice does not own: the store would read all of it as root.
  expect_refusal(as(alice_, "POST", "/v1/images", {{"source", "/etc"}, {"format", "rootfs"}, {"ref", "t/a:1"}}), 403,
                 "forbidden", {"owned by uid 0", uid_text(alice_)});
  expect_healthy();

  const fs::path own = owned_dir("alice-rootfs", alice_, 0700);
  write_file(own / "hello", "hi");
  const UserCall imported =
      as(alice_, "POST", "/v1/images", {{"source", own.string()}, {"format", "rootfs"}, {"ref", "t/alice:1"}});
  EXPECT_EQ(imported.status, 201) << imported.body;
  EXPECT_EQ(imported.json()["refs"], json::array({"t/alice:1"})) << imported.body;
}

TEST_F(CapsuledAuth, SavesWriteWithTheCallersRights) {
  const fs::path tree = make_dir("tree");
  write_file(tree / "hello", "hi");
  ASSERT_EQ(call("POST", "/v1/images", {{"source", tree.string()}, {"format", "rootfs"}, {"ref", "t/save:1"}}).status, 201);
  const std::string save = "/v1/images/" + http::url_encode("t/save:1") + "/save";

  const fs::path root_file = dir_ / "root-owned.tar";
  write_file(root_file, "root's bytes");
  ASSERT_EQ(::chmod(dir_.c_str(), 0777), 0);  // even where alice may create files, root's file stays root's
  ASSERT_EQ(::chmod(root_file.c_str(), 0644), 0);
  expect_refusal(as(alice_, "POST", save, {{"path", root_file.string()}}), 403, "forbidden", {root_file.string(), uid_text(alice_)});
  EXPECT_EQ(slurp(root_file), "root's bytes");
  ASSERT_EQ(::chmod(dir_.c_str(), 0711), 0);
  expect_refusal(as(alice_, "POST", save, {{"path", "/etc/passwd.tar"}}), 403, "forbidden", {"/etc/passwd.tar", uid_text(alice_)});
  EXPECT_FALSE(fs::exists("/etc/passwd.tar"));
  expect_refusal(as(alice_, "POST", save, {{"path", "/etc/passwd"}}), 403, "forbidden", {".tar"});
  // A symlink alice planted towards root's file is not followed.
  const fs::path own = owned_dir("alice-out", alice_, 0700);
  fs::create_symlink(root_file, own / "link.tar");
  expect_refusal(as(alice_, "POST", save, {{"path", (own / "link.tar").string()}}), 400, "invalid_request", {"symbolic link"});
  EXPECT_EQ(slurp(root_file), "root's bytes");
  expect_healthy();

  const UserCall saved = as(alice_, "POST", save, {{"path", (own / "image.tar").string()}});
  ASSERT_EQ(saved.status, 200) << saved.body;
  struct stat st {};
  ASSERT_EQ(::stat((own / "image.tar").c_str(), &st), 0);
  EXPECT_EQ(st.st_uid, alice_.uid) << "the archive is created as the caller";
  EXPECT_GT(st.st_size, 1024);
  // Saved again over her own file: replaced, still hers, and the same bytes (saves are deterministic).
  const std::string first = slurp(own / "image.tar");
  ASSERT_EQ(as(alice_, "POST", save, {{"path", (own / "image.tar").string()}}).status, 200);
  EXPECT_EQ(slurp(own / "image.tar"), first);
  const UserCall reimported =
      as(alice_, "POST", "/v1/images", {{"source", (own / "image.tar").string()}, {"format", "archive"}, {"ref", "t/again:1"}});
  EXPECT_EQ(reimported.status, 201) << reimported.body;
}

TEST_F(CapsuledAuth, RunsBelongToTheirOwner) {
  const UserCall submitted = as(alice_, "POST", "/v1/runs", sh("echo alice-out; sleep 60"));
  ASSERT_EQ(submitted.status, 202) << submitted.body;
  const std::string id = submitted.json()["id"];
  wait_running(id);
  auto ids = [](const UserCall& list) {
    EXPECT_EQ(list.status, 200) << list.body;
    const json body = list.json();
    std::vector<std::string> out;
    for (const auto& run : body["runs"]) out.push_back(run["id"]);
    return out;
  };
  // Another member: as if the run did not exist.
  const std::string unknown = "no run with id " + id;
  expect_refusal(as(bob_, "GET", "/v1/runs/" + id), 404, "not_found", {unknown});
  expect_refusal(as(bob_, "GET", "/v1/runs/" + id + "/logs"), 404, "not_found", {unknown});
  expect_refusal(as(bob_, "GET", "/v1/runs/" + id + "/logs?follow=true"), 404, "not_found", {unknown});
  expect_refusal(as(bob_, "POST", "/v1/runs/" + id + "/cancel"), 404, "not_found", {unknown});
  EXPECT_EQ(ids(as(bob_, "GET", "/v1/runs")), std::vector<std::string>{});
  EXPECT_EQ(get_run(id)["state"], "running") << "bob's cancel did nothing";
  // Bob's own run is his; alice does not see it in her list.
  const UserCall bobs = as(bob_, "POST", "/v1/runs?wait=true", sh("true"));
  ASSERT_EQ(bobs.status, 200) << bobs.body;
  const std::string bob_id = bobs.json()["id"];
  EXPECT_EQ(ids(as(alice_, "GET", "/v1/runs")), std::vector<std::string>{id});
  EXPECT_EQ(ids(as(bob_, "GET", "/v1/runs")), std::vector<std::string>{bob_id});
  EXPECT_EQ(as(bob_, "GET", "/v1/runs?limit=1").json()["next"], nullptr);
  // The owner, root and the admin group see it.
  EXPECT_EQ(as(alice_, "GET", "/v1/runs/" + id).status, 200);
  EXPECT_EQ(as(carol_, "GET", "/v1/runs/" + id).status, 200);
  EXPECT_EQ(ids(as(carol_, "GET", "/v1/runs")).size(), 2u);
  EXPECT_EQ(list().size(), 2u);
  EXPECT_EQ(get_run(id)["peer"]["uid"], alice_.uid);
  const UserCall logs = as(alice_, "GET", "/v1/runs/" + id + "/logs");
  EXPECT_EQ(logs.status, 200);
  // Only the owner (or an admin) cancels.
  const UserCall cancelled = as(alice_, "POST", "/v1/runs/" + id + "/cancel");
  EXPECT_EQ(cancelled.status, 202) << cancelled.body;
  EXPECT_EQ(wait_finished(id)["state"], "cancelled");
}

TEST_F(CapsuledAuth, ListPagesOnlyTheCallersRuns) {
  std::vector<std::string> alices;
  for (int i = 0; i < 3; ++i) {
    ASSERT_EQ(as(alice_, "POST", "/v1/runs?wait=true", sh("true")).status, 200);
    ASSERT_EQ(as(bob_, "POST", "/v1/runs?wait=true", sh("true")).status, 200);
  }
  std::vector<std::string> seen;
  std::string target = "/v1/runs?limit=2";
  for (int page = 0; page < 5; ++page) {
    const json body = as(alice_, "GET", target).json();
    for (const auto& run : body["runs"]) {
      EXPECT_EQ(run["peer"]["uid"], alice_.uid);
      seen.push_back(run["id"]);
    }
    if (body["next"].is_null()) break;
    target = "/v1/runs?limit=2&after=" + body["next"].get<std::string>();
  }
  EXPECT_EQ(seen.size(), 3u);
  std::sort(seen.begin(), seen.end());
  EXPECT_EQ(std::unique(seen.begin(), seen.end()), seen.end());
}

TEST_F(CapsuledAuth, OthersSessionsAreNotFoundAndAdminsSeeThem) {
  const fs::path own = owned_dir("alice-session", alice_, 0755);
  const UserCall made = as(alice_, "POST", "/v1/sessions", json{{"workspace", {{"path", own.string()}}}});
  ASSERT_EQ(made.status, 201) << made.body;
  const std::string id = made.json()["id"];
  const UserCall ran = as(alice_, "POST", "/v1/sessions/" + id + "/exec", json{{"argv", {"ls", "/workspace"}}});
  EXPECT_EQ(ran.status, 200) << ran.body;
  const std::string exec_id = ran.json()["id"];
  for (const auto& [method, target] : std::vector<std::pair<std::string, std::string>>{
           {"GET", "/v1/sessions/" + id}, {"DELETE", "/v1/sessions/" + id}, {"POST", "/v1/sessions/" + id + "/exec"},
           {"GET", "/v1/sessions/" + id + "/execs"}, {"GET", "/v1/sessions/" + id + "/execs/" + exec_id + "/stream"}}) {
    expect_refusal(as(bob_, method, target, method == "POST" ? json{{"argv", {"true"}}} : json(nullptr)), 404,
                   "not_found", {"no session with id " + id});
  }
  expect_refusal(as(bob_, "GET", "/v1/runs/" + exec_id), 404, "not_found", {"no run with id " + exec_id});
  EXPECT_TRUE(as(bob_, "GET", "/v1/sessions").json()["sessions"].empty());
  EXPECT_EQ(as(carol_, "GET", "/v1/sessions").json()["sessions"].size(), 1u) << "the admin group sees every session";
  EXPECT_EQ(as(alice_, "DELETE", "/v1/sessions/" + id).json()["state"], "deleted");
}

TEST_F(CapsuledAuth, SpecialFilesAreNeverOpenedForIo) {
  const fs::path own = owned_dir("alice-fifo", alice_, 0700);
  ASSERT_EQ(::mkfifo((own / "pipe.tar").c_str(), 0600), 0);
  ASSERT_EQ(::chown((own / "pipe.tar").c_str(), alice_.uid, alice_.gid), 0);
  // Opening a fifo for reading would wait for a writer; it is refused without being opened.
  expect_refusal(as(alice_, "POST", "/v1/images", {{"source", (own / "pipe.tar").string()}, {"format", "archive"}, {"ref", "t/f:1"}}),
                 400, "invalid_request", {"not a regular file"});
  ASSERT_EQ(call("POST", "/v1/images", {{"source", own.string()}, {"format", "rootfs"}, {"ref", "t/f:1"}}).status, 201);
  expect_refusal(as(alice_, "POST", "/v1/images/" + http::url_encode("t/f:1") + "/save", {{"path", (own / "pipe.tar").string()}}),
                 400, "invalid_request", {"not a regular file"});
  expect_refusal(as(alice_, "POST", "/v1/images", {{"source", (own / "missing").string()}, {"format", "rootfs"}, {"ref", "t/f:2"}}),
                 400, "invalid_request", {"does not exist"});
}

// The daemon attributes plain HTTP from any client to its peer: curl run as alice gets alice's rights.
TEST_F(CapsuledAuth, PlainCurlGetsTheCallersRights) {
  const fs::path own = owned_dir("alice-curl", alice_, 0700);
  // The body, then a line with the status (curl runs as alice, so it writes nowhere but its stdout).
  auto curl_as_alice = [&](const json& spec) {
    const std::string command = "setpriv --reuid=" + std::to_string(alice_.uid) + " --regid=" + std::to_string(alice_.gid) +
                                " --clear-groups curl -s -w '\\n%{http_code}' --unix-socket " + socket_ +
                                " -X POST 'http://capsule/v1/runs?wait=true' -d '" + spec.dump() + "'";
    FILE* pipe = ::popen(command.c_str(), "r");
    std::string output;
    char buffer[4096];
    while (pipe != nullptr && std::fgets(buffer, sizeof buffer, pipe) != nullptr) output += buffer;
    if (pipe != nullptr) ::pclose(pipe);
    const std::size_t last = output.rfind('\n');
    return last == std::string::npos ? std::pair<std::string, json>{output, json()}
                                     : std::pair<std::string, json>{output.substr(last + 1),
                                                                    json::parse(output.substr(0, last), nullptr, false)};
  };
  const auto [refused, refusal] = curl_as_alice(with_workspace("cat /workspace/shadow", "/etc", "ro"));
  EXPECT_EQ(refused, "403");
  EXPECT_EQ(refusal["error"]["code"], "forbidden") << refusal;
  const auto [ran, run] = curl_as_alice(with_workspace("echo hi > /workspace/f", own, "rw"));
  EXPECT_EQ(ran, "200") << run;
  EXPECT_EQ(run["state"], "succeeded") << run;
  struct stat st {};
  ASSERT_EQ(::stat((own / "f").c_str(), &st), 0);
  EXPECT_EQ(st.st_uid, alice_.uid);
}

TEST_F(CapsuledAuth, AnUnknownAdminGroupStopsTheDaemon) {
  const fs::path config = dir_ / "bad.json";
  write_file(config, json{{"admin_group", "capsule-t-no-such-group"}}.dump());
  const std::string command = fs::path(CAPSULE_BIN_DIR).append("capsuled").string() + " --socket " + (dir_ / "b.sock").string() +
                              " --state-dir " + (dir_ / "b-state").string() + " --config " + config.string() + " > " +
                              (dir_ / "bad.log").string() + " 2>&1";
  const int status = std::system(command.c_str());
  ASSERT_TRUE(WIFEXITED(status));
  EXPECT_EQ(WEXITSTATUS(status), 1);
  EXPECT_NE(slurp(dir_ / "bad.log").find("admin_group: no group named 'capsule-t-no-such-group'"), std::string::npos)
      << slurp(dir_ / "bad.log");
}

}  // namespace
}  // namespace capsule::testing
