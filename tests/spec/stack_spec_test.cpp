// StackSpec: a round trip through to_json, the deploy stage added when absent, the start order, and the precise
// 400 for each bad field (cycles, unknown names, two probes, a bad pattern, a service-level network).
#include "spec/stack_spec.h"

#include <gtest/gtest.h>

#include "http/response.h"

namespace capsule::spec {
namespace {

using nlohmann::json;

std::string stack_error(const json& body) {
  try {
    parse_stack_spec(body, default_limit_policy());
  } catch (const http::ApiError& e) {
    return e.code() + ": " + e.what();
  }
  return "no error";
}

json demo() {
  return json::parse(R"({
    "services": {
      "db": {"image": "host", "user": "990", "command": ["db-start"],
             "ready": {"exec": ["pg_isready", "-h", "127.0.0.1"], "interval": "200ms", "deadline": "30s"}},
      "app": {"image": "host", "command": ["java", "App"], "depends_on": {"db": "ready"}, "env": {"PORT": "8080"},
              "ready": {"http": {"port": 8080, "path": "/health"}}, "publish": [8080, {"port": 9090, "host_port": 19090}]},
      "tests": {"image": "host", "depends_on": {"app": "ready"}}
    },
    "stages": [
      {"name": "build", "service": "app", "argv": ["javac", "App.java"], "timeout": "5m"},
      {"name": "deploy", "deadline": "2m"},
      {"name": "test", "service": "tests", "argv": ["pytest"], "junit": ["/tmp/r.xml"]}
    ],
    "ttl": "1h", "labels": {"candidate": "c1"}
  })");
}

TEST(StackSpec, RoundTripsWithDefaultsFilled) {
  const LimitPolicy policy = default_limit_policy();
  const StackSpec spec = parse_stack_spec(demo(), policy);
  ASSERT_EQ(spec.services.size(), 3u);
  const ServiceSpec& db = spec.services.at("db");
  EXPECT_EQ(db.user, "990");
  EXPECT_EQ(db.ready.kind, ReadyProbe::Kind::kExec);
  EXPECT_EQ(db.ready.interval, std::chrono::milliseconds(200));
  const ServiceSpec& app = spec.services.at("app");
  EXPECT_EQ(app.ready.kind, ReadyProbe::Kind::kHttp);
  EXPECT_EQ(app.ready.status, 200);
  EXPECT_EQ(app.ready.deadline, std::chrono::seconds(60));
  EXPECT_EQ(app.box.environment.env.at("PORT"), "8080");
  ASSERT_EQ(app.publish.size(), 2u);
  EXPECT_EQ(app.publish[0].port, 8080);
  EXPECT_EQ(app.publish[0].host_port, 0);
  EXPECT_EQ(app.publish[1].host_port, 19090);
  EXPECT_TRUE(spec.services.at("tests").command.empty());
  ASSERT_EQ(spec.stages.size(), 3u);
  EXPECT_TRUE(spec.stages[1].deploy);
  EXPECT_EQ(spec.stages[1].deadline, std::chrono::minutes(2));
  EXPECT_EQ(spec.stages[2].junit, std::vector<std::string>{"/tmp/r.xml"});
  EXPECT_EQ(spec.start_order(), (std::vector<std::string>{"db", "app", "tests"}));

  const json printed = to_json(spec);
  EXPECT_EQ(to_json(parse_stack_spec(printed, policy)), printed);
  EXPECT_EQ(printed["services"]["db"]["user"], "990");
  EXPECT_EQ(printed["services"]["tests"]["ready"], nullptr);
}

TEST(StackSpec, EgressProxyPutsEveryServiceOnTheProxyAtTheStacksDate) {
  const LimitPolicy policy = default_limit_policy();
  json body = demo();
  body["network"] = {{"egress", "proxy"}, {"as_of", "2022-07-01"}};
  body["services"]["tests"]["as_of"] = "2022-07-01";
  const StackSpec spec = parse_stack_spec(body, policy);
  EXPECT_EQ(spec.services.at("db").box.environment.network, "proxy");
  EXPECT_EQ(spec.services.at("db").box.environment.as_of, "2022-07-01");
  EXPECT_EQ(spec.services.at("tests").box.environment.as_of, "2022-07-01");
  const json printed = to_json(spec);
  EXPECT_FALSE(printed["services"]["db"].contains("network"));
  EXPECT_EQ(to_json(parse_stack_spec(printed, policy)), printed);
}

TEST(StackSpec, ADeployStageIsAddedLastWhenAbsent) {
  const StackSpec spec = parse_stack_spec(
      {{"services", {{"web", {{"image", "host"}, {"command", {"httpd"}}, {"ready", {{"tcp", 80}}}}}}}},
      default_limit_policy());
  ASSERT_EQ(spec.stages.size(), 1u);
  EXPECT_TRUE(spec.stages[0].deploy);
  EXPECT_EQ(spec.stages[0].name, "deploy");
  EXPECT_EQ(spec.services.at("web").ready.port, 80);
}

// Compose's healthcheck timing: an attempt's own timeout (30s by default for exec, the old 5 x interval for the
// socket probes), retries after a start period with its own interval, and the command's stop grace.
TEST(StackSpec, ProbeTimingAndStopGraceRoundTrip) {
  json body = demo();
  body["services"]["db"]["ready"] = {{"exec", {"pg_isready"}}, {"interval", "1s"}, {"timeout", "10s"},
                                     {"retries", 5}, {"start_period", "8s"}, {"start_interval", "200ms"}};
  body["services"]["db"]["stop_grace"] = "20s";
  const StackSpec spec = parse_stack_spec(body, default_limit_policy());
  const ServiceSpec& db = spec.services.at("db");
  EXPECT_EQ(db.ready.attempt_timeout(), std::chrono::seconds(10));
  EXPECT_EQ(db.ready.retries, 5u);
  EXPECT_EQ(db.ready.start_period, std::chrono::seconds(8));
  EXPECT_EQ(db.ready.start_interval, std::chrono::milliseconds(200));
  EXPECT_EQ(db.stop_grace, std::chrono::seconds(20));
  const json printed = to_json(spec);
  EXPECT_EQ(to_json(parse_stack_spec(printed, default_limit_policy())), printed);
  EXPECT_EQ(printed["services"]["db"]["stop_grace"], 20000);

  json defaults = demo();
  defaults["services"]["db"]["ready"] = {{"exec", {"pg_isready"}}, {"interval", "100ms"}};
  EXPECT_EQ(parse_stack_spec(defaults, default_limit_policy()).services.at("db").ready.attempt_timeout(),
            std::chrono::seconds(30)) << "an exec probe is not cut at 5 x interval";
  EXPECT_EQ(parse_stack_spec(demo(), default_limit_policy()).services.at("app").ready.attempt_timeout(),
            std::chrono::milliseconds(500));
}

// What `capsule stack up` makes of a compose file (tests/client/stack_compose_test.cpp expects these bodies) is
// a spec capsuled takes as it stands.
TEST(StackSpec, TheComposeMappingsBodiesParse) {
  const StackSpec stack = parse_stack_spec(json::parse(R"({"services": {"db": {
      "image": "a", "command": ["postgres"], "limits": {"memory": "512m"}, "labels": {"role": "db"}, "stop_grace": 10000,
      "publish": [{"port": 80, "host_port": 8080}, {"port": 3000}],
      "ready": {"exec": ["pg_isready"], "interval": 1000, "timeout": 10000, "retries": 30, "start_period": 5000,
                "start_interval": 200, "deadline": 346000}}}})"), default_limit_policy());
  const ServiceSpec& db = stack.services.at("db");
  EXPECT_EQ(db.ready.attempt_timeout(), std::chrono::seconds(10)) << "healthcheck.timeout is the attempt's own";
  EXPECT_EQ(db.ready.retries, 30u);
  EXPECT_EQ(db.ready.start_period, std::chrono::seconds(5));
  EXPECT_EQ(db.ready.deadline, std::chrono::milliseconds(346000));
  EXPECT_EQ(db.box.environment.limits.memory_bytes, 512ull << 20);
  EXPECT_EQ(db.box.environment.labels.at("role"), "db");
  EXPECT_EQ(db.stop_grace, std::chrono::seconds(10));
  ASSERT_EQ(db.publish.size(), 2u);
  EXPECT_EQ(db.publish[0].host_port, 8080);
  EXPECT_EQ(db.publish[1].host_port, 0);
}

TEST(StackSpec, EachBadFieldIsNamed) {
  json retries = demo();
  retries["services"]["db"]["ready"]["retries"] = -1;
  EXPECT_EQ(stack_error(retries), "invalid_spec: services.db.ready.retries: must be a whole number from 0 to 100000");
  json socket_timeout = demo();
  socket_timeout["services"]["app"]["ready"]["timeout"] = "1m";
  EXPECT_EQ(stack_error(socket_timeout), "invalid_spec: services.app.ready.timeout: a tcp or http attempt is made on "
                                         "the stack's own thread: at most 30s");
  json grace = demo();
  grace["services"]["db"]["stop_grace"] = "10m";
  EXPECT_EQ(stack_error(grace), "invalid_spec: services.db.stop_grace: must be at most 60000 ms (the daemon's max kill_grace)");
  json start_interval = demo();
  start_interval["services"]["db"]["ready"]["start_interval"] = "1ms";
  EXPECT_EQ(stack_error(start_interval), "invalid_spec: services.db.ready.start_interval: must be 0 (the interval) or at least 10ms");

  json cycle = demo();
  cycle["services"]["db"]["depends_on"] = {{"tests", "started"}};
  EXPECT_EQ(stack_error(cycle), "invalid_spec: services: depends_on has a cycle");

  json unknown = demo();
  unknown["services"]["app"]["depends_on"] = {{"cache", "ready"}};
  EXPECT_EQ(stack_error(unknown), "invalid_spec: services.app.depends_on.cache: no such service");

  json condition = demo();
  condition["services"]["app"]["depends_on"] = {{"db", "healthy"}};
  EXPECT_EQ(stack_error(condition),
            "invalid_spec: services.app.depends_on.db: must be \"started\", \"ready\" or \"completed\"");

  json two = demo();
  two["services"]["app"]["ready"]["tcp"] = 8080;
  EXPECT_EQ(stack_error(two), "invalid_spec: services.app.ready: give exactly one of tcp, http, log, exec");

  json pattern = demo();
  pattern["services"]["db"]["ready"] = {{"log", {{"success", "ready ("}}}};
  EXPECT_NE(stack_error(pattern).find("services.db.ready.log.success: is not a POSIX extended regular expression"),
            std::string::npos) << stack_error(pattern);
  pattern["services"]["db"]["ready"] = {{"log", {{"success", "(a+)\\1"}}}};
  EXPECT_EQ(stack_error(pattern), "invalid_spec: services.db.ready.log.success: back-references (\\1 to \\9) are not allowed");

  json completed = demo();
  completed["services"]["app"]["depends_on"] = {{"tests", "completed"}};
  completed["services"]["tests"]["depends_on"] = json::object();
  EXPECT_EQ(stack_error(completed), "invalid_spec: services.app.depends_on.tests: \"completed\" needs a service with a command");

  json dated = demo();
  dated["network"] = {{"egress", "proxy"}, {"as_of", "2022-07-01"}};
  dated["services"]["db"]["as_of"] = "2021-01-01";
  EXPECT_EQ(stack_error(dated), "invalid_spec: services.db.as_of: the stack's one package proxy serves network.as_of; give the date there");

  json port = demo();
  port["services"]["app"]["ready"] = {{"tcp", 70000}};
  EXPECT_EQ(stack_error(port), "invalid_spec: services.app.ready.tcp: must be a TCP port (1-65535)");

  json user = demo();
  user["services"]["db"]["user"] = "../postgres";
  EXPECT_EQ(stack_error(user), "invalid_spec: services.db.user: must be \"USER\" or \"USER:GROUP\" (names or numbers)");

  json name = demo();
  name["services"]["Bad_Name"] = {{"image", "host"}};
  EXPECT_NE(stack_error(name).find("services.Bad_Name: a service name is a DNS label"), std::string::npos);

  json network = demo();
  network["services"]["app"]["network"] = "proxy";
  EXPECT_NE(stack_error(network).find("services.app.network: a stack's services share its network"),
            std::string::npos);

  json box = demo();
  box["services"]["app"]["limits"] = {{"memory", "lots"}};
  EXPECT_NE(stack_error(box).find("services.app.limits.memory"), std::string::npos);

  json stage = demo();
  stage["stages"][0]["service"] = "nowhere";
  EXPECT_EQ(stack_error(stage), "invalid_spec: stages[0].service: no service named 'nowhere'");

  json reports = demo();
  reports["stages"][2]["junit"] = json::array();
  for (int i = 0; i < 33; ++i) reports["stages"][2]["junit"].push_back("/tmp/r" + std::to_string(i) + ".xml");
  EXPECT_EQ(stack_error(reports), "invalid_spec: stages[2].junit: at most 32 paths");

  json repeated = demo();
  repeated["stages"][2]["name"] = "build";
  EXPECT_EQ(stack_error(repeated), "invalid_spec: stages[2].name: repeats 'build'");

  json egress = demo();
  egress["network"] = {{"egress", "internet"}};
  EXPECT_EQ(stack_error(egress),
            "invalid_spec: network.egress: must be \"none\" (no route out of the stack) or \"proxy\" (the package proxy only)");
  egress["network"] = {{"egress", "proxy"}};
  EXPECT_EQ(stack_error(egress), "invalid_spec: network.as_of: is required with egress \"proxy\" (the cutoff)");

  json extra = demo();
  extra["volumes"] = json::object();
  EXPECT_EQ(stack_error(extra), "invalid_spec: volumes: unknown field");

  json publish = demo();
  publish["services"]["app"]["publish"] = {{{"port", 8080}, {"host", "0.0.0.0"}}};
  EXPECT_EQ(stack_error(publish), "invalid_spec: services.app.publish[0].host: unknown field");

  json many = {{"services", json::object()}};
  for (int i = 0; i < 17; ++i) many["services"]["s" + std::to_string(i)] = {{"image", "host"}};
  EXPECT_EQ(stack_error(many), "invalid_spec: services: a stack has at most 16 services");
}

}  // namespace
}  // namespace capsule::spec
