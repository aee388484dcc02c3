// Tests of `capsule stack`: each compose.yaml mapping onto the POST /v1/stacks body and each refusal (by key path),
// malformed and oversized YAML and alias bombs, the JSON-or-compose choice, and the summary, tables and exit codes.
#include <gtest/gtest.h>

#include <algorithm>
#include <functional>
#include <string>

#include "client/cli_stack.h"
#include "client/stack_compose.h"
#include "tests/support/scripted_server.h"

namespace capsule::client {
namespace {

using nlohmann::json;

// What `call` throws as std::invalid_argument ("" when it does not throw).
std::string refusal_of(const std::function<void()>& call) {
  try {
    call();
  } catch (const std::invalid_argument& e) {
    return e.what();
  }
  return "";
}

std::string compose_error(const std::string& yaml) {
  return refusal_of([&] { compose_to_stack_body(yaml); });
}

bool has(const std::string& text, const std::string& part) { return text.find(part) != std::string::npos; }

json service_of_compose(const std::string& service_yaml) {
  return compose_to_stack_body("services:\n  app:\n" + service_yaml)["services"]["app"];
}

TEST(StackCompose, MapsImageCommandEnvironmentWorkingDirAndUser) {
  const json body = compose_to_stack_body(R"(
name: demo
services:
  db:
    image: capsule/stack-demo:bookworm
    user: 990:990
    command: ["/usr/local/bin/stack-demo-db", --port, 5432]
    environment:
      PGDATA: /tmp/pg
      DEBUG: true
      LEVEL: 010
    working_dir: /srv
)");
  EXPECT_EQ(body, json::parse(R"({"services": {"db": {
      "image": "capsule/stack-demo:bookworm", "user": "990:990",
      "command": ["/usr/local/bin/stack-demo-db", "--port", "5432"],
      "env": {"PGDATA": "/tmp/pg", "DEBUG": "true", "LEVEL": "010"}, "cwd": "/srv"}}})"));
}

TEST(StackCompose, StringCommandRunsUnderTheShell) {
  EXPECT_EQ(service_of_compose("    command: java -cp out App > /tmp/log\n")["command"],
            json::parse(R"(["/bin/sh", "-c", "java -cp out App > /tmp/log"])"));
  EXPECT_TRUE(has(compose_error("services:\n  app:\n    command: []\n"), "services.app.command: must not be empty"));
}

TEST(StackCompose, EnvironmentListOfKeyValue) {
  EXPECT_EQ(service_of_compose("    environment: [A=1, B=x=y, C=]\n")["env"],
            json::parse(R"({"A": "1", "B": "x=y", "C": ""})"));
  EXPECT_TRUE(has(compose_error("services:\n  app:\n    environment: [HOME]\n"),
                  "compose: services.app.environment[0] 'HOME': expected KEY=VALUE"));
  EXPECT_TRUE(has(compose_error("services:\n  app:\n    environment:\n      HOME:\n"),
                  "services.app.environment.HOME: has no value"));
}

TEST(StackCompose, DollarsAreLiteralAndVariablesAreRefused) {
  EXPECT_EQ(service_of_compose("    command: echo $$HOME\n")["command"][2], "echo $HOME");
  EXPECT_TRUE(has(compose_error("services:\n  app:\n    image: ${IMAGE}\n"),
                  "services.app.image: variables ($NAME, ${NAME}) are not interpolated"));
}

TEST(StackCompose, DependsOnListAndConditions) {
  EXPECT_EQ(service_of_compose("    depends_on: [db, cache]\n")["depends_on"],
            json::parse(R"({"db": "started", "cache": "started"})"));
  const json map = service_of_compose(R"(    depends_on:
      a: {condition: service_started}
      b: {condition: service_healthy}
      c: {condition: service_completed_successfully}
      d: {}
)")["depends_on"];
  EXPECT_EQ(map, json::parse(R"({"a": "started", "b": "ready", "c": "completed", "d": "started"})"));
  EXPECT_TRUE(has(compose_error("services:\n  app:\n    depends_on: {db: {condition: service_up}}\n"),
                  "services.app.depends_on.db.condition: must be service_started, service_healthy or"));
  EXPECT_TRUE(has(compose_error("services:\n  app:\n    depends_on: {db: {restart: true}}\n"),
                  "services.app.depends_on.db.restart: not supported"));
}

TEST(StackCompose, HealthcheckBecomesAnExecProbeWithComposesTimingFields) {
  const json ready = service_of_compose(R"(    healthcheck:
      test: ["CMD", "pg_isready", "-h", "127.0.0.1"]
      interval: 500ms
      timeout: 5s
      retries: 5
      start_period: 1m30s
      start_interval: 200ms
)")["ready"];
  // The deadline is the longest compose would wait: the start period, then 5 + 1 attempts with their intervals.
  EXPECT_EQ(ready, json::parse(R"({"exec": ["pg_isready", "-h", "127.0.0.1"], "interval": 500, "timeout": 5000,
                                   "retries": 5, "start_period": 90000, "start_interval": 200,
                                   "deadline": 123000})"));
}

TEST(StackCompose, HealthcheckShellFormsAndDefaults) {
  const json expected = json::parse(R"({"exec": ["/bin/sh", "-c", "curl -f localhost"], "interval": 30000,
                                        "timeout": 30000, "retries": 3, "start_period": 0, "deadline": 240000})");
  EXPECT_EQ(service_of_compose("    healthcheck: {test: [CMD-SHELL, curl -f localhost]}\n")["ready"], expected);
  EXPECT_EQ(service_of_compose("    healthcheck: {test: curl -f localhost}\n")["ready"], expected);
  EXPECT_EQ(service_of_compose("    healthcheck: {test: true, interval: 1.5s, timeout: 500ms, retries: 2}\n")
                ["ready"]["deadline"], 6000);
  EXPECT_EQ(service_of_compose("    healthcheck: {test: true, interval: 1h1m1s}\n")["ready"]["interval"], 3661000);
}

TEST(StackCompose, PortsAndExposeBecomePublish) {
  const json service = service_of_compose(R"(    image: a
    ports:
      - "8080:80"
      - 127.0.0.1:15432:5432/tcp
      - "9000"
      - {target: 7000, published: 17000, host_ip: 0.0.0.0, protocol: tcp}
    expose: ["3000", 80, "4000/tcp"]
)");
  EXPECT_EQ(service["publish"], json::parse(R"([{"port": 80, "host_port": 8080}, {"port": 5432, "host_port": 15432},
      {"port": 9000}, {"port": 7000, "host_port": 17000}, {"port": 3000}, {"port": 4000}])"))
      << "port 80, published and exposed, keeps its host port";
}

TEST(StackCompose, MemLimitLabelsAndStopGracePeriodMapToTheirFields) {
  const json service = service_of_compose(R"(    image: a
    mem_limit: 512MB
    labels: {role: db, tier: "1"}
    stop_grace_period: 1m30s
)");
  EXPECT_EQ(service["limits"], json::parse(R"({"memory": "512m"})"));
  EXPECT_EQ(service["labels"], json::parse(R"({"role": "db", "tier": "1"})"));
  EXPECT_EQ(service["stop_grace"], 90000);
  EXPECT_EQ(service_of_compose("    mem_limit: 1073741824\n")["limits"]["memory"], 1073741824);
  EXPECT_EQ(service_of_compose("    labels: [a=b, c=d]\n")["labels"], json::parse(R"({"a": "b", "c": "d"})"));
  // x-capsule's limits keep mem_limit's memory unless they set their own.
  EXPECT_EQ(service_of_compose("    mem_limit: 2g\n    x-capsule: {limits: {pids: 64}}\n")["limits"],
            json::parse(R"({"pids": 64, "memory": "2g"})"));
  EXPECT_EQ(service_of_compose("    mem_limit: 2g\n    x-capsule: {limits: {memory: 1g}}\n")["limits"]["memory"], "1g");
}

TEST(StackCompose, DisabledHealthcheckHasNoProbe) {
  EXPECT_FALSE(service_of_compose("    image: a\n    healthcheck: {disable: true}\n").contains("ready"));
  EXPECT_FALSE(service_of_compose("    image: a\n    healthcheck: {test: [NONE]}\n").contains("ready"));
}

TEST(StackCompose, ServiceXCapsuleIsMergedIntoTheService) {
  const json service = service_of_compose(R"(    image: a
    healthcheck: {test: [CMD, "true"]}
    x-capsule:
      workspace: {path: /src/app}
      limits: {memory: 1g, cpus: 2}
      layers: [jdk17]
      ready: {http: {port: 8080, path: /health}, deadline: 60s}
)");
  EXPECT_EQ(service, json::parse(R"({"image": "a", "workspace": {"path": "/src/app"},
      "limits": {"memory": "1g", "cpus": 2}, "layers": ["jdk17"],
      "ready": {"http": {"port": 8080, "path": "/health"}, "deadline": "60s"}})"));
}

TEST(StackCompose, TopLevelXCapsuleIsPassedThrough) {
  const json body = compose_to_stack_body(R"(
version: "3.9"
x-common: &common {image: "capsule/stack-demo:bookworm"}
services:
  app: {<<: *common, command: [java, App]}
x-capsule:
  stages:
    - {name: build, service: app, argv: [sh, -c, "javac -d out App.java"], timeout: 5m}
    - {name: deploy, deadline: 2m}
  ttl: 1h
  labels: {candidate: c-17}
  network: {egress: none}
)");
  EXPECT_EQ(body, json::parse(R"({
      "services": {"app": {"image": "capsule/stack-demo:bookworm", "command": ["java", "App"]}},
      "stages": [{"name": "build", "service": "app", "argv": ["sh", "-c", "javac -d out App.java"], "timeout": "5m"},
                 {"name": "deploy", "deadline": "2m"}],
      "ttl": "1h", "labels": {"candidate": "c-17"}, "network": {"egress": "none"}})"));
  EXPECT_TRUE(has(compose_error("services: {app: {image: a}}\nx-capsule: {services: {}}\n"),
                  "compose: x-capsule.services: not supported"));
}

TEST(StackCompose, MergeKeysLetTheServiceWin) {
  const json services = compose_to_stack_body(R"(
x-base: &base {image: base, user: "1"}
x-more: &more {image: more, working_dir: /w}
services:
  app:
    <<: [*base, *more]
    image: mine
)")["services"];
  EXPECT_EQ(services["app"], json::parse(R"({"image": "mine", "user": "1", "cwd": "/w"})"));
}

TEST(StackCompose, EntrypointIsRefused) {
  const std::string error = compose_error("services:\n  app:\n    entrypoint: [java]\n");
  EXPECT_TRUE(has(error, "compose: services.app.entrypoint: not supported")) << error;
  EXPECT_TRUE(has(error, "put the entrypoint's words first in command")) << error;
}

TEST(StackCompose, IsolationKeysAreRefusedNamingThePrivateNetwork) {
  for (const std::string key : {"networks", "network_mode", "volumes", "build", "privileged", "cap_add",
                                "devices", "restart", "deploy"}) {
    const std::string error = compose_error("services:\n  app:\n    image: a\n    " + key + ": [x]\n");
    EXPECT_TRUE(has(error, "compose: services.app." + key + ": not supported by stacks")) << error;
    EXPECT_TRUE(has(error, "each stack has a private network of its own")) << error;
  }
  EXPECT_TRUE(has(compose_error("services: {app: {image: a}}\nvolumes: {data: {}}\n"),
                  "compose: volumes: not supported by stacks"));
}

// Documents outside the subset, and what their error says: the key path and why.
const std::pair<const char*, const char*> kRefusals[] = {
    {"name: x\n", "compose: services: is required"},
    {"services: {}\n", "compose: services: must name at least one service"},
    {"services: [app]\n", "compose: services: must be a map"},
    {"services:\n  app:\n", "compose: services.app: must be a map"},
    {"services:\n  app:\n    image: [a]\n", "compose: services.app.image: must be a single value"},
    {"services:\n  app: {image: a, image: b}\n", "compose: services.app.image: is given twice"},
    {"services:\n  app: {image: !reset a}\n", "compose: services.app.image: the YAML tag !reset is not supported"},
    {"- a\n", "compose: (top level): must be a map"},
    {"services: {app: {healthcheck: {test: [CMD]}}}", "compose: services.app.healthcheck.test: must be a string, "
                                                      "[\"CMD\", ARGS...], [\"CMD-SHELL\", COMMAND] or [\"NONE\"]"},
    {"services: {app: {healthcheck: {test: [CMD-SHELL, a, b]}}}", "compose: services.app.healthcheck.test: must be"},
    {"services: {app: {healthcheck: {test: x, interval: 30}}}",
     "compose: services.app.healthcheck.interval: must be a duration such as \"30s\""},
    {"services: {app: {healthcheck: {test: x, interval: 10us}}}",
     "compose: services.app.healthcheck.interval: must be a duration"},
    {"services: {app: {healthcheck: {test: x, timeout: s}}}",
     "compose: services.app.healthcheck.timeout: must be a duration"},
    {"services: {app: {healthcheck: {test: x, retries: 0}}}",
     "compose: services.app.healthcheck.retries: must be a whole number from 1 to 100000"},
    {"services: {app: {healthcheck: {test: x, disable: maybe}}}",
     "compose: services.app.healthcheck.disable: must be true or false"},
    {"services: {app: {healthcheck: {interval: 1s}}}", "compose: services.app.healthcheck: needs a test"},
    {"services: {app: {healthcheck: {test: x, start_timeout: 1s}}}",
     "compose: services.app.healthcheck.start_timeout: not supported by stacks"},
    {"services: {app: {ports: [\"53:53/udp\"]}}", "compose: services.app.ports[0]: only TCP ports are published"},
    {"services: {app: {ports: [\"10.0.0.1:80:80\"]}}", "compose: services.app.ports[0]: a stack publishes on the "
                                                        "host's 127.0.0.1 only, not on 10.0.0.1"},
    {"services: {app: {ports: [\"8000-8010:8000-8010\"]}}", "compose: services.app.ports[0]: port ranges are not"},
    {"services: {app: {ports: [\"http\"]}}", "compose: services.app.ports[0]: must be a TCP port (1-65535)"},
    {"services: {app: {ports: [\"80\", \"8080:80\"]}}", "compose: services.app.ports[1]: publishes port 80 twice"},
    {"services: {app: {ports: 80}}", "compose: services.app.ports: must be a list"},
    {"services: {app: {ports: [{published: 80}]}}", "compose: services.app.ports[0].target: is required"},
    {"services: {app: {expose: [\"70000\"]}}", "compose: services.app.expose[0]: must be a TCP port"},
    {"services: {app: {expose: [\"53/udp\"]}}", "compose: services.app.expose[0]: only TCP ports"},
    {"services: {app: {mem_limit: lots}}", "compose: services.app.mem_limit: must be a size such as 512m"},
    {"services: {app: {mem_limit: 5t}}", "compose: services.app.mem_limit: must be a size"},
    {"services: {app: {labels: [nolabel]}}", "compose: services.app.labels[0]"},
    {"services: {app: {stop_grace_period: soon}}", "compose: services.app.stop_grace_period: must be a duration"},
};

TEST(StackCompose, RefusalsNameTheKeyPath) {
  for (const auto& [yaml, message] : kRefusals) {
    const std::string error = compose_error(yaml);
    EXPECT_TRUE(has(error, message)) << yaml << " -> " << error;
  }
}

TEST(StackCompose, MalformedYamlIsAClearError) {
  for (const std::string yaml : {"services: [", "services:\n  app: {image: a\n", "{{{", "services:\n\t- x\n",
                                 "a: 'unterminated\n", "services:\n  app:\n    image: a\n   - b\n", "&a [*b]\n"}) {
    const std::string error = compose_error(yaml);
    EXPECT_TRUE(error.starts_with("compose: ")) << yaml << " -> " << error;
  }
  EXPECT_TRUE(has(compose_error("services: ["), "not valid YAML: line ")) << compose_error("services: [");
  EXPECT_TRUE(has(compose_error(""), "expected one YAML document, found 0"));
  EXPECT_TRUE(has(compose_error("a: 1\n---\nb: 2\n"), "expected one YAML document, found 2"));
}

TEST(StackCompose, OversizedInputIsRefused) {
  const std::string big = "services: {app: {image: a}}\n#" + std::string(kMaxStackFileBytes, 'x') + "\n";
  EXPECT_TRUE(has(compose_error(big), "more than 1048576 bytes"));
  const std::string deep = "services: {app: {image: a, x-capsule: {layers: " + std::string(100000, '[') +
                           std::string(100000, ']') + "}}}";
  const std::string error = compose_error(deep);
  EXPECT_TRUE(error.starts_with("compose: not valid YAML: line 1, column ")) << error;
  EXPECT_TRUE(error.ends_with(": nested too deeply")) << error;
}

TEST(StackCompose, AliasBombsStopAtTheNodeCap) {
  std::string yaml = "x-0: &l0 [a, a, a, a, a, a, a, a, a, a]\n";
  for (int level = 1; level < 9; ++level) {
    yaml += "x-" + std::to_string(level) + ": &l" + std::to_string(level) + " [";
    for (int i = 0; i < 10; ++i) yaml += std::string(i ? ", " : "") + "*l" + std::to_string(level - 1);
    yaml += "]\n";
  }
  EXPECT_EQ(compose_error(yaml + "services: {app: {image: a}}\n"), "");  // unused anchors are never expanded
  const std::string error = compose_error(yaml + "services: {app: {image: a, x-capsule: {layers: *l8}}}\n");
  EXPECT_TRUE(has(error, "expands to more than 100000 nodes")) << error;
  const std::string env = compose_error(yaml + "services: {app: {image: a, command: *l8}}\n");
  EXPECT_TRUE(has(env, "services.app.command")) << env;
}

TEST(StackCompose, SelfReferencesStopAtTheDepthCap) {
  for (const std::string yaml : {"services: {app: {image: a, x-capsule: {layers: &a [*a]}}}\n",
                                 "services: {app: &a {<<: *a, image: a}}\n"}) {
    const std::string error = compose_error(yaml);
    EXPECT_TRUE(error.starts_with("compose: ")) << yaml << " -> " << error;
  }
}

TEST(StackCompose, JsonOrComposeIsChosenByNameOrFirstCharacter) {
  EXPECT_EQ(stack_body_from_text("stack.json", R"({"services": {"db": {"image": "a"}}, "ttl": "1h"})"),
            json::parse(R"({"services": {"db": {"image": "a"}}, "ttl": "1h"})"));
  EXPECT_EQ(stack_body_from_text("stack", "\n  {\"services\": {}}"), json::parse(R"({"services": {}})"));
  EXPECT_EQ(stack_body_from_text("compose.yaml", "services: {db: {image: a}}"),
            json::parse(R"({"services": {"db": {"image": "a"}}})"));
  const auto error = [](const std::string& name, const std::string& text) {
    return refusal_of([&] { stack_body_from_text(name, text); });
  };
  EXPECT_TRUE(has(error("s.json", "{\"services\": "), "s.json: [json.exception.parse_error")) << error("s.json", "{");
  EXPECT_TRUE(has(error("s.json", "[1]"), "s.json: the stack must be a JSON object"));
  EXPECT_TRUE(has(error("compose.yml", "services: ["), "compose.yml: compose: not valid YAML"));
  EXPECT_TRUE(has(error("s.json", std::string(kMaxStackFileBytes + 1, ' ')), "s.json: more than 1048576 bytes"));
}

const char* const kFailedStack = R"({
  "id": "st1", "state": "failed", "created_ms": 1000,
  "failure": {"stage": "test", "reason": "test_failed", "service": "tests", "message": "2 tests failed\nsee log"},
  "stages": [
    {"name": "build", "state": "passed", "wall_ms": 3100, "exit_code": 0},
    {"name": "deploy", "state": "passed", "wall_ms": 1200},
    {"name": "test", "state": "failed", "wall_ms": 12000, "exit_code": 1,
     "tests": {"total": 12, "failed": 2, "errors": 0, "skipped": 1}}],
  "services": {
    "app": {"state": "ready", "session": "s2", "exec_id": "r2", "ready_ms": 1500},
    "db": {"state": "ready", "session": "s1", "exec_id": "r1", "ready_ms": 340},
    "tests": {"state": "started", "session": "s3"}}})";

TEST(StackView, SummaryShowsStagesServicesAndTheFailure) {
  EXPECT_EQ(format_stack_summary(json::parse(kFailedStack)),
            "stack st1 failed\n"
            "STAGE    STATE    WALL     EXIT   TESTS\n"
            "build    passed   3.10s    0      -\n"
            "deploy   passed   1.20s    -      -\n"
            "test     failed   12.00s   1      12 total, 2 failed, 0 errors, 1 skipped\n"
            "SERVICE   STATE     READY AFTER   EXIT   SESSION\n"
            "app       ready     1.50s         -      s2\n"
            "db        ready     0.34s         -      s1\n"
            "tests     started   -             -      s3\n"
            "failure: test_failed in stage test, service tests: 2 tests failed\\nsee log\n");
  const std::string services = format_stack_summary(json::parse(kFailedStack), false);
  EXPECT_FALSE(has(services, "STAGE")) << services;
  EXPECT_TRUE(services.starts_with("stack st1 failed\nSERVICE")) << services;
}

TEST(StackView, ListTableAndExitCodes) {
  const json stacks = json::array({json::parse(kFailedStack), {{"id", "st2"}, {"state", "up"}, {"created_ms", 61000}}});
  EXPECT_EQ(format_stacks_table(stacks, 121000),
            "ID    STATE    SERVICES   FAILURE       CREATED\n"
            "st1   failed   3          test_failed   2m ago\n"
            "st2   up       0          -             1m ago\n");
  EXPECT_EQ(stack_exit_code(json::parse(kFailedStack)), 1);
  EXPECT_EQ(stack_exit_code({{"state", "up"}}), 0);
  EXPECT_EQ(stack_exit_code({{"state", "starting"}}), 0);
  EXPECT_EQ(stack_exit_code({{"state", "lost"}}), 125);
  EXPECT_EQ(stack_exit_code(json::object()), 125);
}

// `capsule stack <args>` parsed as main does it, run against a daemon that answers one request with `stack`.
class StackArgs : public ::testing::Test {
 protected:
  void SetUp() override {
    add_stack_commands(app_, c_);
    app_.require_subcommand(1);
  }
  int run(std::vector<std::string> args, const std::string& status, const std::string& body) {
    capsule::testing::ScriptedServer server([&](int fd, const std::string& head) {
      received_ = head;
      capsule::testing::ScriptedServer::send(fd, "HTTP/1.1 " + status + "\r\nContent-Type: application/json\r\n"
                                                 "Content-Length: " + std::to_string(body.size()) + "\r\n\r\n" + body);
    });
    args.insert(args.begin(), "stack");
    std::reverse(args.begin(), args.end());
    app_.parse(args);
    ::testing::internal::CaptureStdout();
    ::testing::internal::CaptureStderr();
    const int status_code = cmd_stack(server.path(), c_, false, {});
    out_ = ::testing::internal::GetCapturedStdout();
    err_ = ::testing::internal::GetCapturedStderr();
    return status_code;
  }
  CLI::App app_;
  StackCommands c_;
  std::string received_, out_, err_;
};

TEST_F(StackArgs, PsOfOneStackGetsItsServices) {
  EXPECT_EQ(run({"ps", "st1"}, "200 OK", kFailedStack), 0);
  EXPECT_TRUE(received_.starts_with("GET /v1/stacks/st1 HTTP/1.1\r\n")) << received_;
  EXPECT_TRUE(out_.starts_with("stack st1 failed\nSERVICE")) << out_;
}

TEST_F(StackArgs, PsListsTheCallersStacks) {
  EXPECT_EQ(run({"ps"}, "200 OK", std::string(R"({"stacks": [)") + kFailedStack + "]}"), 0);
  EXPECT_TRUE(received_.starts_with("GET /v1/stacks HTTP/1.1\r\n")) << received_;
  EXPECT_TRUE(has(out_, "st1   failed   3          test_failed")) << out_;
}

TEST_F(StackArgs, LogsOfAnUnknownServiceListsTheServicesAndExits2) {
  EXPECT_EQ(run({"logs", "st1", "web"}, "200 OK", kFailedStack), 2);
  EXPECT_EQ(err_, "capsule: stack st1 has no service web; its services: app, db, tests\n");
}

TEST_F(StackArgs, ExecInAToolServiceWithoutASessionIsAnError) {
  EXPECT_EQ(run({"exec", "st1", "tests", "true"}, "200 OK",
                R"({"id": "st1", "services": {"tests": {"state": "pending"}}})"), 125);
  EXPECT_TRUE(has(err_, "service tests of stack st1 has no session (its box is not up; state pending)")) << err_;
}

TEST_F(StackArgs, DownDeletesAndPrintsTheFinalState) {
  EXPECT_EQ(run({"down", "st1"}, "200 OK", R"({"id": "st1", "state": "deleted"})"), 0);
  EXPECT_TRUE(received_.starts_with("DELETE /v1/stacks/st1 HTTP/1.1\r\n")) << received_;
  EXPECT_EQ(out_, "st1 deleted\n");
}

TEST_F(StackArgs, DaemonErrorsExit125) {
  EXPECT_EQ(run({"down", "nope"}, "404 Not Found", R"({"error": {"code": "not_found", "message": "no stack nope"}})"),
            125);
  EXPECT_EQ(err_, "capsule: not_found: no stack nope\n");
}

}  // namespace
}  // namespace capsule::client
