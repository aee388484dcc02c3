// Boxes that join one NetworkNamespace (a stack's private network): they reach each other on loopback, a box
// with its own namespace and the host do not, the joined box sees only lo, and the namespace file goes with it.
#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

#include "base/unique_fd.h"
#include "sandbox/command.h"
#include "sandbox/error.h"
#include "sandbox/launcher.h"
#include "sandbox/net_namespace.h"
#include "tests/support/scratch_dir_test.h"
#include "tests/support/test_support.h"

namespace capsule::sandbox {
namespace {

using capsule::testing::host_loopback_accepts;
using capsule::testing::host_spec;
using capsule::testing::shared_launcher;

constexpr int kPort = 18731;

// Drives every box and exec given until `last` has finished (what the daemon's loops do for many).
Result await_all(const std::vector<Sandbox*>& boxes, const std::vector<Exec*>& execs, Exec& last) {
  while (!last.finished()) {
    std::vector<pollfd> wanted;
    for (Sandbox* box : boxes) for (const pollfd& p : box->interest()) wanted.push_back(p);
    for (Exec* exec : execs) for (const pollfd& p : exec->interest()) wanted.push_back(p);
    poll(wanted.data(), wanted.size(), 50);
    for (const pollfd& p : wanted) {
      for (Sandbox* box : boxes) box->handle(p.fd, p.revents);
      for (Exec* exec : execs) exec->handle(p.fd, p.revents);
    }
    for (Exec* exec : execs) exec->tick(monotonic_ns());
  }
  return last.finish();
}

class NetworkNamespaceTest : public capsule::testing::ScratchDirTest {
 protected:
  EnvironmentSpec environment(const std::string& network_namespace) {
    EnvironmentSpec environment = environment_of(host_spec({"true"}));
    environment.session = true;
    environment.network_namespace = network_namespace;
    return environment;
  }
  ProcessSpec process(const std::string& script) {
    ProcessSpec process = process_of(host_spec({"/bin/sh", "-c", script}));
    process.limits.wall_time = std::chrono::seconds(30);
    process.limits.kill_grace = std::chrono::milliseconds(200);
    return process;
  }
};

const char* kServer =
    "exec python3 -c 'import socket\n"
    "s = socket.socket(); s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)\n"
    "s.bind((\"127.0.0.1\", 18731)); s.listen(8); print(\"up\", flush=True)\n"
    "while True:\n"
    "    c, _ = s.accept(); c.sendall(b\"hello from a\"); c.close()'";

std::string client_script() {
  return "for i in $(seq 100); do python3 -c 'import socket\n"
         "c = socket.create_connection((\"127.0.0.1\", 18731), timeout=2); print(c.recv(64).decode())' "
         "2>/tmp/err && exit 0; sleep 0.05; done; cat /tmp/err; exit 1";
}

TEST_F(NetworkNamespaceTest, BoxesJoiningOneNamespaceMeetOnLoopbackAndNoOneElseCanReachThem) {
  NetworkNamespace network = NetworkNamespace::create(dir_ + "/netns", "stack-a");
  auto a = shared_launcher().create(environment(network.path()));
  auto b = shared_launcher().create(environment(network.path()));
  auto outsider = shared_launcher().create(environment(""));
  std::unique_ptr<Exec> server = a->exec(process(kServer));
  std::unique_ptr<Exec> client = b->exec(process(client_script()));
  const Result reached = await_all({a.get(), b.get()}, {server.get(), client.get()}, *client);
  EXPECT_EQ(reached.status, Status::kSucceeded) << reached.stdout_capture.head << reached.stderr_capture.head;
  EXPECT_EQ(reached.stdout_capture.head, "hello from a\n");

  EXPECT_FALSE(host_loopback_accepts(kPort)) << "the host reached a port inside the stack's namespace";
  std::unique_ptr<Exec> stranger = outsider->exec(process(
      "python3 -c 'import socket; socket.create_connection((\"127.0.0.1\", 18731), timeout=2)' 2>&1 | tail -1"));
  const Result refused = await_all({a.get(), outsider.get()}, {server.get(), stranger.get()}, *stranger);
  EXPECT_NE(refused.stdout_capture.head.find("ConnectionRefusedError"), std::string::npos)
      << refused.stdout_capture.head;

  // Only loopback, and it cannot be changed from inside (the host owns the namespace).
  std::unique_ptr<Exec> links = b->exec(process("tail -n +3 /proc/net/dev | cut -d: -f1 | tr -d ' '; "
                                                "python3 -c 'import socket, fcntl, struct\n"
                                                "s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)\n"
                                                "try:\n"
                                                "    fcntl.ioctl(s, 0x8914, struct.pack(\"16sH\", b\"lo\", 0)); print(\"lo down\")\n"
                                                "except OSError as e:\n"
                                                "    print(\"refused\", e.errno)'; ls /sys; "
                                                "python3 -c 'import socket; socket.socket().bind((\"127.0.0.1\", 80)); print(\"port 80\")'"));
  const Result shown = await_all({a.get(), b.get()}, {server.get(), links.get()}, *links);
  EXPECT_EQ(shown.stdout_capture.head, "lo\nrefused 1\nfs\nport 80\n") << shown.stderr_capture.head;

  server->cancel();
  await_all({a.get()}, {server.get()}, *server);
  a->destroy();
  b->destroy();
  outsider->destroy();
  const std::string path = network.path();
  network.remove();
  EXPECT_FALSE(std::filesystem::exists(path));
}

TEST_F(NetworkNamespaceTest, TwoNamespacesHoldTheSamePortApart) {
  NetworkNamespace one = NetworkNamespace::create(dir_ + "/netns", "one");
  NetworkNamespace two = NetworkNamespace::create(dir_ + "/netns", "two");
  auto a = shared_launcher().create(environment(one.path()));
  auto b = shared_launcher().create(environment(two.path()));
  std::unique_ptr<Exec> first = a->exec(process(kServer));
  std::unique_ptr<Exec> second = b->exec(process(std::string(kServer)));
  std::unique_ptr<Exec> probe = a->exec(process(client_script()));
  const Result reached = await_all({a.get(), b.get()}, {first.get(), second.get(), probe.get()}, *probe);
  EXPECT_EQ(reached.stdout_capture.head, "hello from a\n");
  EXPECT_FALSE(second->finished()) << "the same port in a second namespace was refused";
  first->cancel();
  second->cancel();
  await_all({a.get(), b.get()}, {first.get(), second.get()}, *first);
  await_all({a.get(), b.get()}, {second.get()}, *second);
  a->destroy();
  b->destroy();
}

TEST_F(NetworkNamespaceTest, AFileThatIsNoNamespaceIsRefusedBeforeAnythingIsCloned) {
  const std::string fake = dir_ + "/not-a-netns";
  std::ofstream(fake) << "x";
  EXPECT_THROW(open_network_namespace(fake), SandboxError);
  EXPECT_THROW(shared_launcher().create(environment(fake)), SandboxError);
  EXPECT_THROW(shared_launcher().create(environment(dir_ + "/missing")), SandboxError);
  EXPECT_THROW(NetworkNamespace::create(dir_, "../escape"), SandboxError);
}

TEST_F(NetworkNamespaceTest, StaleNamespaceFilesOfADeadDaemonAreRemoved) {
  NetworkNamespace left = NetworkNamespace::create(dir_ + "/netns", "left");
  const std::string path = left.path();
  EXPECT_EQ(NetworkNamespace::remove_stale(dir_ + "/netns"), 1u);
  EXPECT_FALSE(std::filesystem::exists(path));
  left.remove();  // already gone: nothing happens
}

}  // namespace
}  // namespace capsule::sandbox
