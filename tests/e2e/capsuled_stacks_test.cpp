// Stacks against a real capsuled on the host image: services meet by name on their stack's private network,
// three copies hold the same port at once, nothing is reachable from the host or another stack, each broken
// stack fails at the right stage with the right reason, DELETE and a restart leave nothing behind.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>

#include "base/unique_fd.h"
#include "tests/support/test_support.h"
#include "tests/support/auth_users.h"
#include "tests/support/capsuled_fixture.h"

namespace capsule::testing {
namespace {

constexpr int kWebPort = 18080;
const std::string kPython = "/usr/bin/python3";
// The services' disks: what live boxes' disks are promised is held against the host's free space, and a failed stack
// keeps its boxes, so a test that fails several would run out of room with default 10 GiB disks (docs/api.md,
// "Disk space").
const json kSmallDisk = {{"disk", "256m"}, {"inodes", 16384}};

// A web service answering GET / with $MARK, its readiness by HTTP.
json web_service(const std::string& mark = "stack") {
  return {{"image", "host"},
          {"limits", kSmallDisk},
          {"env", {{"MARK", mark}}},
          {"command", {kPython, "-c",
                       "import http.server, os\n"
                       "class H(http.server.BaseHTTPRequestHandler):\n"
                       "    def do_GET(self):\n"
                       "        body = os.environ['MARK'].encode()\n"
                       "        self.send_response(200); self.end_headers(); self.wfile.write(body)\n"
                       "print('listening', flush=True)\n"
                       "http.server.HTTPServer(('0.0.0.0', " + std::to_string(kWebPort) + "), H).serve_forever()\n"}},
          {"ready", {{"http", {{"port", kWebPort}, {"path", "/"}}}, {"deadline", "30s"}}}};
}

// A driver with the tests in its workspace; it reaches the web service by its name.
json driver_service(const fs::path& tests) {
  return {{"image", "host"}, {"limits", kSmallDisk}, {"workspace", {{"path", tests.string()}, {"mode", "ro"}}},
          {"depends_on", {{"web", "ready"}}}};
}

json test_stage() {
  return {{"name", "test"}, {"service", "driver"},
          {"argv", {kPython, "-m", "pytest", "-q", "-p", "no:cacheprovider", "--junitxml=/tmp/report.xml", "/workspace"}},
          {"junit", {"/tmp/report.xml"}}};
}

const char* kTests =
    "import os, urllib.request\n"
    "def get(path='/'):\n"
    "    return urllib.request.urlopen('http://web:18080' + path, timeout=5).read().decode()\n"
    "def test_reaches_web_by_name():\n"
    "    assert get() == os.environ.get('EXPECT', 'stack')\n"
    "def test_hosts_file_names_every_service():\n"
    "    names = open('/etc/hosts').read().split()\n"
    "    assert 'web' in names and 'driver' in names\n"
    "def test_hostname_is_the_service_name():\n"
    "    assert open('/proc/sys/kernel/hostname').read().strip() == 'driver'\n";

class CapsuledStacks : public Capsuled {
 protected:
  json create(const json& spec, bool wait = true) const {
    const HttpResponse response = call("POST", wait ? "/v1/stacks?wait=true" : "/v1/stacks", spec);
    EXPECT_EQ(response.status, 201) << response.body;
    return body_json(response);
  }
  json get_stack(const std::string& id) const { return body_json(call("GET", "/v1/stacks/" + id)); }
  json remove(const std::string& id) const {
    const HttpResponse response = call("DELETE", "/v1/stacks/" + id);
    EXPECT_EQ(response.status, 200) << response.body;
    return body_json(response);
  }
  fs::path tests_dir(const std::string& name = "tests") const {
    const fs::path dir = make_dir(name);
    write_file(dir / "test_stack.py", kTests);
    return dir;
  }
  std::vector<std::string> netns_files() const { return subdirectories_or_files(dir_ / "state" / "netns"); }
  static std::vector<std::string> subdirectories_or_files(const fs::path& dir) {
    std::vector<std::string> names;
    std::error_code error;
    for (const auto& entry : fs::directory_iterator(dir, error)) names.push_back(entry.path().filename().string());
    return names;
  }
  // The failure of a stack that should fail at `stage` for `reason` (the message is shown on a mismatch).
  void expect_failure(const json& stack, const std::string& stage, const std::string& reason,
                      const std::string& service) const {
    EXPECT_EQ(stack["state"], "failed") << stack.dump(1);
    ASSERT_TRUE(stack["failure"].is_object()) << stack.dump(1);
    EXPECT_EQ(stack["failure"]["stage"], stage) << stack["failure"].dump();
    EXPECT_EQ(stack["failure"]["reason"], reason) << stack["failure"].dump();
    EXPECT_EQ(stack["failure"]["service"], service) << stack["failure"].dump();
  }
};

TEST_F(CapsuledStacks, ServicesMeetByNameOnTheirOwnNetworkAndTheTestStageIsCounted) {
  start();
  const json spec = {{"services", {{"web", web_service()}, {"driver", driver_service(tests_dir())}}},
                     {"stages", {{{"name", "deploy"}, {"deadline", "60s"}}, test_stage()}}};
  const json stack = create(spec);
  ASSERT_EQ(stack["state"], "up") << stack.dump(1);
  EXPECT_EQ(stack["failure"], nullptr);
  EXPECT_EQ(stack["stages"][0]["state"], "passed");
  EXPECT_EQ(stack["stages"][1]["state"], "passed");
  EXPECT_EQ(stack["stages"][1]["exit_code"], 0);
  EXPECT_EQ(stack["stages"][1]["tests"]["total"], 3) << stack["stages"][1].dump(1);
  EXPECT_EQ(stack["stages"][1]["tests"]["failed"], 0);
  EXPECT_EQ(stack["services"]["web"]["state"], "ready");
  EXPECT_TRUE(stack["services"]["web"]["ready_ms"].is_number());
  EXPECT_EQ(stack["services"]["driver"]["state"], "ready");
  EXPECT_EQ(stack["network"]["hosts"], json({"driver", "web"}));
  EXPECT_EQ(netns_files().size(), 1u);

  // Nothing listens on the host; the web service's log is the run of its command.
  EXPECT_FALSE(host_loopback_accepts(kWebPort));
  const std::string command = stack["services"]["web"]["exec_id"];
  const HttpResponse log = call("GET", "/v1/runs/" + command + "/logs?stream=stdout");
  EXPECT_EQ(log.status, 200);
  EXPECT_NE(log.body.find("listening"), std::string::npos) << log.body;
  // The services are sessions of the caller: exec reaches them.
  const std::string web_session = stack["services"]["web"]["session"];
  const HttpResponse exec = call("POST", "/v1/sessions/" + web_session + "/exec", {{"argv", {"hostname"}}});
  EXPECT_EQ(body_json(exec)["result"]["stdout"]["head"], "web\n");

  // Usage is read from the box after each exec ends (the session tidies after answering): soon, not at once.
  EXPECT_TRUE(eventually([&] {
    return get_stack(stack["id"])["services"]["web"]["usage"]["peak_memory_bytes"].get<std::int64_t>() > 0;
  })) << get_stack(stack["id"])["services"].dump();
  EXPECT_GT(get_stack(stack["id"])["services"]["driver"]["usage"]["cpu_ms"].get<std::int64_t>(), 0);
  const json deleted = remove(stack["id"]);
  EXPECT_EQ(deleted["state"], "deleted");
  EXPECT_GT(deleted["services"]["web"]["usage"]["peak_memory_bytes"].get<std::int64_t>(), 0) << "usage kept at the end";
  EXPECT_EQ(deleted["services"]["web"]["state"], "stopped");
  EXPECT_EQ(get_stack(stack["id"])["state"], "deleted");
  EXPECT_EQ(body_json(call("GET", "/v1/sessions/" + web_session))["state"], "deleted");
  EXPECT_TRUE(netns_files().empty());
  expect_error(call("DELETE", "/v1/stacks/" + stack["id"].get<std::string>()), 409, "stack_ended", "has ended");
}

TEST_F(CapsuledStacks, ThreeCopiesHoldTheSamePortsAtOnceAndNoneReachesAnother) {
  start();
  const fs::path tests = tests_dir();
  std::vector<std::string> ids;
  for (int i = 0; i < 3; ++i) {
    json driver = driver_service(tests);
    driver["env"] = {{"EXPECT", "copy-" + std::to_string(i)}};
    const json spec = {{"services", {{"web", web_service("copy-" + std::to_string(i))}, {"driver", driver}}},
                       {"stages", {{{"name", "deploy"}}, test_stage()}}};
    ids.push_back(create(spec, false)["id"]);
  }
  for (const std::string& id : ids) {
    ASSERT_TRUE(eventually([&] { return get_stack(id)["state"] != "starting"; }, 120s));
    const json stack = get_stack(id);
    EXPECT_EQ(stack["state"], "up") << stack.dump(1);
    EXPECT_EQ(stack["stages"][1]["tests"]["total"], 3);
    EXPECT_EQ(stack["stages"][1]["tests"]["failed"], 0) << "a driver reached another copy's web service";
  }
  EXPECT_EQ(netns_files().size(), 3u);
  EXPECT_FALSE(host_loopback_accepts(kWebPort));
  const json listed = body_json(call("GET", "/v1/stacks"));
  EXPECT_EQ(listed["stacks"].size(), 3u);
  for (const std::string& id : ids) EXPECT_EQ(remove(id)["state"], "deleted");
  EXPECT_TRUE(netns_files().empty());
}

TEST_F(CapsuledStacks, EachBrokenStackFailsAtItsStageWithItsReason) {
  start();
  const fs::path tests = tests_dir();
  auto with_web = [&](const json& web, const json& stages) {
    return json{{"services", {{"web", web}, {"driver", driver_service(tests)}}}, {"stages", stages}};
  };
  const json build = {{"name", "build"}, {"service", "web"}, {"argv", {"sh", "-c", "echo compile error >&2; exit 2"}}};
  const json deploy = {{"name", "deploy"}};

  // A build that fails: the stack stops there, deploy and test are skipped.
  json failed_build = create(with_web(web_service(), {build, deploy, test_stage()}));
  expect_failure(failed_build, "build", "build_failed", "web");
  EXPECT_EQ(failed_build["stages"][0]["exit_code"], 2);
  EXPECT_EQ(failed_build["stages"][1]["state"], "skipped");
  EXPECT_EQ(failed_build["stages"][2]["state"], "skipped");
  EXPECT_EQ(failed_build["services"]["web"]["exec_id"], "") << "the command started after a failed build";

  // A command that crashes on start.
  json crash = web_service();
  crash["command"] = {"sh", "-c", "echo boom >&2; exit 3"};
  json crashed = create(with_web(crash, {deploy, test_stage()}));
  expect_failure(crashed, "deploy", "container_exit", "web");
  EXPECT_EQ(crashed["services"]["web"]["exit_code"], 3);
  EXPECT_NE(crashed["failure"]["message"].get<std::string>().find("before it was ready"), std::string::npos);

  // Listening on another port than the probe's.
  json wrong_port = web_service();
  wrong_port["ready"] = {{"http", {{"port", kWebPort + 1}}}, {"deadline", "2s"}};
  expect_failure(create(with_web(wrong_port, {deploy, test_stage()})), "deploy", "connection_refused", "web");

  // Never ready: the log line it waits for never comes. Its output is what makes a backtracking matcher take
  // exponential time on this pattern (4000 a's then a b); the stack must still end at its deadline.
  json silent = web_service();
  silent["command"] = {"sh", "-c", "for i in 1 2 3 4 5; do printf '%04000d' 0 | tr 0 a; echo b; done; sleep 60"};
  silent["ready"] = {{"log", {{"success", "^(a+)+$"}}}, {"deadline", "1500ms"}};
  const json never = create(with_web(silent, {deploy, test_stage()}));
  expect_failure(never, "deploy", "deploy_timeout", "web");
  EXPECT_EQ(never["stages"][1]["state"], "skipped");

  // A failure pattern in its log.
  json broken = web_service();
  broken["command"] = {"sh", "-c", "echo 'FATAL: database files are incompatible'; sleep 60"};
  broken["ready"] = {{"log", {{"success", "ready to accept"}, {"failure", "^FATAL"}}}};
  expect_failure(create(with_web(broken, {deploy, test_stage()})), "deploy", "readiness_failed", "web");

  // Tests that fail: counted, and the reason is test_failed.
  json driver = driver_service(tests);
  driver["env"] = {{"EXPECT", "something else"}};
  const json failing = create({{"services", {{"web", web_service()}, {"driver", driver}}}, {"stages", {deploy, test_stage()}}});
  expect_failure(failing, "test", "test_failed", "driver");
  EXPECT_EQ(failing["stages"][1]["tests"]["total"], 3);
  EXPECT_EQ(failing["stages"][1]["tests"]["failed"], 1);

  const json listed = body_json(call("GET", "/v1/stacks"));
  EXPECT_EQ(listed["stacks"].size(), 6u);
  for (const json& stack : listed["stacks"]) EXPECT_EQ(remove(stack["id"])["state"], "deleted");
  EXPECT_TRUE(netns_files().empty());
}

// depends_on "completed" (compose's service_completed_successfully): a one-shot service such as a schema migration
// must end with 0 before its dependents start, and within its ready deadline.
TEST_F(CapsuledStacks, AOneShotServiceMustCompleteBeforeItsDependentsStart) {
  start();
  const fs::path tests = tests_dir();
  auto with_migrate = [&](const json& command, const std::string& deadline) {
    json web = web_service();
    web["depends_on"] = {{"migrate", "completed"}};
    const json migrate = {{"image", "host"},
                          {"limits", kSmallDisk},
                          {"command", command},
                          {"ready", {{"exec", {"true"}}, {"deadline", deadline}}}};
    return json{{"services", {{"migrate", migrate}, {"web", web}, {"driver", driver_service(tests)}}},
                {"stages", {{{"name", "deploy"}}, test_stage()}}};
  };

  const json done = create(with_migrate({"sh", "-c", "sleep 1; echo migrated"}, "30s"));
  EXPECT_EQ(done["state"], "up") << done.dump(1);
  EXPECT_EQ(done["services"]["migrate"]["state"], "exited");
  EXPECT_EQ(done["services"]["migrate"]["exit_code"], 0);
  EXPECT_EQ(done["services"]["web"]["state"], "ready");
  EXPECT_EQ(done["stages"][1]["tests"]["total"], 3);
  EXPECT_EQ(done["stages"][1]["tests"]["failed"], 0);

  const json failed = create(with_migrate({"sh", "-c", "echo no such table >&2; exit 1"}, "30s"));
  expect_failure(failed, "deploy", "container_exit", "migrate");
  EXPECT_EQ(failed["services"]["web"]["exec_id"], "") << "web started although migrate failed";

  const json hung = create(with_migrate({"sleep", "600"}, "1500ms"));
  expect_failure(hung, "deploy", "deploy_timeout", "migrate");
  EXPECT_NE(hung["failure"]["message"].get<std::string>().find("did not complete within 1500 ms"), std::string::npos)
      << hung["failure"].dump();
  EXPECT_EQ(hung["services"]["web"]["exec_id"], "") << "web started although migrate never ended";

  const json listed = body_json(call("GET", "/v1/stacks"));
  EXPECT_EQ(listed["stacks"].size(), 3u);
  for (const json& stack : listed["stacks"]) EXPECT_EQ(remove(stack["id"])["state"], "deleted");
  EXPECT_TRUE(netns_files().empty());
}

// A hostile caller: bad specs get a 400 naming the field; another user neither sees, lists nor deletes root's stack,
// and the daemon goes on answering.
TEST_F(CapsuledStacks, BadSpecsAreRefusedAndOtherUsersCannotSeeOrEndAStack) {
  const std::string group = "capsule-st-" + std::to_string(getpid());
  create_group(group);
  const TestUser user = create_user("capsule-st-u-" + std::to_string(getpid()), group, {});
  const fs::path config = dir_ / "capsuled.json";
  write_file(config, json{{"socket_group", group}}.dump());
  start({"--config", config.string()});
  expect_error(call("POST", "/v1/stacks", {{"services", {{"web", {{"image", "host"}, {"ready", {{"tcp", 0}}}}}}}}),
               400, "invalid_spec", "services.web.ready.tcp: must be a TCP port");
  expect_error(call("POST", "/v1/stacks", {{"services", {{"a", {{"image", "host"}, {"depends_on", {{"b", "started"}}}}},
                                                          {"b", {{"image", "host"}, {"depends_on", {{"a", "started"}}}}}}}}),
               400, "invalid_spec", "depends_on has a cycle");
  expect_error(call("GET", "/v1/stacks/nope"), 404, "not_found", "no stack with id nope");

  const json stack = create({{"services", {{"web", web_service()}}}});
  ASSERT_EQ(stack["state"], "up") << stack.dump(1);
  const std::string id = stack["id"];
  const UserCall seen = call_as(user, socket_, "GET", "/v1/stacks/" + id);
  EXPECT_EQ(seen.status, 404) << seen.body << seen.failure;
  const UserCall deleted = call_as(user, socket_, "DELETE", "/v1/stacks/" + id);
  EXPECT_EQ(deleted.status, 404) << deleted.body;
  json privileged = {{"services", {{"web", web_service()}}}};
  privileged["services"]["web"]["publish"] = {{{"port", kWebPort}, {"host_port", 80}}};
  const UserCall low_port = call_as(user, socket_, "POST", "/v1/stacks", privileged);
  EXPECT_EQ(low_port.status, 403) << low_port.body;
  EXPECT_NE(low_port.body.find("privileged"), std::string::npos) << low_port.body;
  const UserCall listed = call_as(user, socket_, "GET", "/v1/stacks");
  EXPECT_EQ(listed.status, 200) << listed.body;
  EXPECT_TRUE(listed.json()["stacks"].empty()) << listed.body;
  // Its services' sessions are root's too.
  const UserCall exec = call_as(user, socket_, "POST", "/v1/sessions/" + stack["services"]["web"]["session"].get<std::string>() + "/exec",
                                {{"argv", {"true"}}});
  EXPECT_EQ(exec.status, 404) << exec.body;
  EXPECT_EQ(get_stack(id)["state"], "up");
  EXPECT_EQ(remove(id)["state"], "deleted");
  remove_user(user.name);
  remove_group(group);
}

// A service cannot reach what listens on the host's loopback, and the stack ends by itself when its ttl passes.
TEST_F(CapsuledStacks, NothingOnTheHostIsReachableAndTheTtlEndsTheStack) {
  start();
  base::UniqueFd listener(socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0));
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ASSERT_EQ(bind(listener.get(), reinterpret_cast<const sockaddr*>(&address), sizeof address), 0);
  ASSERT_EQ(listen(listener.get(), 4), 0);
  socklen_t length = sizeof address;
  getsockname(listener.get(), reinterpret_cast<sockaddr*>(&address), &length);
  const std::string port = std::to_string(ntohs(address.sin_port));
  const json probe_host = {{"name", "escape"}, {"service", "web"},
                           {"argv", {kPython, "-c", "import socket\n"
                                                    "try:\n"
                                                    "    socket.create_connection(('127.0.0.1', " + port + "), timeout=2)\n"
                                                    "except ConnectionRefusedError:\n"
                                                    "    print('refused')\n"
                                                    "else:\n"
                                                    "    print('reached the host')\n"}}};
  const json stack = create({{"services", {{"web", web_service()}}}, {"stages", {{{"name", "deploy"}}, probe_host}}, {"ttl", "3s"}});
  ASSERT_EQ(stack["state"], "up") << stack.dump(1);
  const json escape = get_run(stack["stages"][1]["exec_id"]);
  EXPECT_EQ(escape["result"]["stdout"]["head"], "refused\n");
  ASSERT_TRUE(eventually([&] { return get_stack(stack["id"])["state"] == "expired"; }, 30s));
  const json expired = get_stack(stack["id"]);
  EXPECT_EQ(expired["ended_reason"], "its ttl passed");
  EXPECT_EQ(body_json(call("GET", "/v1/sessions/" + expired["services"]["web"]["session"].get<std::string>()))["state"], "deleted");
  EXPECT_TRUE(netns_files().empty());
}

// The CLI on a compose.yaml: up (healthcheck as the readiness probe, depends_on with a condition), ps, logs of a
// service, exec in a service, down; and a failing stack's exit status.
TEST_F(CapsuledStacks, TheCliBringsUpAComposeFileAndTearsItDown) {
  start();
  const fs::path compose = dir_ / "compose.yaml";
  write_file(compose,
             "services:\n"
             "  web:\n"
             "    image: host\n"
             "    command: [\"/usr/bin/python3\", \"-m\", \"http.server\", \"8000\", \"--bind\", \"0.0.0.0\"]\n"
             "    working_dir: /tmp\n"
             "    healthcheck:\n"
             "      test: [\"CMD\", \"/usr/bin/python3\", \"-c\", \"import urllib.request; urllib.request.urlopen('http://127.0.0.1:8000/')\"]\n"
             "      interval: 200ms\n"
             "      retries: 100\n"
             "  client:\n"
             "    image: host\n"
             "    environment:\n"
             "      TARGET: http://web:8000/\n"
             "    depends_on:\n"
             "      web:\n"
             "        condition: service_healthy\n");
  auto capsule = [&](std::vector<std::string> args) {
    args.insert(args.begin(), {"--socket", socket_});
    return run_capsule_cli(dir_, args);
  };
  const Cli up = capsule({"stack", "up", "--json", compose.string()});
  ASSERT_EQ(up.code, 0) << up.out << up.err;
  const json stack = json::parse(up.out);
  const std::string id = stack["id"];
  EXPECT_EQ(stack["state"], "up");
  const Cli ps = capsule({"stack", "ps", id});
  EXPECT_EQ(ps.code, 0) << ps.err;
  EXPECT_NE(ps.out.find("web"), std::string::npos) << ps.out;
  EXPECT_NE(ps.out.find("ready"), std::string::npos) << ps.out;
  const Cli exec = capsule({"stack", "exec", id, "client", "--", "/usr/bin/python3", "-c",
                            "import os, urllib.request; print(urllib.request.urlopen(os.environ['TARGET']).status)"});
  EXPECT_EQ(exec.code, 0) << exec.err;
  EXPECT_EQ(exec.out, "200\n");
  const Cli logs = capsule({"stack", "logs", id, "web", "--stderr"});
  EXPECT_EQ(logs.code, 0) << logs.err;
  EXPECT_NE(logs.out.find("GET / HTTP/1.1"), std::string::npos) << logs.out;
  const Cli unknown = capsule({"stack", "logs", id, "cache"});
  EXPECT_EQ(unknown.code, 2);
  EXPECT_NE(unknown.err.find("web"), std::string::npos) << unknown.err;
  const Cli down = capsule({"stack", "down", id});
  EXPECT_EQ(down.code, 0) << down.err;
  EXPECT_EQ(get_stack(id)["state"], "deleted");

  // A probe that can only pass once something listens: `false` ends first, whatever the machine's speed (without
  // a probe a service is ready once started, and its end could come after deploy).
  write_file(dir_ / "broken.json",
             json{{"services", {{"web", {{"image", "host"}, {"command", {"false"}}, {"ready", {{"tcp", 9}}}}}}}}.dump());
  const Cli failed = capsule({"stack", "up", (dir_ / "broken.json").string()});
  EXPECT_EQ(failed.code, 1) << failed.out << failed.err;
  EXPECT_NE((failed.out + failed.err).find("container_exit"), std::string::npos) << failed.out << failed.err;
  const Cli refused = capsule({"stack", "up", (dir_ / "compose.yaml").string() + ".missing"});
  EXPECT_NE(refused.code, 0);
  const json listed = body_json(call("GET", "/v1/stacks"));
  for (const json& left : listed["stacks"]) {
    if (left["state"] != "deleted") remove(left["id"]);
  }
  EXPECT_TRUE(netns_files().empty());
}

// `publish`: the one way in from the host, on its loopback only; two copies get their own host ports, a taken
// host port fails the stack's setup, and DELETE closes it.
TEST_F(CapsuledStacks, APublishedPortIsTheOnlyWayInFromTheHost) {
  start();
  auto published_web = [](const std::string& mark, const json& publish) {
    json web = web_service(mark);
    web["publish"] = publish;
    return json{{"services", {{"web", web}}}};
  };
  // GET / through the published port; the body, or what went wrong.
  auto fetch = [](const std::string& host) -> std::string {
    base::UniqueFd sock(socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0));
    sockaddr_in address{};
    address.sin_family = AF_INET;
    address.sin_port = htons(static_cast<std::uint16_t>(std::stoi(host.substr(host.rfind(':') + 1))));
    address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (connect(sock.get(), reinterpret_cast<const sockaddr*>(&address), sizeof address) != 0) return "connect failed";
    const std::string request = "GET / HTTP/1.0\r\n\r\n";
    if (send(sock.get(), request.data(), request.size(), MSG_NOSIGNAL) < 0) return "send failed";
    std::string answer;
    char buffer[4096];
    for (ssize_t got; (got = recv(sock.get(), buffer, sizeof buffer, 0)) > 0;) answer.append(buffer, static_cast<std::size_t>(got));
    const std::size_t body = answer.find("\r\n\r\n");
    return body == std::string::npos ? "no answer: " + answer : answer.substr(body + 4);
  };
  const json one = create(published_web("one", {kWebPort}));
  const json two = create(published_web("two", {{{"port", kWebPort}}}));
  ASSERT_EQ(one["state"], "up") << one.dump(1);
  ASSERT_EQ(two["state"], "up") << two.dump(1);
  const std::string host_one = one["services"]["web"]["published"][0]["host"];
  const std::string host_two = two["services"]["web"]["published"][0]["host"];
  EXPECT_NE(host_one, host_two);
  EXPECT_TRUE(host_one.starts_with("127.0.0.1:")) << host_one;
  EXPECT_EQ(fetch(host_one), "one");
  EXPECT_EQ(fetch(host_two), "two");
  EXPECT_FALSE(host_loopback_accepts(kWebPort)) << "only the published host port listens";

  const int taken = std::stoi(host_one.substr(host_one.rfind(':') + 1));
  const json clash = create(published_web("three", {{{"port", kWebPort}, {"host_port", taken}}}));
  EXPECT_EQ(clash["state"], "failed");
  EXPECT_EQ(clash["failure"]["reason"], "setup_failed") << clash["failure"].dump();
  EXPECT_NE(clash["failure"]["message"].get<std::string>().find("publishing port"), std::string::npos);

  for (const json& stack : {one, two, clash}) remove(stack["id"]);
  EXPECT_FALSE(host_loopback_accepts(taken)) << "the published port outlived its stack";
  EXPECT_EQ(get_stack(one["id"])["services"]["web"]["published"], json::array());
  EXPECT_TRUE(netns_files().empty());
}

// Compose's healthcheck as ScarfBench writes it, on a service slow to be ready (a database replaying its log):
// ready only after 6 s, each probe taking 1 s (twice the 5 x interval the probes used to be killed at), failures
// within the start period not counted. A probe that hangs is killed at its own timeout and counts as failed;
// `retries` of them in a row fail the service. Probe runs stay out of the runs list unless asked for.
TEST_F(CapsuledStacks, ASlowServicePassesItsHealthcheckAndAHungProbeIsKilledAtItsTimeout) {
  start();
  const json slow = {{"image", "host"},
                     {"limits", kSmallDisk},
                     {"command", {"sh", "-c", "sleep 6; touch /tmp/ready; exec sleep 600"}},
                     {"ready", {{"exec", {"sh", "-c", "sleep 1; test -f /tmp/ready"}}, {"interval", "100ms"},
                                {"timeout", "20s"}, {"retries", 2}, {"start_period", "40s"}, {"deadline", "120s"}}}};
  const json up = create({{"services", {{"db", slow}}}});
  ASSERT_EQ(up["state"], "up") << up.dump(1);
  EXPECT_EQ(up["services"]["db"]["state"], "ready");
  EXPECT_GE(up["services"]["db"]["ready_ms"].get<std::int64_t>(), 6000) << "ready before its command made it so";
  EXPECT_EQ(up["services"]["db"]["probe"], "probe succeeded (exit 0)");

  json hung = slow;
  hung["command"] = {"sleep", "600"};
  hung["ready"] = {{"exec", {"sleep", "600"}}, {"interval", "100ms"}, {"timeout", "1s"}, {"retries", 2},
                   {"deadline", "120s"}};
  const json failed = create({{"services", {{"hung", hung}}}});
  expect_failure(failed, "deploy", "readiness_failed", "hung");
  const std::string message = failed["failure"]["message"];
  EXPECT_NE(message.find("unhealthy: 2 probes in a row failed"), std::string::npos) << message;
  EXPECT_NE(message.find("ran past its timeout of 1000 ms and was killed"), std::string::npos) << message;
  EXPECT_GT(failed["stages"][0]["wall_ms"].get<std::int64_t>(), 0) << "a failed deploy has its wall time";

  // The probes are runs (labelled capsule/probe), each hung one ended by its timeout; the list leaves them out.
  const json probes = body_json(call("GET", "/v1/runs?label=capsule/probe=hung&limit=500"))["runs"];
  ASSERT_EQ(probes.size(), 2u) << probes.dump(1);
  for (const json& run : probes) EXPECT_EQ(run["state"], "timed_out") << run.dump(1);
  auto labelled_probe = [](const json& runs) {
    return std::count_if(runs.begin(), runs.end(), [](const json& run) { return run["labels"].contains("capsule/probe"); });
  };
  const json listed = body_json(call("GET", "/v1/runs?limit=500"))["runs"];
  EXPECT_EQ(labelled_probe(listed), 0) << listed.dump(1);
  EXPECT_GE(listed.size(), 2u) << "the services' commands are listed";
  const json everything = body_json(call("GET", "/v1/runs?limit=500&include=probes"))["runs"];
  EXPECT_GT(labelled_probe(everything), 2) << "the slow service's probes and the hung ones";
  expect_error(call("GET", "/v1/runs?include=everything"), 400, "invalid_query", "include");
  const Cli ls = run_capsule_cli(dir_, {"--socket", socket_, "runs", "ls", "--json", "--limit", "500"});
  ASSERT_EQ(ls.code, 0) << ls.err;
  EXPECT_EQ(labelled_probe(json::parse(ls.out)["runs"]), 0);
  const Cli all = run_capsule_cli(dir_, {"--socket", socket_, "runs", "ls", "--all", "--json", "--limit", "500"});
  ASSERT_EQ(all.code, 0) << all.err;
  EXPECT_EQ(labelled_probe(json::parse(all.out)["runs"]), labelled_probe(everything));
  // Hidden from the list only: a probe run is still there to read, as any run.
  EXPECT_EQ(get_run(probes[0]["id"])["state"], "timed_out");
  for (const json& stack : {up, failed}) remove(stack["id"]);
  EXPECT_TRUE(netns_files().empty());
}

// A command that names an artifact the box lacks (the jar a build should have made, its program by path) fails
// as missing_artifact; `stack logs` shows the command's stderr as well as its stdout.
TEST_F(CapsuledStacks, AMissingArtifactIsNamedAndStackLogsShowStderr) {
  start();
  const fs::path app = make_dir("app");
  auto service = [&](const json& command) {
    return json{{"image", "host"}, {"limits", kSmallDisk}, {"workspace", {{"path", app.string()}}},
                {"cwd", "/workspace"}, {"command", command}, {"ready", {{"tcp", kWebPort}, {"deadline", "30s"}}}};
  };
  const json no_jar = create({{"services", {{"app", service({"sh", "-c", "exec java -jar target/app.jar"})}}}});
  expect_failure(no_jar, "deploy", "missing_artifact", "app");
  EXPECT_NE(no_jar["failure"]["message"].get<std::string>().find("target/app.jar, which is not in its box"),
            std::string::npos) << no_jar["failure"].dump();
  EXPECT_GT(no_jar["stages"][0]["wall_ms"].get<std::int64_t>(), 0);
  const json no_program = create({{"services", {{"app", service({"/workspace/bin/server", "--port", "18080"})}}}});
  expect_failure(no_program, "deploy", "missing_artifact", "app");
  EXPECT_NE(no_program["failure"]["message"].get<std::string>().find("/workspace/bin/server"), std::string::npos)
      << no_program["failure"].dump();
  // The jar there, the command failing for another reason: not an artifact's fault.
  fs::create_directories(app / "target");
  write_file(app / "target/app.jar", "not really a jar");
  const json present = create({{"services", {{"app", service({"sh", "-c", "test -f target/app.jar && exit 4"})}}}});
  expect_failure(present, "deploy", "container_exit", "app");

  json talker = service({"sh", "-c", "echo to-stderr >&2; echo to-stdout; exec sleep 600"});
  talker["ready"] = {{"log", {{"success", "to-stdout"}}}};
  const json talking = create({{"services", {{"db", talker}}}});
  ASSERT_EQ(talking["state"], "up") << talking.dump(1);
  const std::string id = talking["id"];
  Cli logs;
  EXPECT_TRUE(eventually([&] {
    logs = run_capsule_cli(dir_, {"--socket", socket_, "stack", "logs", id, "db"});
    return logs.code == 0 && logs.err.find("to-stderr") != std::string::npos;
  })) << logs.out << logs.err;
  EXPECT_EQ(logs.out, "to-stdout\n");
  EXPECT_EQ(logs.err, "to-stderr\n");
  const Cli only_stderr = run_capsule_cli(dir_, {"--socket", socket_, "stack", "logs", id, "db", "--stderr"});
  EXPECT_EQ(only_stderr.out, "to-stderr\n") << only_stderr.err;
  const Cli only_stdout = run_capsule_cli(dir_, {"--socket", socket_, "stack", "logs", id, "db", "--stdout"});
  EXPECT_EQ(only_stdout.out, "to-stdout\n") << only_stdout.err;
  EXPECT_EQ(only_stdout.err, "");
  for (const json& stack : {no_jar, no_program, present, talking}) remove(stack["id"]);
  EXPECT_TRUE(netns_files().empty());
}

TEST_F(CapsuledStacks, ARestartMarksLiveStacksLostAndRemovesTheirNetworks) {
  start();
  const json stack = create({{"services", {{"web", web_service()}}}});
  ASSERT_EQ(stack["state"], "up") << stack.dump(1);
  ASSERT_EQ(netns_files().size(), 1u);
  kill9();
  restart();
  const json lost = get_stack(stack["id"]);
  EXPECT_EQ(lost["state"], "lost");
  EXPECT_EQ(lost["services"]["web"]["state"], "stopped");
  EXPECT_TRUE(netns_files().empty());
  EXPECT_TRUE(mounts_below(dir_ / "state" / "netns").empty()) << "a stack's namespace file is still mounted";
}

}  // namespace
}  // namespace capsule::testing
