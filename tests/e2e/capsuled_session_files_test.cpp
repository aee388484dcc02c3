// Integration tests of a session's files, diff, checkpoints and reset against a real capsuled: binary and 200 MB
// round trips, trees with modes and symlinks, every escape through the file routes, undo to a named point, slow
// checkpoints beside a responsive API, and shutdown with transfers in flight.
#include <signal.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <atomic>
#include <fstream>
#include <random>
#include <thread>

#include "tests/support/auth_users.h"
#include "tests/support/capsuled_fixture.h"

namespace capsule::testing {
namespace {

class CapsuledSessionFiles : public Capsuled {
 protected:
  std::string create_with_workspace() {
    workspace_ = make_dir("ws");
    write_file(workspace_ / "kept.txt", "line 1\nline 2\nline 3\n");
    write_file(workspace_ / "gone.txt", "bye\n");
    const HttpResponse response = call("POST", "/v1/sessions", json{{"workspace", {{"path", workspace_.string()}}}});
    EXPECT_EQ(response.status, 201) << response.body;
    return body_json(response)["id"];
  }
  json exec(const std::string& id, const std::string& script) const {
    const HttpResponse response = call("POST", "/v1/sessions/" + id + "/exec", json{{"script", script}});
    EXPECT_EQ(response.status, 200) << response.body;
    return body_json(response);
  }
  static std::string out(const json& run) { return run["result"]["stdout"].value("head", ""); }
  // PUT with a raw body of `type`.
  RawResponse put_raw(const std::string& id, const std::string& query, const std::string& type,
                      const std::string& body) const {
    return raw_request(socket_, "PUT /v1/sessions/" + id + "/files?" + query + " HTTP/1.1\r\nHost: capsule\r\n"
                                "Content-Type: " + type + "\r\nContent-Length: " + std::to_string(body.size()) +
                                "\r\nConnection: close\r\n\r\n" + body);
  }
  static std::string sha256_of_file(const fs::path& file) {
    const std::string command = "sha256sum '" + file.string() + "'";
    FILE* pipe = popen(command.c_str(), "r");
    char line[256] = {};
    const bool got = pipe != nullptr && fgets(line, sizeof line, pipe) != nullptr;
    if (pipe != nullptr) pclose(pipe);
    return got ? std::string(line).substr(0, 64) : "";
  }

  fs::path workspace_;
};

TEST_F(CapsuledSessionFiles, BinaryFilesGoInAndOutOwnedByTheSessionUser) {
  start();
  const std::string id = create_with_workspace();
  std::string bytes;
  for (int i = 0; i < 70000; ++i) bytes.push_back(static_cast<char>(i * 7 % 256));  // NULs included
  const RawResponse put = put_raw(id, "path=/workspace/data/blob.bin&mode=0600", "application/octet-stream", bytes);
  ASSERT_EQ(put.status, 200) << put.body;
  EXPECT_EQ(json::parse(put.body)["bytes"], bytes.size());
  EXPECT_EQ(out(exec(id, "stat -c '%s %a %u:%g' /workspace/data/blob.bin")), "70000 600 0:0\n");
  const HttpResponse got = call("GET", "/v1/sessions/" + id + "/files?path=/workspace/data/blob.bin");
  ASSERT_EQ(got.status, 200);
  EXPECT_EQ(got.body, bytes);
  EXPECT_FALSE(fs::exists(workspace_ / "data")) << "the cow workspace's host dir is left alone";
}

TEST_F(CapsuledSessionFiles, A200MegabyteFileStreamsFromAHostPathAndBack) {
  start();
  const std::string id = create_with_workspace();
  const fs::path big = dir_ / "big.bin";
  {
    std::ofstream file(big, std::ios::binary);
    std::mt19937_64 random(42);
    std::vector<std::uint64_t> block(8192);
    for (int i = 0; i < 200 * 16; ++i) {  // 200 MiB in 64 KiB blocks
      for (auto& word : block) word = random();
      file.write(reinterpret_cast<const char*>(block.data()), static_cast<std::streamsize>(block.size() * 8));
    }
  }
  const std::string digest = sha256_of_file(big);
  const HttpResponse put = call("PUT", "/v1/sessions/" + id + "/files?path=/workspace/big.bin", json{{"source", big.string()}});
  ASSERT_EQ(put.status, 200) << put.body;
  EXPECT_EQ(body_json(put)["bytes"], 200ull << 20);
  EXPECT_EQ(out(exec(id, "sha256sum /workspace/big.bin | cut -c1-64")), digest + "\n");
  const HttpResponse got = call("GET", "/v1/sessions/" + id + "/files?path=/workspace/big.bin");
  ASSERT_EQ(got.status, 200);
  const fs::path back = dir_ / "back.bin";
  std::ofstream(back, std::ios::binary) << got.body;
  EXPECT_EQ(sha256_of_file(back), digest);
}

TEST_F(CapsuledSessionFiles, TreesTravelAsTarsWithModesAndSymlinks) {
  start();
  const std::string id = create_with_workspace();
  const fs::path tree = make_dir("tree");
  write_file(tree / "run.sh", "#!/bin/sh\necho ran\n");
  ::chmod((tree / "run.sh").c_str(), 0755);
  fs::create_directories(tree / "sub/empty");
  write_file(tree / "sub/secret.txt", "s\n");
  ::chmod((tree / "sub/secret.txt").c_str(), 0600);
  fs::create_symlink("sub/secret.txt", tree / "link");
  const HttpResponse put = call("PUT", "/v1/sessions/" + id + "/files?path=/workspace/tree", json{{"source", tree.string()}});
  ASSERT_EQ(put.status, 200) << put.body;
  EXPECT_EQ(out(exec(id, "cd /workspace/tree && ./run.sh && stat -c '%a %n' run.sh sub/secret.txt && readlink link && "
                         "test -d sub/empty && echo dir")),
            "ran\n755 run.sh\n600 sub/secret.txt\nsub/secret.txt\ndir\n");
  const HttpResponse tar = call("GET", "/v1/sessions/" + id + "/files?path=/workspace/tree");
  ASSERT_EQ(tar.status, 200);
  const fs::path archive = dir_ / "tree.tar";
  std::ofstream(archive, std::ios::binary) << tar.body;
  const fs::path unpacked = make_dir("unpacked");
  ASSERT_EQ(std::system(("tar -xf '" + archive.string() + "' -C '" + unpacked.string() + "'").c_str()), 0);
  EXPECT_EQ(fs::read_symlink(unpacked / "link"), "sub/secret.txt");
  EXPECT_EQ(fs::status(unpacked / "run.sh").permissions() & fs::perms::all, static_cast<fs::perms>(0755));

  // An upload the box refuses part-way (a file where the tree should go) while a big file is still being read:
  // the reading side gives up, and the daemon lives on.
  write_file(tree / "big.bin", std::string(8 << 20, 'b'));
  const HttpResponse refused =
      call("PUT", "/v1/sessions/" + id + "/files?path=/workspace/kept.txt/inside", json{{"source", tree.string()}});
  EXPECT_EQ(refused.status, 409) << refused.body;
  EXPECT_EQ(call("GET", "/v1/health").status, 200);
}

TEST_F(CapsuledSessionFiles, NoPathOrPlantedLinkReachesTheHost) {
  start();
  const std::string id = create_with_workspace();
  const std::string marker = "capsule-escape-" + std::to_string(getpid());
  expect_error(call("GET", "/v1/sessions/" + id + "/files?path=../../etc/passwd"), 400, "invalid_path", "..");
  // A symlink planted inside pointing at the host's /etc resolves inside the box, never on the host.
  exec(id, "ln -s /etc /workspace/etc-link; ln -s ../../../../../../tmp /workspace/tmp-link; mkfifo /workspace/fifo");
  const RawResponse planted = put_raw(id, "path=/workspace/etc-link/" + marker, "application/octet-stream", "x");
  EXPECT_EQ(planted.status, 200) << planted.body;
  EXPECT_FALSE(fs::exists("/etc/" + marker)) << "a write followed a planted link onto the host";
  EXPECT_EQ(out(exec(id, "cat /etc/" + marker)), "x") << "it landed in the box's own /etc";
  const RawResponse through_dots = put_raw(id, "path=/workspace/tmp-link/" + marker, "application/octet-stream", "y");
  EXPECT_EQ(through_dots.status, 200) << through_dots.body;
  EXPECT_FALSE(fs::exists("/tmp/" + marker));
  // A FIFO answers at once instead of hanging the transfer; /proc of the box is refused.
  expect_error(call("GET", "/v1/sessions/" + id + "/files?path=/workspace/fifo"), 409, "not_a_file", "fifo");
  expect_error(call("GET", "/v1/sessions/" + id + "/files?path=/proc/1/environ"), 403, "forbidden", "proc");
  expect_error(call("GET", "/v1/sessions/" + id + "/files"), 400, "invalid_request", "path");
  EXPECT_EQ(call("GET", "/v1/health").status, 200);
}

// A hostile caller (a real user in the socket's group) neither sees another user's session nor reads a host
// file it could not read itself through an upload's source.
// The daemon reads a box's files with its own rights, so it gives only what the box's processes could read: a
// host file in the workspace owned by another host user (mode 0600; the workspace maps only its owner into the
// box) is refused and left out of a tar, exactly as `cat` inside is refused; the caller's own files and what
// the box itself writes, mode 0600 included, come out.
TEST_F(CapsuledSessionFiles, ReadsGiveOnlyWhatTheBoxCouldRead) {
  start();
  workspace_ = make_dir("ws");
  write_file(workspace_ / "open.txt", "open\n");
  write_file(workspace_ / "secret.txt", "host secret\n");
  ::chmod((workspace_ / "secret.txt").c_str(), 0600);
  ASSERT_EQ(::chown((workspace_ / "secret.txt").c_str(), 12345, 12345), 0);
  const HttpResponse created = call("POST", "/v1/sessions", json{{"workspace", {{"path", workspace_.string()}}}});
  ASSERT_EQ(created.status, 201) << created.body;
  const std::string id = body_json(created)["id"];
  const json inside = exec(id, "cat /workspace/secret.txt; umask 077; echo mine > /workspace/mine.txt");
  EXPECT_NE(inside["result"]["stderr"].value("head", "").find("Permission denied"), std::string::npos) << inside;

  const HttpResponse secret = call("GET", "/v1/sessions/" + id + "/files?path=/workspace/secret.txt");
  expect_error(secret, 403, "forbidden", "secret.txt");
  EXPECT_EQ(secret.body.find("host secret"), std::string::npos);
  EXPECT_EQ(call("GET", "/v1/sessions/" + id + "/files?path=/workspace/open.txt").body, "open\n");
  EXPECT_EQ(call("GET", "/v1/sessions/" + id + "/files?path=/workspace/mine.txt").body, "mine\n");
  const HttpResponse tar = call("GET", "/v1/sessions/" + id + "/files?path=/workspace");
  ASSERT_EQ(tar.status, 200);
  EXPECT_EQ(tar.body.find("host secret"), std::string::npos) << "the tar left the unreadable file out";
  EXPECT_NE(tar.body.find("open.txt"), std::string::npos);
  EXPECT_NE(tar.body.find("mine\n"), std::string::npos);
}

TEST_F(CapsuledSessionFiles, ACallerReachesOnlyItsOwnSessionsAndHostFiles) {
  const std::string group = "capsule-f-" + std::to_string(getpid());
  create_group(group);
  const TestUser user = create_user("capsule-f-u-" + std::to_string(getpid()), group, {});
  const fs::path config = dir_ / "capsuled.json";
  write_file(config, json{{"socket_group", group}}.dump());
  start({"--config", config.string()});
  const std::string root_session = create_with_workspace();
  const std::string files = "/v1/sessions/" + root_session + "/files?path=/workspace/kept.txt";
  const UserCall peek = call_as(user, socket_, "GET", files);
  const UserCall plant = call_as(user, socket_, "PUT", files, json{{"source", "/etc/hostname"}});
  const UserCall mine = call_as(user, socket_, "POST", "/v1/sessions", json::object());
  std::string own;
  if (mine.status == 201) own = mine.json()["id"];
  const UserCall shadow = call_as(user, socket_, "PUT", "/v1/sessions/" + own + "/files?path=/tmp/s",
                                  json{{"source", "/etc/shadow"}});
  // A directory it may read holding a file it may not (as /tmp does): the file does not come along.
  const fs::path shared = make_dir("shared");
  write_file(shared / "public.txt", "for all\n");
  write_file(shared / "secret.txt", "root's secret\n");
  ::chmod((shared / "secret.txt").c_str(), 0600);
  const UserCall tree = call_as(user, socket_, "PUT", "/v1/sessions/" + own + "/files?path=/tmp/up",
                                json{{"source", shared.string()}});
  const UserCall look = call_as(user, socket_, "POST", "/v1/sessions/" + own + "/exec",
                                json{{"script", "cat /tmp/up/secret.txt 2>&1; cat /tmp/up/public.txt 2>&1"}});
  remove_user(user.name);
  EXPECT_EQ(look.status, 200) << look.body << look.failure;
  EXPECT_EQ(look.body.find("root's secret"), std::string::npos) << tree.body << look.body;
  remove_group(group);
  EXPECT_EQ(peek.status, 404) << peek.body << peek.failure;
  EXPECT_EQ(plant.status, 404) << plant.body << plant.failure;
  ASSERT_EQ(mine.status, 201) << mine.body << mine.failure;
  EXPECT_EQ(shadow.status, 403) << shadow.body;
  EXPECT_NE(shadow.body.find("forbidden"), std::string::npos) << shadow.body;
  EXPECT_EQ(call("GET", "/v1/health").status, 200);
}

TEST_F(CapsuledSessionFiles, DiffCheckpointAndResetUndoTheWorkspace) {
  start();
  const std::string id = create_with_workspace();
  exec(id, "cd /workspace && sed -i 's/line 2/line two/' kept.txt && rm gone.txt && echo new > added.txt");
  const json diff = body_json(call("GET", "/v1/sessions/" + id + "/diff?patch=1"));
  ASSERT_EQ(diff["added"].size(), 1u) << diff;
  EXPECT_EQ(diff["added"][0]["path"], "added.txt");
  EXPECT_EQ(diff["modified"][0]["path"], "kept.txt");
  EXPECT_EQ(diff["deleted"][0]["path"], "gone.txt");
  bool patched = false;
  for (const json& patch : diff["patches"]) {
    if (patch["path"] == "kept.txt") {
      patched = true;
      EXPECT_NE(patch["patch"].get<std::string>().find("-line 2\n+line two\n"), std::string::npos) << patch;
    }
  }
  EXPECT_TRUE(patched) << diff;

  const HttpResponse saved = call("POST", "/v1/sessions/" + id + "/checkpoint", json{{"name", "one"}});
  ASSERT_EQ(saved.status, 201) << saved.body;
  expect_error(call("POST", "/v1/sessions/" + id + "/checkpoint", json{{"name", "one"}}), 409, "conflict", "exists");
  expect_error(call("POST", "/v1/sessions/" + id + "/checkpoint", json{{"name", "../x"}}), 400, "invalid_request", "name");
  exec(id, "cd /workspace && echo later > later.txt && rm added.txt");

  const HttpResponse back = call("POST", "/v1/sessions/" + id + "/reset?to=one");
  ASSERT_EQ(back.status, 200) << back.body;
  EXPECT_EQ(out(exec(id, "cd /workspace && ls && cat kept.txt")), "added.txt\nkept.txt\nline 1\nline two\nline 3\n");
  expect_error(call("POST", "/v1/sessions/" + id + "/reset?to=nosuch"), 404, "not_found", "nosuch");

  ASSERT_EQ(call("POST", "/v1/sessions/" + id + "/reset").status, 200);
  EXPECT_EQ(out(exec(id, "cd /workspace && ls")), "gone.txt\nkept.txt\n");
  const json clean = body_json(call("GET", "/v1/sessions/" + id + "/diff"));
  EXPECT_EQ(clean["totals"]["added"], 0) << clean;
  EXPECT_EQ(clean["totals"]["modified"], 0) << clean;
  EXPECT_EQ(clean["totals"]["deleted"], 0) << clean;
}

// Checkpoints copying a large workspace wait on the session thread; the rest of the API answers meanwhile: health
// and the session itself come back before the first of three concurrent checkpoints is done (with the waits
// on the io threads, two of them held both and nothing else was answered until one ended).
TEST_F(CapsuledSessionFiles, SlowCheckpointsDoNotHoldUpTheRestOfTheApi) {
  start();
  const std::string id = create_with_workspace();
  const std::string other = create_with_workspace();
  ASSERT_EQ(exec(id, "head -c 1G /dev/urandom > /workspace/big.bin && echo written")["result"]["stdout"]["head"], "written\n");
  std::atomic<int> order{0};
  constexpr int kCheckpoints = 2;
  std::vector<int> checkpoint_done(kCheckpoints, 0);
  std::vector<int> checkpoint_status(kCheckpoints, 0);
  std::vector<std::thread> checkpoints;
  for (int i = 0; i < kCheckpoints; ++i) {
    checkpoints.emplace_back([&, i] {
      checkpoint_status[i] = call("POST", "/v1/sessions/" + id + "/checkpoint", json{{"name", "c" + std::to_string(i)}}).status;
      checkpoint_done[i] = ++order;
    });
  }
  const fs::path saved = state_ / "sessions" / id / "checkpoints";
  const bool copying = eventually([&] { return fs::exists(saved) && !fs::is_empty(saved); }, 60s);
  const HttpResponse health = call("GET", "/v1/health");
  const int health_done = ++order;
  const HttpResponse session = call("GET", "/v1/sessions/" + id);
  const int session_done = ++order;
  // The copy runs off the session thread: another session's exec is answered meanwhile, and an exec into the
  // one being copied waits for the box to be let go, then runs.
  const json elsewhere = exec(other, "echo elsewhere");
  const int elsewhere_done = ++order;
  const json same = exec(id, "test -f /workspace/big.bin && echo same");
  for (auto& thread : checkpoints) thread.join();
  ASSERT_TRUE(copying) << "no checkpoint started";
  EXPECT_EQ(health.status, 200) << health.body;
  EXPECT_EQ(session.status, 200) << session.body;
  EXPECT_EQ(out(elsewhere), "elsewhere\n") << elsewhere;
  EXPECT_EQ(out(same), "same\n") << same;
  for (int i = 0; i < kCheckpoints; ++i) {
    EXPECT_EQ(checkpoint_status[i], 201) << "checkpoint c" << i;
    EXPECT_LT(health_done, checkpoint_done[i]) << "health answered after checkpoint c" << i << " was done";
    EXPECT_LT(session_done, checkpoint_done[i]) << "the session answered after checkpoint c" << i << " was done";
    EXPECT_LT(elsewhere_done, checkpoint_done[i]) << "another session's exec waited for checkpoint c" << i;
  }
}

// The daemon stops cleanly with an upload and a download in flight: the upload is answered 503 draining, the
// download (whose client reads nothing) is cut off, and no transfer outlives the daemon's objects.
TEST_F(CapsuledSessionFiles, ShutdownEndsTransfersInFlight) {
  start();
  const std::string id = create_with_workspace();
  const fs::path sparse = dir_ / "sparse.bin";
  { std::ofstream(sparse, std::ios::binary); }
  fs::resize_file(sparse, 8ull << 30);  // zeros read at memory speed, written for seconds
  ASSERT_EQ(out(exec(id, "head -c 64M /dev/zero > /workspace/down.bin && echo ok")), "ok\n");

  // The download: the request sent, nothing read, so it waits for the client with 1 MiB in the server.
  const int download = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_un address{};
  address.sun_family = AF_UNIX;
  socket_.copy(address.sun_path, sizeof address.sun_path - 1);
  ASSERT_EQ(::connect(download, reinterpret_cast<const sockaddr*>(&address), sizeof address), 0);
  const std::string get = "GET /v1/sessions/" + id + "/files?path=/workspace/down.bin HTTP/1.1\r\nHost: capsule\r\n\r\n";
  ASSERT_EQ(::send(download, get.data(), get.size(), MSG_NOSIGNAL), static_cast<ssize_t>(get.size()));

  HttpResponse upload;
  std::string upload_failure;
  std::thread uploader([&] {
    try {
      upload = call("PUT", "/v1/sessions/" + id + "/files?path=/workspace/up.bin", json{{"source", sparse.string()}});
    } catch (const std::exception& e) {
      upload_failure = e.what();  // no answer at all
    }
  });
  const bool writing = eventually([&] {  // an upload writes a temporary file beside its path, renamed when whole
    const json sized = exec(id, "stat -c %s /workspace/.capsule-*.part 2>/dev/null | head -n 1");
    return std::stoull("0" + out(sized)) > 0;
  });
  stop();  // SIGTERM, then a clean exit
  uploader.join();
  std::string received;
  char buffer[65536];
  for (ssize_t n; (n = ::recv(download, buffer, sizeof buffer, 0)) > 0;) received.append(buffer, static_cast<std::size_t>(n));
  ::close(download);
  ASSERT_TRUE(writing) << "the upload never started";
  EXPECT_EQ(upload.status, 503) << upload.body << upload_failure;
  EXPECT_NE(upload.body.find("draining"), std::string::npos) << upload.body;
  EXPECT_TRUE(received.starts_with("HTTP/1.1 200")) << received.substr(0, 200);
  EXPECT_LT(received.size(), 64u << 20) << "the download was cut off";
  EXPECT_FALSE(received.ends_with("\r\n0\r\n\r\n")) << "a cut-off download has no clean end";
}

// A checkpoint comes back whole in a box that protects paths (the protect walk must not see the old state).
TEST_F(CapsuledSessionFiles, ResetToACheckpointWithProtectedPaths) {
  start();
  workspace_ = make_dir("ws");
  write_file(workspace_ / "a.txt", "start\n");
  fs::create_directories(workspace_ / "tests");
  write_file(workspace_ / "tests/t.py", "assert True\n");
  const HttpResponse made = call("POST", "/v1/sessions", json{{"workspace", {{"path", workspace_.string()}}},
                                                              {"protect", {"tests/**"}}});
  ASSERT_EQ(made.status, 201) << made.body;
  const std::string id = body_json(made)["id"];
  exec(id, "echo changed > /workspace/a.txt");
  ASSERT_EQ(call("POST", "/v1/sessions/" + id + "/checkpoint", json{{"name", "cp1"}}).status, 201);
  EXPECT_EQ(body_json(call("GET", "/v1/sessions/" + id))["checkpoints"], json::array({"cp1"}));
  exec(id, "echo later > /workspace/a.txt");
  ASSERT_EQ(call("POST", "/v1/sessions/" + id + "/reset?to=cp1").status, 200);
  EXPECT_EQ(out(exec(id, "cat /workspace/a.txt; echo x >> /workspace/tests/t.py 2>/dev/null || echo protected")),
            "changed\nprotected\n");
}

// Interactive execs: stdin written after the start, and a terminal where Ctrl-C interrupts the job.
TEST_F(CapsuledSessionFiles, StdinStaysOpenAndAPtyTakesCtrlC) {
  start();
  const std::string id = body_json(call("POST", "/v1/sessions", json::object()))["id"];
  const std::string base = "/v1/sessions/" + id + "/execs/";
  auto background = [&](const json& spec) {
    json body = spec;
    body["background"] = true;
    const HttpResponse started = call("POST", "/v1/sessions/" + id + "/exec", body);
    EXPECT_EQ(started.status, 202) << started.body;
    return body_json(started)["id"].get<std::string>();
  };
  auto stdin_of = [&](const std::string& exec, const std::string& bytes, bool close) {
    return raw_request(socket_, "POST " + base + exec + "/stdin" + (close ? "?close=true" : "") +
                                    " HTTP/1.1\r\nHost: capsule\r\nContent-Type: application/octet-stream\r\n"
                                    "Content-Length: " + std::to_string(bytes.size()) + "\r\nConnection: close\r\n\r\n" + bytes);
  };
  const std::string cat = background({{"argv", {"cat"}}, {"stdin_open", true}});
  EXPECT_EQ(stdin_of(cat, "first\n", false).status, 202);
  EXPECT_EQ(stdin_of(cat, "second\n", true).status, 202);
  const json done = wait_finished(cat);
  EXPECT_EQ(done["state"], "succeeded") << done;
  EXPECT_EQ(done["result"]["stdout"]["head"], "first\nsecond\n");
  const RawResponse late = stdin_of(cat, "late", false);
  EXPECT_EQ(late.status, 409) << late.body;

  const std::string terminal = background({{"argv", {"/bin/sh", "-c", "stty size; echo ready; exec cat"}},
                                           {"pty", true}, {"rows", 33}, {"cols", 99}});
  std::string seen;
  EXPECT_TRUE(eventually([&] {
    seen = call("GET", "/v1/runs/" + terminal + "/logs").body;
    return seen.find("ready") != std::string::npos;
  })) << seen;
  EXPECT_NE(seen.find("33 99"), std::string::npos) << seen;
  EXPECT_EQ(call("POST", base + terminal + "/resize", json{{"rows", 40}, {"cols", 120}}).status, 202);
  EXPECT_EQ(stdin_of(terminal, "\x03", false).status, 202);
  const json interrupted = wait_finished(terminal);
  EXPECT_EQ(interrupted["state"], "signaled") << interrupted;
  EXPECT_EQ(interrupted["result"]["signal"], SIGINT) << interrupted;
  EXPECT_EQ(call("GET", "/v1/health").status, 200);
}

}  // namespace
}  // namespace capsule::testing
