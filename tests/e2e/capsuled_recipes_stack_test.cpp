// The stacks issue's real end-to-end test on the stack-demo recipe image (Debian's PostgreSQL 15, OpenJDK 17 with
// the JDBC driver, pytest): build (javac) -> deploy (database ready by pg_isready, application by HTTP) -> test,
// with counts in the record; three copies at once; a broken application gives the right stage and reason each
// time; the database is unreachable from the host and from another stack.
#include <fstream>

#include "tests/support/test_support.h"
#include "tests/e2e/recipes_fixture.h"

namespace capsule::testing {
namespace {

const fs::path kFixture = fs::path(CAPSULE_SOURCE_DIR) / "tests/e2e/fixtures/stack_demo";
constexpr int kDbPort = 55432;  // not PostgreSQL's usual port, so a database on the host cannot answer for it

class CapsuledRecipesStack : public CapsuledRecipes {
 protected:
  void SetUp() override {
    CapsuledRecipes::SetUp();
    if (IsSkipped() || HasFatalFailure()) return;
    for (const Recipe& r : recipes_) {
      if (r.name == "stack-demo") recipe_ = &r;
    }
    if (recipe_ == nullptr) GTEST_SKIP() << "no stack-demo output in " << recipe_root() << "; " << kHowToBuild;
    image_ = recipe_->ref();
    ensure_image(*recipe_);
    app_ = make_dir("app");
    fs::copy_file(kFixture / "app/App.java", app_ / "App.java");
    tests_ = make_dir("tests");
    fs::copy_file(kFixture / "tests/test_app.py", tests_ / "test_app.py");
  }

  // The three services and three stages; `app_env` is added to the application's environment.
  json stack_spec(const json& app_env = json::object(), const json& app_ready = nullptr) const {
    json app_environment = {{"DB_URL", "jdbc:postgresql://db:" + std::to_string(kDbPort) + "/postgres"}};
    app_environment.update(app_env);
    return {
        {"services",
         {{"db", {{"image", image_}, {"user", "postgres"}, {"env", {{"PGPORT", std::to_string(kDbPort)}}},
                  {"command", {"/usr/local/bin/stack-demo-db"}},
                  {"ready", {{"exec", {"pg_isready", "-q", "-h", "127.0.0.1", "-p", std::to_string(kDbPort)}},
                             {"interval", "200ms"}, {"deadline", "90s"}}},
                  {"limits", {{"memory", "1g"}, {"disk", "2g"}}}}},
          {"app", {{"image", image_}, {"workspace", {{"path", app_.string()}}}, {"env", app_environment},
                   {"command", {"java", "-cp", "/workspace/out:/usr/share/java/postgresql.jar", "App"}},
                   {"depends_on", {{"db", "ready"}}},
                   {"ready", app_ready.is_null() ? json{{"http", {{"port", 8080}, {"path", "/health"}}}, {"deadline", "90s"}}
                                                 : app_ready},
                   {"limits", {{"memory", "1g"}, {"disk", "2g"}}}}},
          {"tests", {{"image", image_}, {"workspace", {{"path", tests_.string()}, {"mode", "ro"}}},
                     {"depends_on", {{"app", "ready"}}}, {"limits", {{"disk", "2g"}}}}}}},
        {"stages",
         {{{"name", "build"}, {"service", "app"}, {"argv", {"javac", "-d", "out", "App.java"}}, {"cwd", "/workspace"},
           {"timeout", "5m"}},
          {{"name", "deploy"}, {"deadline", "3m"}},
          {{"name", "test"}, {"service", "tests"}, {"cwd", "/workspace"},
           {"argv", {"python3", "-m", "pytest", "-q", "-p", "no:cacheprovider", "--junitxml=/tmp/report.xml"}},
           {"junit", {"/tmp/report.xml"}}, {"timeout", "5m"}}}}};
  }

  json create(const json& spec, bool wait = true) const {
    const auto start = Clock::now();
    const HttpResponse response = call("POST", wait ? "/v1/stacks?wait=true" : "/v1/stacks", spec);
    EXPECT_EQ(response.status, 201) << response.body;
    if (wait) note("stack " + body_json(response).value("state", "?") + " in " + std::to_string(seconds_since(start)) + " s");
    return body_json(response);
  }
  json get_stack(const std::string& id) const { return body_json(call("GET", "/v1/stacks/" + id)); }
  void remove(const std::string& id) const { EXPECT_EQ(call("DELETE", "/v1/stacks/" + id).status, 200); }
  std::string stdout_of(const std::string& run_id) const {
    return call("GET", "/v1/runs/" + run_id + "/logs?stream=stdout").body;
  }

  const Recipe* recipe_ = nullptr;
  std::string image_;
  fs::path app_, tests_;
};

TEST_F(CapsuledRecipesStack, PostgresqlAJavaAppAndPytestBuildDeployAndTestThreeCopiesAtOnce) {
  std::vector<std::string> ids;
  for (int i = 0; i < 3; ++i) ids.push_back(create(stack_spec(), false)["id"]);
  for (const std::string& id : ids) {
    ASSERT_TRUE(eventually([&] { return get_stack(id)["state"] != "starting"; }, 600s));
    const json stack = get_stack(id);
    ASSERT_EQ(stack["state"], "up") << stack.dump(1);
    EXPECT_EQ(stack["stages"][0]["state"], "passed");
    EXPECT_EQ(stack["stages"][1]["state"], "passed");
    const json& tests = stack["stages"][2]["tests"];
    EXPECT_EQ(tests["total"], 5) << tests.dump(1);
    EXPECT_EQ(tests["failed"], 0);
    EXPECT_EQ(tests["errors"], 0);
    for (const char* service : {"db", "app", "tests"}) {
      EXPECT_EQ(stack["services"][service]["state"], "ready") << service;
      EXPECT_TRUE(stack["services"][service]["ready_ms"].is_number()) << service;
    }
    note("stack " + id + ": db ready in " + stack["services"]["db"]["ready_ms"].dump() + " ms, app in " +
         stack["services"]["app"]["ready_ms"].dump() + " ms; tests " + std::to_string(tests["total"].get<int>()));
    EXPECT_NE(stdout_of(stack["services"]["app"]["exec_id"]).find("listening on 8080"), std::string::npos);
  }

  // The database answers inside its stack only: not on the host, not from a stack of its own.
  EXPECT_FALSE(host_loopback_accepts(kDbPort));
  const json outsider = create({{"services", {{"probe", {{"image", image_}}}}},
                                {"stages", {{{"name", "deploy"}},
                                            {{"name", "reach"}, {"service", "probe"},
                                             {"argv", {"sh", "-c", "pg_isready -h 127.0.0.1 -p " + std::to_string(kDbPort) +
                                                                       "; pg_isready -h db -p " + std::to_string(kDbPort) +
                                                                       "; echo exit=$?"}}}}}});
  ASSERT_EQ(outsider["state"], "up") << outsider.dump(1);
  const std::string reached = stdout_of(outsider["stages"][1]["exec_id"]);
  EXPECT_NE(reached.find("127.0.0.1:" + std::to_string(kDbPort) + " - no response"), std::string::npos) << reached;
  EXPECT_EQ(reached.find("accepting connections"), std::string::npos) << reached;
  EXPECT_NE(reached.find("exit=2"), std::string::npos) << "the name db means nothing outside its stack: " << reached;
  remove(outsider["id"]);
  for (const std::string& id : ids) remove(id);
}

TEST_F(CapsuledRecipesStack, ABrokenApplicationFailsAtTheRightStageWithTheRightReason) {
  // Crashes on start: the deploy stage fails at once, naming the application.
  const json crashed = create(stack_spec({{"APP_FAULT", "crash"}}));
  EXPECT_EQ(crashed["state"], "failed");
  EXPECT_EQ(crashed["failure"]["stage"], "deploy") << crashed["failure"].dump();
  EXPECT_EQ(crashed["failure"]["reason"], "container_exit");
  EXPECT_EQ(crashed["failure"]["service"], "app");
  EXPECT_EQ(crashed["services"]["app"]["exit_code"], 3);
  EXPECT_EQ(crashed["services"]["db"]["state"], "ready");
  EXPECT_EQ(crashed["stages"][2]["state"], "skipped");

  // Listens on another port than its probe's.
  const json wrong_port = create(stack_spec({{"PORT", "8081"}}, {{"http", {{"port", 8080}, {"path", "/health"}}}, {"deadline", "20s"}}));
  EXPECT_EQ(wrong_port["failure"]["stage"], "deploy") << wrong_port["failure"].dump();
  EXPECT_EQ(wrong_port["failure"]["reason"], "connection_refused");
  EXPECT_EQ(wrong_port["failure"]["service"], "app");

  // Never ready: /health answers 503 until the deadline.
  const json unhealthy =
      create(stack_spec({{"APP_FAULT", "unhealthy"}}, {{"http", {{"port", 8080}, {"path", "/health"}}}, {"deadline", "15s"}}));
  EXPECT_EQ(unhealthy["failure"]["stage"], "deploy") << unhealthy["failure"].dump();
  EXPECT_EQ(unhealthy["failure"]["reason"], "deploy_timeout");
  EXPECT_EQ(unhealthy["services"]["app"]["probe"], "HTTP 503");

  // Does not compile: the build stage fails and nothing is deployed.
  std::ofstream(app_ / "App.java", std::ios::app) << "\nthis is not java\n";
  const json broken_build = create(stack_spec());
  EXPECT_EQ(broken_build["failure"]["stage"], "build") << broken_build["failure"].dump();
  EXPECT_EQ(broken_build["failure"]["reason"], "build_failed");
  EXPECT_EQ(broken_build["services"]["db"]["exec_id"], "");

  for (const json& stack : {crashed, wrong_port, unhealthy, broken_build}) remove(stack["id"]);
}

// The database as a ScarfBench author's compose.yaml has it: PostgreSQL that takes longer than 5 s to be ready
// (6 s before it starts, as one replaying its log under load), its healthcheck with compose's timeout, retries and
// start_period, mem_limit, labels and stop_grace_period; its log (on stderr) through `stack logs`.
TEST_F(CapsuledRecipesStack, AComposeDatabaseSlowToBeReadyPassesItsHealthcheckAndLogsToStderr) {
  const std::string port = std::to_string(kDbPort);
  const fs::path compose = make_dir("compose") / "compose.yaml";
  std::ofstream(compose) << "services:\n"
                            "  db:\n"
                            "    image: " << image_ << "\n"
                            "    user: postgres\n"
                            "    command: [\"sh\", \"-c\", \"sleep 6; exec /usr/local/bin/stack-demo-db\"]\n"
                            "    environment: {PGPORT: \"" << port << "\"}\n"
                            "    mem_limit: 1g\n"
                            "    labels: {role: database}\n"
                            "    stop_grace_period: 10s\n"
                            "    expose: [\"" << port << "\"]\n"
                            "    healthcheck:\n"
                            "      test: [\"CMD\", \"pg_isready\", \"-q\", \"-h\", \"127.0.0.1\", \"-p\", \"" << port << "\"]\n"
                            "      interval: 100ms\n"
                            "      timeout: 10s\n"
                            "      retries: 5\n"
                            "      start_period: 90s\n"
                            "    x-capsule: {limits: {disk: 2g}}\n";
  const Cli up = run_capsule_cli(dir_, {"--socket", socket_, "stack", "up", "--json", compose.string()});
  ASSERT_EQ(up.code, 0) << up.out << up.err;
  const json stack = json::parse(up.out);
  const std::string id = stack["id"];
  const json& db = stack["services"]["db"];
  EXPECT_EQ(db["state"], "ready") << stack.dump(1);
  EXPECT_GE(db["ready_ms"].get<std::int64_t>(), 6000);
  note("db ready in " + db["ready_ms"].dump() + " ms");
  EXPECT_EQ(stack["spec"]["services"]["db"]["limits"]["memory"], 1ll << 30);
  EXPECT_EQ(stack["spec"]["services"]["db"]["labels"]["role"], "database");
  EXPECT_EQ(stack["spec"]["services"]["db"]["stop_grace"], 10000);
  EXPECT_EQ(stack["spec"]["services"]["db"]["ready"]["timeout"], 10000);
  ASSERT_EQ(db["published"].size(), 1u) << db.dump();
  EXPECT_TRUE(host_loopback_accepts(std::stoi(db["published"][0]["host"].get<std::string>().substr(10))))
      << "expose publishes on the host's loopback";

  const Cli logs = run_capsule_cli(dir_, {"--socket", socket_, "stack", "logs", id, "db"});
  EXPECT_EQ(logs.code, 0) << logs.err;
  EXPECT_NE(logs.err.find("database system is ready to accept connections"), std::string::npos)
      << "PostgreSQL logs on stderr: " << logs.out << logs.err;
  // stop_grace: the stack's end sends SIGTERM, and PostgreSQL shuts down by itself.
  EXPECT_EQ(run_capsule_cli(dir_, {"--socket", socket_, "stack", "down", id}).code, 0);
  const std::string log = call("GET", "/v1/runs/" + db["exec_id"].get<std::string>() + "/logs?stream=stderr").body;
  EXPECT_NE(log.find("database system is shut down"), std::string::npos) << log;
}

}  // namespace
}  // namespace capsule::testing
