// Integration tests of who owns what a caller shares with others through one capsuled: host paths that name the
// daemon's own descriptors, image refs with owners and sharing, commits private to the committer, and imported
// bundles whose spec names host paths. The hostile parties are real test users in and outside the socket group.
#include <sys/stat.h>
#include <unistd.h>

#include "tests/support/auth_users.h"
#include "tests/support/capsuled_fixture.h"

namespace capsule::testing {
namespace {

class CapsuledOwners : public Capsuled {
 protected:
  void SetUp() override {
    Capsuled::SetUp();
    group_ = account_name("cap-o");
    create_group(group_);
    alice_ = create_user(account_name("cap-oa"), group_, {});
    bob_ = create_user(account_name("cap-ob"), group_, {});
    const fs::path config = dir_ / "capsuled.json";
    write_file(config, json{{"socket_group", group_}}.dump());
    start({"--config", config.string()});
  }
  void TearDown() override {
    Capsuled::TearDown();
    remove_user(alice_.name);
    remove_user(bob_.name);
    remove_group(group_);
  }

  // A root filesystem with a shell and cat, packed into a tar every user may read (imports of a file need only that).
  fs::path rootfs_tar(const std::string& marker) {
    const fs::path root = make_dir("rootfs-" + marker);
    for (const char* binary : {"/bin/sh", "/bin/cat"}) copy_with_libraries(binary, root);
    if (fs::is_symlink("/lib64") || fs::exists("/lib64")) fs::create_directories(root / "lib64");
    write_file(root / "marker", marker + "\n");
    const fs::path tar = dir_ / (marker + ".tar");
    sh_ok("tar -C " + shell_quoted(root.string()) + " -cf " + shell_quoted(tar.string()) + " .");
    ::chmod(tar.c_str(), 0644);
    return tar;
  }
  static json import_body(const fs::path& tar, const std::string& ref) {
    return {{"source", tar.string()}, {"format", "rootfs"}, {"ref", ref}};
  }
  static json run_on(const std::string& image, const std::string& script) {
    json spec = sh(script);
    spec["image"] = image;
    return spec;
  }
  static std::string image(const std::string& ref) { return "/v1/images/" + http::url_encode(ref); }
  // A 404 as an unknown image gets it (not a route the router does not know).
  static void expect_unknown_image(const UserCall& call) {
    EXPECT_EQ(call.status, 404) << call.body;
    EXPECT_EQ(call.json()["error"].value("code", ""), "image_not_found") << call.body;
  }
  static bool lists_ref(const UserCall& call, const std::string& ref) {
    for (const auto& image : call.json().value("images", json::array())) {
      for (const auto& name : image.value("refs", json::array())) {
        if (name == ref) return true;
      }
    }
    return false;
  }

  std::string group_;
  TestUser alice_, bob_;
};

// A path through /proc/self/fd (or a link to it) named the helper's copy of the daemon's descriptors: the
// ledger, logs, other users' trees. The helper now closes them all and refuses magic links.
TEST_F(CapsuledOwners, MagicLinksNeverNameTheDaemonsDescriptors) {
  const UserCall mine = call_as(alice_, socket_, "POST", "/v1/sessions", json::object());
  ASSERT_EQ(mine.status, 201) << mine.body << mine.failure;
  const std::string files = "/v1/sessions/" + mine.json()["id"].get<std::string>() + "/files?path=/tmp/f";
  const fs::path link = make_dir("links") / "fd";
  int copied = 0, snapshotted = 0;
  std::string first_copy;
  for (int fd = 0; fd < 64; ++fd) {
    const std::string target = "/proc/self/fd/" + std::to_string(fd);
    const UserCall copy = call_as(alice_, socket_, "PUT", files + std::to_string(fd), json{{"source", target}});
    if (copy.status < 300) {
      ++copied;
      if (first_copy.empty()) first_copy = target;
    } else {
      EXPECT_EQ(copy.status, 400) << target << ": " << copy.body;
      EXPECT_EQ(copy.json()["error"].value("code", ""), "invalid_request") << copy.body;
    }
    const UserCall snapshot = call_as(alice_, socket_, "POST", "/v1/snapshots", json{{"dir", target}});
    if (snapshot.status < 300) ++snapshotted;
    else EXPECT_EQ(snapshot.status, 400) << target << ": " << snapshot.body;
  }
  // A link of the caller's own to a magic link is refused the same way.
  fs::remove(link);
  fs::create_symlink("/proc/self/exe", link);
  const UserCall through_link = call_as(alice_, socket_, "PUT", files + "link", json{{"source", link.string()}});
  EXPECT_EQ(copied, 0) << "the first one read: " << first_copy;
  EXPECT_EQ(snapshotted, 0);
  EXPECT_EQ(through_link.status, 400) << through_link.body;
  EXPECT_NE(through_link.body.find("magic link"), std::string::npos) << through_link.body;
  EXPECT_EQ(call_as(alice_, socket_, "GET", "/v1/health").status, 200);
}

// A private ref is invisible to others (listing, inspect, runs by ref and by digest); nobody but its owner (or
// root) points or removes it, shared or not; root's imports are the system images everyone may use.
TEST_F(CapsuledOwners, ImageRefsHaveOwnersAndAreSharedOnPurpose) {
  const fs::path tar = rootfs_tar("alice");
  const UserCall imported = call_as(alice_, socket_, "POST", "/v1/images", import_body(tar, "team/app:1"));
  ASSERT_EQ(imported.status, 201) << imported.body << imported.failure;
  const std::string digest = imported.json()["digest"];
  const json access = imported.json()["ref_access"]["team/app:1"];
  EXPECT_EQ(access["owner"], alice_.uid) << imported.body;
  EXPECT_EQ(access["public"], false) << imported.body;

  // Private: bob sees nothing of it, cannot run it, cannot take the name over.
  EXPECT_FALSE(lists_ref(call_as(bob_, socket_, "GET", "/v1/images"), "team/app:1"));
  expect_unknown_image(call_as(bob_, socket_, "GET", image("team/app:1")));
  expect_unknown_image(call_as(bob_, socket_, "GET", image(digest)));
  const UserCall blind_run = call_as(bob_, socket_, "POST", "/v1/runs?wait=true", run_on("team/app:1", "cat /marker"));
  EXPECT_EQ(blind_run.status, 404) << blind_run.body;
  EXPECT_EQ(blind_run.json()["error"].value("code", ""), "image_not_found") << blind_run.body;
  const UserCall by_digest = call_as(bob_, socket_, "POST", "/v1/runs?wait=true", run_on(digest, "cat /marker"));
  EXPECT_EQ(by_digest.status, 404) << by_digest.body;
  const UserCall takeover = call_as(bob_, socket_, "POST", "/v1/images", import_body(rootfs_tar("bob"), "team/app:1"));
  EXPECT_EQ(takeover.status, 403) << takeover.body;
  EXPECT_EQ(takeover.json()["error"].value("code", ""), "forbidden") << takeover.body;
  expect_unknown_image(call_as(bob_, socket_, "DELETE", image("team/app:1")));
  expect_unknown_image(call_as(bob_, socket_, "PATCH", image("team/app:1"), json{{"public", true}}));

  // Shared: bob may run it, and still neither re-point nor remove nor re-share it.
  const UserCall shared = call_as(alice_, socket_, "PATCH", image("team/app:1"), json{{"public", true}});
  ASSERT_EQ(shared.status, 200) << shared.body;
  EXPECT_EQ(shared.json()["ref_access"]["team/app:1"]["public"], true) << shared.body;
  const UserCall used = call_as(bob_, socket_, "POST", "/v1/runs?wait=true", run_on("team/app:1", "cat /marker"));
  ASSERT_EQ(used.status, 200) << used.body;
  EXPECT_EQ(used.json()["result"]["stdout"].value("head", ""), "alice\n") << used.body;
  const UserCall retag = call_as(bob_, socket_, "POST", "/v1/images", import_body(rootfs_tar("bob2"), "team/app:1"));
  EXPECT_EQ(retag.status, 403) << retag.body;
  const UserCall removal = call_as(bob_, socket_, "DELETE", image("team/app:1"));
  EXPECT_EQ(removal.status, 403) << removal.body;
  EXPECT_EQ(removal.json()["error"].value("code", ""), "forbidden") << removal.body;
  EXPECT_EQ(call_as(bob_, socket_, "DELETE", image(digest)).status, 403);
  EXPECT_EQ(call_as(bob_, socket_, "PATCH", image("team/app:1"), json{{"public", false}}).status, 403);
  EXPECT_EQ(call_as(bob_, socket_, "POST", "/v1/images/gc").status, 403);
  // A group the sharer is not in is refused.
  const UserCall stranger = call_as(alice_, socket_, "PATCH", image("team/app:1"), json{{"group", "root"}});
  EXPECT_EQ(stranger.status, 403) << stranger.body;

  // The name still runs alice's image, for alice.
  const UserCall own = call_as(alice_, socket_, "POST", "/v1/runs?wait=true", run_on("team/app:1", "cat /marker"));
  EXPECT_EQ(own.json()["result"]["stdout"].value("head", ""), "alice\n") << own.body;

  // Root's import is a system image: everyone sees and runs it; root may replace anyone's ref.
  const HttpResponse system = call("POST", "/v1/images", import_body(rootfs_tar("system"), "system/base:1"));
  ASSERT_EQ(system.status, 201) << system.body;
  EXPECT_EQ(body_json(system)["ref_access"]["system/base:1"]["public"], true);
  EXPECT_TRUE(lists_ref(call_as(bob_, socket_, "GET", "/v1/images"), "system/base:1"));
  EXPECT_EQ(call_as(bob_, socket_, "DELETE", image("system/base:1")).status, 403);
  EXPECT_EQ(call("DELETE", image("team/app:1")).status, 200);
  EXPECT_EQ(call_as(alice_, socket_, "GET", "/v1/health").status, 200);
}

// A run's outputs are its owner's; an image committed from them (or from a session) is the committer's alone
// until it says otherwise, however public the image below it.
TEST_F(CapsuledOwners, CommitsArePrivateToTheCommitter) {
  ASSERT_EQ(call("POST", "/v1/images", import_body(rootfs_tar("system"), "system/base:1")).status, 201);
  const UserCall made = call_as(alice_, socket_, "POST", "/v1/runs?wait=true",
                                run_on("system/base:1", "echo alice-secret > /secret"));
  ASSERT_EQ(made.status, 200) << made.body << made.failure;
  ASSERT_EQ(made.json()["result"].value("exit_code", -1), 0) << made.body;
  const std::string run = made.json()["id"];
  const UserCall committed = call_as(alice_, socket_, "POST", "/v1/runs/" + run + "/commit", json{{"ref", "alice/built:1"}});
  ASSERT_EQ(committed.status, 201) << committed.body;
  EXPECT_EQ(committed.json()["ref_access"]["alice/built:1"]["owner"], alice_.uid) << committed.body;
  EXPECT_EQ(committed.json()["ref_access"]["alice/built:1"]["public"], false) << committed.body;
  const std::string digest = committed.json()["digest"];

  const UserCall session = call_as(alice_, socket_, "POST", "/v1/sessions", json{{"image", "system/base:1"}});
  ASSERT_EQ(session.status, 201) << session.body;
  const std::string sid = session.json()["id"];
  ASSERT_EQ(call_as(alice_, socket_, "POST", "/v1/sessions/" + sid + "/exec", json{{"script", "echo s > /s"}}).status, 200);
  const UserCall from_session =
      call_as(alice_, socket_, "POST", "/v1/sessions/" + sid + "/commit", json{{"ref", "alice/session:1"}});
  ASSERT_EQ(from_session.status, 201) << from_session.body;
  EXPECT_EQ(from_session.json()["ref_access"]["alice/session:1"]["public"], false) << from_session.body;
  EXPECT_EQ(call_as(alice_, socket_, "DELETE", "/v1/sessions/" + sid).status / 100, 2);

  EXPECT_FALSE(lists_ref(call_as(bob_, socket_, "GET", "/v1/images"), "alice/built:1"));
  EXPECT_FALSE(lists_ref(call_as(bob_, socket_, "GET", "/v1/images"), "alice/session:1"));
  expect_unknown_image(call_as(bob_, socket_, "GET", image(digest)));
  expect_unknown_image(call_as(bob_, socket_, "POST", "/v1/runs?wait=true", run_on("alice/built:1", "cat /secret")));
  expect_unknown_image(call_as(bob_, socket_, "POST", image("alice/session:1") + "/save",
                               json{{"path", (dir_ / "stolen.tar").string()}}));
  // Bob's own commit of another run of his cannot take alice's name either.
  const UserCall bobs = call_as(bob_, socket_, "POST", "/v1/runs?wait=true", run_on("system/base:1", "echo b > /b"));
  ASSERT_EQ(bobs.status, 200) << bobs.body;
  const UserCall steal = call_as(bob_, socket_, "POST", "/v1/runs/" + bobs.json()["id"].get<std::string>() + "/commit",
                                 json{{"ref", "alice/built:1"}});
  EXPECT_EQ(steal.status, 403) << steal.body;
  EXPECT_EQ(steal.json()["error"].value("code", ""), "forbidden") << steal.body;

  const UserCall own = call_as(alice_, socket_, "POST", "/v1/runs?wait=true", run_on("alice/built:1", "cat /secret"));
  EXPECT_EQ(own.json()["result"]["stdout"].value("head", ""), "alice-secret\n") << own.body;
  EXPECT_EQ(call_as(bob_, socket_, "GET", "/v1/health").status, 200);
}

}  // namespace
}  // namespace capsule::testing
