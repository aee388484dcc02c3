// What a box's content can do to the host through a real capsuled (issue 34): setuid files fetched as root by
// `runs cp` and `session cp`, the owners and modes the served tars name, a non-root caller's cow session diff, and
// a /tmp filled past the memory limit, which must end the command oom_killed rather than capsule's internal_error.
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

const std::string kHostEffectsGroup = account_name("capsule-t-he");

// What the box made for the copies: a setuid+setgid file, a setgid directory, a plain executable.
constexpr const char* kPrivilegedTree =
    "mkdir -p out/shared && echo suid > out/suid && chmod 6755 out/suid && chmod 2775 out/shared && "
    "echo plain > out/shared/plain && chmod 0755 out/shared/plain";

struct TarOwner {
  std::int64_t uid = -1, gid = -1;
  mode_t perm = 0;
};

// Entry name -> the owner and permission bits a tar names.
std::map<std::string, TarOwner> tar_owners(const std::string& bytes) {
  std::map<std::string, TarOwner> owners;
  struct archive* a = archive_read_new();
  archive_read_support_format_tar(a);
  EXPECT_EQ(archive_read_open_memory(a, bytes.data(), bytes.size()), ARCHIVE_OK);
  archive_entry* entry;
  while (archive_read_next_header(a, &entry) == ARCHIVE_OK) {
    std::string name = archive_entry_pathname(entry);
    if (name.ends_with('/')) name.pop_back();
    owners[name] = TarOwner{archive_entry_uid(entry), archive_entry_gid(entry), archive_entry_perm(entry)};
  }
  archive_read_free(a);
  return owners;
}

class CapsuledHostEffects : public Capsuled {
 protected:
  static void SetUpTestSuite() {
    try {
      create_group(kHostEffectsGroup);
      agent_ = create_user(account_name("capsule-t-he-ag"), kHostEffectsGroup, {});
    } catch (const std::exception& e) {
      setup_error_ = e.what();
    }
  }
  static void TearDownTestSuite() {
    remove_user(account_name("capsule-t-he-ag"));
    remove_group(kHostEffectsGroup);
  }

  void SetUp() override {
    ASSERT_TRUE(setup_error_.empty()) << setup_error_;
    Capsuled::SetUp();
    const fs::path config = dir_ / "capsuled.json";
    write_file(config, json{{"socket_group", kHostEffectsGroup}}.dump());
    start({"--config", config.string()});
  }

  // Each copied file: no setuid/setgid bit, owned by the caller (this test: root), the other bits as made.
  static void expect_unprivileged_copy(const fs::path& dest) {
    const std::map<std::string, mode_t> made = {{"suid", 0755}, {"shared", 0775}, {"shared/plain", 0755}};
    for (const auto& [name, perm] : made) {
      struct stat st {};
      ASSERT_EQ(::lstat((dest / name).c_str(), &st), 0) << dest / name;
      EXPECT_EQ(st.st_mode & 07777, perm) << name << " came out " << std::oct << (st.st_mode & 07777);
      EXPECT_EQ(st.st_uid, ::getuid()) << name;
      EXPECT_EQ(st.st_gid, ::getgid()) << name;
    }
  }

  // The served tar names the box's own view: sandbox root as 0:0, and no setuid/setgid bit.
  static void expect_box_owners(const std::string& tar) {
    const auto owners = tar_owners(tar);
    ASSERT_TRUE(owners.count("suid")) << tar.size();
    for (const auto& [name, owner] : owners) {
      EXPECT_EQ(owner.uid, 0) << name;
      EXPECT_EQ(owner.gid, 0) << name;
      EXPECT_EQ(owner.perm & 06000, 0u) << name << " " << std::oct << owner.perm;
    }
    EXPECT_EQ(owners.at("suid").perm, 0755u);
    EXPECT_EQ(owners.at("shared").perm, 0775u);
  }

  // A workspace holding fill_tmp (sandbox/testcases): a writer to /tmp that holds less memory than init.
  fs::path fill_workspace() const {
    const fs::path workspace = make_dir("fill-ws");
    fs::copy_file(fs::path(testcases_dir()) / "fill_tmp", workspace / "fill_tmp");
    return workspace;
  }

  static inline TestUser agent_;
  static inline std::string setup_error_;
};

TEST_F(CapsuledHostEffects, RunsCpAsRootNeverPlantsASetuidFile) {
  const fs::path workspace = make_dir("ws");
  json spec = sh("cd /workspace && " + std::string(kPrivilegedTree));
  spec["workspace"] = {{"path", workspace.string()}, {"mode", "cow"}};
  const json run = run_and_wait(spec);
  ASSERT_EQ(run["state"], "succeeded") << run.dump();
  const std::string id = run["id"];

  const HttpResponse tar = call("GET", "/v1/runs/" + id + "/files?path=out");
  ASSERT_EQ(tar.status, 200) << tar.body;
  expect_box_owners(tar.body);

  const fs::path dest = dir_ / "fetched";
  const Cli cli = run_capsule_cli(dir_, {"--socket", socket_, "runs", "cp", id + ":out", dest.string()});
  ASSERT_EQ(cli.code, 0) << cli.err;
  expect_unprivileged_copy(dest);
  EXPECT_EQ(call("GET", "/v1/health").status, 200);
}

TEST_F(CapsuledHostEffects, SessionCpAsRootNeverPlantsASetuidFile) {
  const HttpResponse created = call("POST", "/v1/sessions", json::object());
  ASSERT_EQ(created.status, 201) << created.body;
  const std::string id = body_json(created)["id"];
  const HttpResponse made =
      call("POST", "/v1/sessions/" + id + "/exec", json{{"script", "cd /tmp && " + std::string(kPrivilegedTree)}});
  ASSERT_EQ(made.status, 200) << made.body;
  ASSERT_EQ(body_json(made)["state"], "succeeded") << made.body;

  const HttpResponse tar = call("GET", "/v1/sessions/" + id + "/files?path=/tmp/out");
  ASSERT_EQ(tar.status, 200) << tar.body;
  expect_box_owners(tar.body);

  const fs::path dest = dir_ / "fetched";
  const Cli cli = run_capsule_cli(dir_, {"--socket", socket_, "session", "cp", id + ":/tmp/out", dest.string()});
  ASSERT_EQ(cli.code, 0) << cli.err;
  expect_unprivileged_copy(dest);
  EXPECT_EQ(call("DELETE", "/v1/sessions/" + id).status, 200);
}

TEST_F(CapsuledHostEffects, ANonRootCallersCowSessionDiffListsItsChange) {
  const fs::path workspace = make_dir("agent-ws");
  write_file(workspace / "kept.txt", "kept\n");
  write_file(workspace / "gone.txt", "gone\n");
  for (const char* name : {"", "kept.txt", "gone.txt"}) {
    ASSERT_EQ(::chown((workspace / name).c_str(), agent_.uid, agent_.gid), 0);
  }
  const UserCall created = call_as(agent_, socket_, "POST", "/v1/sessions",
                                   json{{"workspace", {{"path", workspace.string()}, {"mode", "cow"}}}});
  ASSERT_EQ(created.status, 201) << created.body << created.failure;
  const std::string id = created.json()["id"];
  const UserCall changed = call_as(agent_, socket_, "POST", "/v1/sessions/" + id + "/exec",
                                   json{{"script", "cd /workspace && echo new > added.txt && rm gone.txt"}});
  ASSERT_EQ(changed.status, 200) << changed.body << changed.failure;
  ASSERT_EQ(changed.json()["state"], "succeeded") << changed.body;

  const UserCall diff = call_as(agent_, socket_, "GET", "/v1/sessions/" + id + "/diff?patch=1");
  ASSERT_EQ(diff.status, 200) << diff.body << diff.failure;
  const json found = diff.json();
  ASSERT_EQ(found["added"].size(), 1u) << diff.body;
  EXPECT_EQ(found["added"][0]["path"], "added.txt");
  ASSERT_EQ(found["deleted"].size(), 1u) << diff.body;
  EXPECT_EQ(found["deleted"][0]["path"], "gone.txt");
  EXPECT_EQ(found["totals"]["modified"], 0) << diff.body;
  EXPECT_FALSE(found.contains("errors")) << diff.body;
  EXPECT_FALSE(fs::exists(workspace / "added.txt")) << "the host tree is left alone";

  EXPECT_EQ(call_as(agent_, socket_, "DELETE", "/v1/sessions/" + id).status, 200);
  EXPECT_EQ(call("GET", "/v1/health").status, 200);
}

// tmpfs pages are charged to the box's memory but belong to no process: once the limit is hit the kernel's victim
// must be the command, smaller than init as it is, and the run says oom_killed, not capsule's internal_error.
TEST_F(CapsuledHostEffects, ATmpfsFilledPastTheMemoryLimitEndsOomKilled) {
  json spec = sh("exec /workspace/fill_tmp");
  spec["workspace"] = {{"path", fill_workspace().string()}, {"mode", "ro"}};
  spec["limits"] = {{"memory", "64m"}, {"tmp_size", "1g"}, {"wall_time", "120s"}};
  const json run = run_and_wait(spec);
  EXPECT_EQ(run["state"], "oom_killed") << run.dump();
  EXPECT_GE(run["result"]["oom_kills"].get<int>(), 1) << run.dump();
  EXPECT_EQ(call("GET", "/v1/health").status, 200);
}

// In a session the box outlives the fill: the exec ends oom_killed and the session stays ready. Its execs from
// the second on are handed to a standby forked ahead: that path gives up init's OOM score too.
TEST_F(CapsuledHostEffects, ASessionsTmpfsFilledPastTheMemoryLimitEndsTheExecOomKilled) {
  const HttpResponse created =
      call("POST", "/v1/sessions", json{{"workspace", {{"path", fill_workspace().string()}, {"mode", "ro"}}},
                                        {"limits", {{"memory", "64m"}, {"tmp_size", "1g"}}}});
  ASSERT_EQ(created.status, 201) << created.body;
  const std::string id = body_json(created)["id"];
  const auto exec = [&](const std::string& script) {
    const HttpResponse answer = call("POST", "/v1/sessions/" + id + "/exec", json{{"script", script}});
    EXPECT_EQ(answer.status, 200) << answer.body;
    return body_json(answer);
  };
  EXPECT_EQ(exec("cat /proc/self/oom_score_adj")["result"]["stdout"].value("head", ""), "1000\n");
  EXPECT_EQ(exec("cat /proc/self/oom_score_adj")["result"]["stdout"].value("head", ""), "1000\n");
  const json filled = exec("exec /workspace/fill_tmp");
  EXPECT_EQ(filled["state"], "oom_killed") << filled.dump();
  const HttpResponse session = call("GET", "/v1/sessions/" + id);
  ASSERT_EQ(session.status, 200) << session.body;
  EXPECT_EQ(body_json(session)["state"], "ready") << session.body;
  EXPECT_EQ(call("DELETE", "/v1/sessions/" + id).status, 200);
  EXPECT_EQ(call("GET", "/v1/health").status, 200);
}

}  // namespace
}  // namespace capsule::testing
