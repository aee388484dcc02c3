// Checks docs/openapi.yaml against the code: its paths and methods are exactly the routes capsuled registers, and
// its ErrorNNN schemas are the code -> status table of http/error_status.cpp. (tests/openapi/validate.mjs checks
// the document itself, and that it keeps the layout read here without a YAML parser.)
#include <gtest/gtest.h>

#include <boost/asio/io_context.hpp>
#include <filesystem>
#include <fstream>
#include <map>
#include <regex>
#include <set>
#include <sstream>

#include "daemon/api/api.h"
#include "daemon/api/images_api.h"
#include "http/error_status.h"
#include "tests/support/test_support.h"

namespace capsule::daemon {
namespace {

std::string read_source(const std::string& relative) {
  std::ifstream file(std::string(CAPSULE_SOURCE_DIR) + "/" + relative);
  EXPECT_TRUE(file) << "cannot read " << relative;
  std::stringstream text;
  text << file.rdbuf();
  return text.str();
}

std::vector<std::string> yaml_lines(const std::string& text) {
  std::vector<std::string> lines;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) lines.push_back(line);
  return lines;
}

// "METHOD /path" for each operation under the top-level `paths:` (paths at two spaces, methods at four).
std::set<std::string> documented_routes(const std::string& yaml) {
  static const std::map<std::string, std::string> kMethods = {{"get", "GET"},       {"put", "PUT"},     {"post", "POST"},
                                                              {"delete", "DELETE"}, {"patch", "PATCH"}, {"head", "HEAD"},
                                                              {"options", "OPTIONS"}, {"trace", "TRACE"}};
  const std::regex path_line(R"(^  (/\S*):\s*$)");
  const std::regex method_line(R"(^    ([a-z]+):)");
  std::set<std::string> routes;
  bool in_paths = false;
  std::string path;
  std::smatch match;
  for (const std::string& line : yaml_lines(yaml)) {
    if (!line.empty() && line[0] != ' ' && line[0] != '#') in_paths = line == "paths:";
    if (!in_paths) continue;
    if (std::regex_match(line, match, path_line)) path = match[1].str();
    if (!path.empty() && std::regex_search(line, match, method_line) && kMethods.count(match[1].str())) {
      routes.insert(kMethods.at(match[1].str()) + " " + path);
    }
  }
  return routes;
}

// code -> status from the ErrorNNN schemas: each name, then its `enum: [a, b]` line.
std::map<std::string, unsigned> documented_codes(const std::string& yaml) {
  const std::regex schema_line(R"(^    Error([0-9]{3}):\s*$)");
  const std::regex enum_line(R"(^\s+enum: \[(.*)\]\s*$)");
  const std::regex code(R"([a-z_]+)");
  std::map<std::string, unsigned> codes;
  unsigned status = 0;
  std::smatch match;
  for (const std::string& line : yaml_lines(yaml)) {
    if (std::regex_match(line, match, schema_line)) status = static_cast<unsigned>(std::stoul(match[1].str()));
    if (status == 0 || !std::regex_match(line, match, enum_line)) continue;
    const std::string list = match[1].str();
    for (auto it = std::sregex_iterator(list.begin(), list.end(), code); it != std::sregex_iterator(); ++it) {
      EXPECT_TRUE(codes.emplace(it->str(), status).second) << it->str() << " is listed under two statuses";
    }
    status = 0;
  }
  return codes;
}

std::string listed(const std::set<std::string>& items) {
  std::string out;
  for (const auto& item : items) out += "\n  " + item;
  return out;
}

TEST(OpenApi, PathsAndMethodsAreExactlyTheRegisteredRoutes) {
  const std::string dir = "/tmp/capsule-test/openapi-routes-" + std::to_string(::getpid());
  std::filesystem::create_directories(dir + "/logs");
  {
    // The router as capsuled's main builds it.
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
    register_images_api(router, store, jobs, AccessPolicy{});

    std::set<std::string> registered;
    for (const auto& [method, pattern] : router.routes()) registered.insert(method + " " + pattern);
    ASSERT_GE(registered.size(), 30u);
    const std::set<std::string> documented = documented_routes(read_source("docs/openapi.yaml"));
    std::set<std::string> undocumented, unserved;
    for (const auto& route : registered) if (!documented.count(route)) undocumented.insert(route);
    for (const auto& route : documented) if (!registered.count(route)) unserved.insert(route);
    EXPECT_TRUE(undocumented.empty()) << "registered but not in docs/openapi.yaml:" << listed(undocumented);
    EXPECT_TRUE(unserved.empty()) << "in docs/openapi.yaml but not registered:" << listed(unserved);
  }
  std::filesystem::remove_all(dir);
}

TEST(OpenApi, ErrorSchemasAreTheErrorStatusTable) {
  // The table as written in http/error_status.cpp, each row checked against status_for (so this reading is the table).
  const std::string source = read_source("http/error_status.cpp");
  const std::regex row(R"re(\{"([a-z_]+)", ([0-9]{3})\})re");
  std::map<std::string, unsigned> table;
  for (auto it = std::sregex_iterator(source.begin(), source.end(), row); it != std::sregex_iterator(); ++it) {
    const std::string code = (*it)[1].str();
    table[code] = static_cast<unsigned>(std::stoul((*it)[2].str()));
    EXPECT_EQ(http::status_for(code), table[code]) << code;
  }
  ASSERT_GE(table.size(), 40u);
  const std::map<std::string, unsigned> documented = documented_codes(read_source("docs/openapi.yaml"));
  for (const auto& [code, status] : table) {
    const auto found = documented.find(code);
    if (found == documented.end()) {
      ADD_FAILURE() << code << " (" << status << ") is in no ErrorNNN schema of docs/openapi.yaml";
    } else {
      EXPECT_EQ(found->second, status) << code << " is under Error" << found->second << " in docs/openapi.yaml";
    }
  }
  for (const auto& [code, status] : documented) {
    EXPECT_TRUE(table.count(code)) << code << " (Error" << status << " in docs/openapi.yaml) is not in http/error_status.cpp";
  }
}

}  // namespace
}  // namespace capsule::daemon
