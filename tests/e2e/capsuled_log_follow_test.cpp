// Lazy logs and following by notification through a real capsuled: a run or exec that prints nothing leaves no
// log file and reads as empty (plain, followed, session stream), one that prints only stderr has that file
// alone; followers get each line of a gated printer in order and end with the run, many at once, and a
// follower of a silent run ends with it. Followers here wait for the response head before the run may go on,
// so they follow a live run, not a finished one.
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <memory>
#include <vector>

#include "tests/support/capsuled_fixture.h"

namespace capsule::testing {
namespace {

// One GET on its own connection, read by hand: the head first (the daemon sends it once the follower is
// set up), then the chunked body as it comes, to its terminating chunk.
class RawFollower {
 public:
  RawFollower(const std::string& socket_path, const std::string& target) {
    fd_ = connect_to(socket_path, 60);
    if (fd_ < 0) return;
    const std::string request = "GET " + target + " HTTP/1.1\r\nHost: capsuled\r\nConnection: close\r\n\r\n";
    EXPECT_EQ(::send(fd_, request.data(), request.size(), MSG_NOSIGNAL), static_cast<ssize_t>(request.size()));
  }
  ~RawFollower() { ::close(fd_); }
  RawFollower(const RawFollower&) = delete;
  RawFollower& operator=(const RawFollower&) = delete;

  // Reads until the head is complete; its status line and headers.
  std::string head() {
    while (head_.empty()) {
      const auto end = raw_.find("\r\n\r\n");
      if (end != std::string::npos) {
        head_ = raw_.substr(0, end);
        raw_.erase(0, end + 4);
      } else if (!receive()) {
        ADD_FAILURE() << "no response head: '" << raw_ << "'";
        return {};
      }
    }
    return head_;
  }

  // Reads until the body holds at least `size` bytes or has ended; the body so far.
  const std::string& body_of_at_least(std::size_t size) {
    head();
    while (body_.size() < size && !ended_ && decode_or_receive()) {
    }
    return body_;
  }

  // Reads to the terminating chunk; the whole body, or what came before the connection closed.
  const std::string& body_to_end() {
    head();
    while (!ended_ && decode_or_receive()) {
    }
    EXPECT_TRUE(ended_) << "the body never ended cleanly; got '" << body_ << "'";
    return body_;
  }

 private:
  bool receive() {
    char buffer[4096];
    const ssize_t n = ::recv(fd_, buffer, sizeof buffer, 0);
    if (n <= 0) return false;
    raw_.append(buffer, static_cast<std::size_t>(n));
    return true;
  }

  // Moves every whole chunk from raw_ to body_; receives more when none is whole. False at end of input.
  bool decode_or_receive() {
    bool decoded = false;
    for (;;) {
      const auto line_end = raw_.find("\r\n");
      if (line_end == std::string::npos) break;
      const std::size_t size = std::stoul(raw_.substr(0, line_end), nullptr, 16);
      if (raw_.size() < line_end + 2 + size + 2) break;
      body_.append(raw_, line_end + 2, size);
      raw_.erase(0, line_end + 2 + size + 2);
      decoded = true;
      if (size == 0) {
        ended_ = true;
        break;
      }
    }
    return decoded || receive();
  }

  int fd_ = -1;
  std::string raw_;
  std::string head_;
  std::string body_;
  bool ended_ = false;
};

class CapsuledLogFollow : public Capsuled {
 protected:
  fs::path logs_dir() const { return state_ / "logs"; }
  bool has_log(const std::string& id, const std::string& stream) const {
    return fs::exists(logs_dir() / (id + "." + stream + ".z"));
  }
  std::string logs(const std::string& id, const std::string& query = "") const {
    const HttpResponse response = call("GET", "/v1/runs/" + id + "/logs" + query);
    EXPECT_EQ(response.status, 200) << response.body;
    return response.body;
  }
  // A run spec whose sandbox sees `workspace` at /workspace as the host changes it (a read-only bind).
  static json in_workspace(json spec, const fs::path& workspace) {
    spec["workspace"] = {{"path", workspace.string()}, {"mode", "ro"}};
    return spec;
  }
  static void touch(const fs::path& path) { write_file(path, ""); }
};

TEST_F(CapsuledLogFollow, ARunThatPrintsNothingLeavesNoLogFilesAndReadsAsEmpty) {
  start();
  const json run = run_and_wait(sh("true"));
  ASSERT_EQ(run["state"], "succeeded") << run;
  const std::string id = run["id"];
  EXPECT_FALSE(has_log(id, "stdout"));
  EXPECT_FALSE(has_log(id, "stderr"));
  EXPECT_EQ(logs(id), "");
  EXPECT_EQ(logs(id, "?stream=stderr"), "");
  EXPECT_EQ(logs(id, "?follow=true"), "") << "a finished run's follow ends at once";
  EXPECT_EQ(logs(id, "?from=10"), "");
  EXPECT_EQ(call("DELETE", "/v1/runs/" + id).status, 200);
}

TEST_F(CapsuledLogFollow, ARunThatPrintsOnlyStderrHasOnlyThatFile) {
  start();
  const json run = run_and_wait(sh("echo oops >&2"));
  ASSERT_EQ(run["state"], "succeeded") << run;
  const std::string id = run["id"];
  EXPECT_FALSE(has_log(id, "stdout"));
  EXPECT_TRUE(has_log(id, "stderr"));
  EXPECT_EQ(logs(id), "");
  EXPECT_EQ(logs(id, "?stream=stderr"), "oops\n");
}

TEST_F(CapsuledLogFollow, ASessionExecThatPrintsNothingLeavesNoLogFiles) {
  start();
  const HttpResponse created = call("POST", "/v1/sessions", json::object());
  ASSERT_EQ(created.status, 201) << created.body;
  const std::string session = body_json(created)["id"];
  const HttpResponse done = call("POST", "/v1/sessions/" + session + "/exec", json{{"argv", {"true"}}});
  ASSERT_EQ(done.status, 200) << done.body;
  const std::string id = body_json(done)["id"];
  EXPECT_FALSE(has_log(id, "stdout"));
  EXPECT_FALSE(has_log(id, "stderr"));
  EXPECT_EQ(logs(id), "");
  const HttpResponse stream = call("GET", "/v1/sessions/" + session + "/execs/" + id + "/stream?stream=stderr");
  EXPECT_EQ(stream.status, 200);
  EXPECT_EQ(stream.body, "");
  const HttpResponse printed = call("POST", "/v1/sessions/" + session + "/exec", json{{"script", "echo out"}});
  ASSERT_EQ(printed.status, 200) << printed.body;
  const std::string printed_id = body_json(printed)["id"];
  EXPECT_TRUE(has_log(printed_id, "stdout"));
  EXPECT_FALSE(has_log(printed_id, "stderr"));
  EXPECT_EQ(logs(printed_id), "out\n");
  EXPECT_EQ(call("DELETE", "/v1/sessions/" + session).status, 200);
}

TEST_F(CapsuledLogFollow, AFollowerGetsEachLineAsItIsPrintedAndEndsWithTheRun) {
  start();
  const fs::path workspace = make_dir("gates");
  // Each line waits for the test to have received the one before through the follower.
  const std::string id = submit(in_workspace(
      sh("for i in 1 2 3; do echo $i; while [ ! -e /workspace/go$i ]; do sleep 0.02; done; done"), workspace));
  RawFollower follower(socket_, "/v1/runs/" + id + "/logs?follow=true");
  EXPECT_TRUE(follower.head().starts_with("HTTP/1.1 200")) << follower.head();
  std::string expected;
  for (int i = 1; i <= 3; ++i) {
    expected += std::to_string(i) + "\n";
    EXPECT_EQ(follower.body_of_at_least(expected.size()), expected);
    touch(workspace / ("go" + std::to_string(i)));
  }
  EXPECT_EQ(follower.body_to_end(), "1\n2\n3\n");
  EXPECT_EQ(get_run(id)["state"], "succeeded") << "the followed log ends only when the run has ended";
}

TEST_F(CapsuledLogFollow, ManyFollowersOfASlowPrinterEachGetItAllInOrder) {
  start();
  const fs::path workspace = make_dir("many");
  const std::string id = submit(in_workspace(
      sh("while [ ! -e /workspace/go ]; do sleep 0.02; done; for i in 1 2 3; do echo $i; sleep 0.3; done; "
         "echo done >&2"),
      workspace));
  std::vector<std::unique_ptr<RawFollower>> followers;
  for (int i = 0; i < 12; ++i) {
    const std::string stream = i % 3 == 2 ? "stderr" : "stdout";
    const std::string target = "/v1/runs/" + id + "/logs?follow=true&stream=" + stream;
    followers.push_back(std::make_unique<RawFollower>(socket_, target));
    EXPECT_TRUE(followers.back()->head().starts_with("HTTP/1.1 200")) << followers.back()->head();
  }
  touch(workspace / "go");
  for (int i = 0; i < 12; ++i) {
    EXPECT_EQ(followers[i]->body_to_end(), i % 3 == 2 ? "done\n" : "1\n2\n3\n") << "follower " << i;
  }
  EXPECT_EQ(get_run(id)["state"], "succeeded");
}

TEST_F(CapsuledLogFollow, AFollowerOfARunWithNoOutputEndsWithTheRun) {
  start();
  const fs::path workspace = make_dir("silent");
  const std::string id =
      submit(in_workspace(sh("while [ ! -e /workspace/go ]; do sleep 0.02; done"), workspace));
  wait_running(id);
  RawFollower out(socket_, "/v1/runs/" + id + "/logs?follow=true");
  RawFollower err(socket_, "/v1/runs/" + id + "/logs?follow=true&stream=stderr");
  EXPECT_TRUE(out.head().starts_with("HTTP/1.1 200")) << out.head();
  EXPECT_TRUE(err.head().starts_with("HTTP/1.1 200")) << err.head();
  touch(workspace / "go");
  EXPECT_EQ(out.body_to_end(), "");
  EXPECT_EQ(err.body_to_end(), "");
  EXPECT_EQ(get_run(id)["state"], "succeeded") << "the followed log ends only when the run has ended";
  EXPECT_FALSE(has_log(id, "stdout"));
}

TEST_F(CapsuledLogFollow, AFollowerOfASilentSessionExecEndsWithIt) {
  start();
  const fs::path workspace = make_dir("session");
  // ro: a file the test makes later is seen at once (a cow workspace's overlay may have cached its absence).
  const HttpResponse created =
      call("POST", "/v1/sessions", json{{"workspace", {{"path", workspace.string()}, {"mode", "ro"}}}});
  ASSERT_EQ(created.status, 201) << created.body;
  const std::string session = body_json(created)["id"];
  const HttpResponse accepted =
      call("POST", "/v1/sessions/" + session + "/exec",
           json{{"script", "while [ ! -e /workspace/go ]; do sleep 0.02; done"}, {"background", true}});
  ASSERT_EQ(accepted.status, 202) << accepted.body;
  const std::string id = body_json(accepted)["id"];
  RawFollower follower(socket_, "/v1/sessions/" + session + "/execs/" + id + "/stream");
  EXPECT_TRUE(follower.head().starts_with("HTTP/1.1 200")) << follower.head();
  touch(workspace / "go");
  EXPECT_EQ(follower.body_to_end(), "");
  EXPECT_EQ(get_run(id)["state"], "succeeded") << "the stream ends only when the exec has ended";
  EXPECT_EQ(call("DELETE", "/v1/sessions/" + session).status, 200);
}

}  // namespace
}  // namespace capsule::testing
