// Checks that docs/api.md documents every route the API registers, and documents no route that does not
// exist: the route table in the reference must match Router::routes() exactly.
#include <gtest/gtest.h>

#include <boost/asio/io_context.hpp>
#include <filesystem>
#include <fstream>
#include <regex>
#include <set>
#include <sstream>

#include "daemon/api/api.h"
#include "daemon/api/images_api.h"
#include "tests/support/test_support.h"

namespace capsule::daemon {
namespace {

std::set<std::string> documented_routes() {
  std::ifstream file(std::string(CAPSULE_SOURCE_DIR) + "/docs/api.md");
  std::set<std::string> routes;
  const std::regex row(R"(^\| (GET|POST|PUT|PATCH|DELETE) \| `([^`]+)` \|)");
  std::string line;
  std::smatch match;
  while (std::getline(file, line)) {
    if (std::regex_search(line, match, row)) routes.insert(match[1].str() + " " + match[2].str());
  }
  return routes;
}

TEST(ApiDocs, EveryRegisteredRouteIsDocumentedAndNothingElse) {
  const std::string dir = "/tmp/capsule-test/api-docs-" + std::to_string(::getpid());
  std::filesystem::create_directories(dir + "/logs");
  {
    boost::asio::io_context io;
    Ledger ledger(":memory:");
    LogStore logs(dir + "/logs");
    RunManagerOptions options;
    options.runs_dir = dir + "/runs";
    RunManager runs(testing::shared_launcher(), ledger, logs, options);
    SessionManagerOptions session_options;
    session_options.sessions_dir = dir + "/sessions";
    SessionManager sessions(testing::shared_launcher(), ledger, logs, session_options);
    ApiContext context{io, runs, ledger, logs, spec::default_limit_policy(), 1, {}, sessions};
    images::ImageStore store(dir + "/store");
    ImageJobs jobs;
    http::Router router;
    register_api(router, context);
    register_images_api(router, store, jobs);

    std::set<std::string> registered;
    for (const auto& [method, pattern] : router.routes()) registered.insert(method + " " + pattern);
    ASSERT_GE(registered.size(), 8u);
    const std::set<std::string> documented = documented_routes();
    for (const auto& route : registered) EXPECT_TRUE(documented.count(route)) << route << " is not in docs/api.md";
    for (const auto& route : documented) EXPECT_TRUE(registered.count(route)) << route << " is documented but not served";
  }
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace capsule::daemon
