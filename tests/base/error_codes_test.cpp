// Every error code the sources throw at a client (ApiError, ProxyError, ToolchainError, error_response) has its
// own row in the one code -> HTTP status table, so no new code silently becomes a 500.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <map>
#include <regex>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "http/error_status.h"
#include "tests/support/test_support.h"

namespace capsule {
namespace {

namespace fs = std::filesystem;

// Codes that are meant to be a 500: capsule's own failures. Adding one here is a deliberate choice.
const std::set<std::string> kInternalCodes = {"internal_error", "image_save_failed", "invalid_release_data",
                                              "log_unreadable", "cache_failure", "bad_ca_file", "session_failed"};

// The first argument of each call to `name(` in `text` (up to the first top-level ',' or ')').
std::vector<std::string> first_arguments(const std::string& text, const std::string& name) {
  std::vector<std::string> out;
  const std::regex call("\\b" + name + "\\(");
  for (auto it = std::sregex_iterator(text.begin(), text.end(), call); it != std::sregex_iterator(); ++it) {
    std::size_t i = static_cast<std::size_t>(it->position() + it->length());
    int depth = 0;
    std::string argument;
    for (; i < text.size(); ++i) {
      const char c = text[i];
      if (depth == 0 && (c == ',' || c == ')')) break;
      if (c == '(') ++depth;
      if (c == ')') --depth;
      argument += c;
    }
    out.push_back(argument);
  }
  return out;
}

// code -> "file" where it is thrown, for every "lower_case" literal in the code argument of the calls above
// (a ternary such as `polled ? "internal_error" : "path_timeout"` gives both).
std::map<std::string, std::string> thrown_codes() {
  std::map<std::string, std::string> codes;
  const std::regex literal("\"([a-z][a-z0-9_]*)\"");
  const fs::path root(CAPSULE_SOURCE_DIR);
  for (const char* dir : {"base", "store", "http", "sandbox", "images", "proxy", "spec", "daemon", "client", "tools"}) {
    for (const auto& entry : fs::recursive_directory_iterator(root / dir)) {
      const auto ext = entry.path().extension();
      if (!entry.is_regular_file() || (ext != ".cpp" && ext != ".h")) continue;
      std::ifstream in(entry.path());
      std::stringstream text;
      text << in.rdbuf();
      for (const char* name : {"ApiError", "ProxyError", "ToolchainError", "error_response"}) {
        for (const std::string& argument : first_arguments(text.str(), name)) {
          for (auto it = std::sregex_iterator(argument.begin(), argument.end(), literal); it != std::sregex_iterator();
               ++it) {
            codes.emplace((*it)[1].str(), fs::relative(entry.path(), root).string());
          }
        }
      }
    }
  }
  return codes;
}

TEST(ErrorCodes, EveryThrownCodeHasItsStatus) {
  const auto codes = thrown_codes();
  ASSERT_GT(codes.size(), 30u) << "the scan found too few codes; has the source layout changed?";
  for (const auto& [code, file] : codes) {
    if (kInternalCodes.count(code) != 0) {
      EXPECT_EQ(http::status_for(code), 500u) << code << " (" << file << ")";
    } else {
      EXPECT_NE(http::status_for(code), 500u) << code << " (thrown in " << file
                                               << ") is missing from http/error_status.cpp";
    }
  }
}

TEST(ErrorCodes, TheScanSeesTheCallsItLooksFor) {
  EXPECT_EQ(first_arguments(R"(throw ApiError("not_found", "x"); error_response(a ? "b" : "c", m);)", "ApiError"),
            std::vector<std::string>{"\"not_found\""});
  EXPECT_EQ(first_arguments(R"(error_response(f(a, b) ? "b" : "c", m);)", "error_response"),
            std::vector<std::string>{"f(a, b) ? \"b\" : \"c\""});
}

TEST(ErrorCodes, KnownCodesKeepTheirStatus) {
  EXPECT_EQ(http::status_for("bad_cutoff"), 400u);
  EXPECT_EQ(http::status_for("cutoff_mismatch"), 403u);
  EXPECT_EQ(http::status_for("not_found"), 404u);
  EXPECT_EQ(http::status_for("not_acceptable"), 406u);
  EXPECT_EQ(http::status_for("bad_upstream"), 502u);
  EXPECT_EQ(http::status_for("offline_miss"), 503u);
  EXPECT_EQ(http::status_for("upstream_timeout"), 504u);
  EXPECT_EQ(http::status_for("release_data_outdated"), 400u);
  EXPECT_EQ(http::status_for("no such code"), 500u);
}

}  // namespace
}  // namespace capsule
