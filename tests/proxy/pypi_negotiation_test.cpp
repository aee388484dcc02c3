// PEP 691 negotiation: the Accept headers real clients send, q-values, wildcards, ?format=, and garbage.
#include "proxy/pypi/negotiation.h"

#include <gtest/gtest.h>

#include <string>

namespace capsule::proxy::pypi {
namespace {

constexpr const char* kJson = "application/vnd.pypi.simple.v1+json";
constexpr const char* kHtml = "application/vnd.pypi.simple.v1+html";
constexpr const char* kText = "text/html; charset=utf-8";

// The content type chosen, or "406".
std::string chosen(std::string_view accept, std::string_view format = "") {
  const auto negotiated = negotiate(accept, format);
  if (!negotiated) return "406";
  const Format expected = negotiated->content_type == kJson ? Format::kJson : Format::kHtml;
  EXPECT_EQ(negotiated->format, expected) << accept;
  return negotiated->content_type;
}

TEST(Negotiation, RealClientsHeaders) {
  // pip 18.1, 19.2.3, 22.0.4
  EXPECT_EQ(chosen("text/html"), kText);
  // pip 23.0.1, 23.2.1, 24.2
  EXPECT_EQ(chosen("application/vnd.pypi.simple.v1+json, application/vnd.pypi.simple.v1+html; q=0.1, "
                   "text/html; q=0.01"),
            kJson);
  // uv
  EXPECT_EQ(chosen("application/vnd.pypi.simple.v1+json, application/vnd.pypi.simple.v1+html;q=0.2, "
                   "text/html;q=0.01"),
            kJson);
  // a browser
  EXPECT_EQ(chosen("text/html,application/xhtml+xml,application/xml;q=0.9,image/avif,*/*;q=0.8"), kText);
}

TEST(Negotiation, MissingAcceptAndWildcardsGetHtml) {
  EXPECT_EQ(chosen(""), kText);
  EXPECT_EQ(chosen("   "), kText);
  EXPECT_EQ(chosen("*/*"), kText);
  EXPECT_EQ(chosen("application/*"), kHtml);
  EXPECT_EQ(chosen("text/*"), kText);
  // A named type beats a wildcard at the same q, whichever it is.
  EXPECT_EQ(chosen("*/*, application/vnd.pypi.simple.v1+json"), kJson);
  EXPECT_EQ(chosen("application/vnd.pypi.simple.v1+html, */*"), kHtml);
  // ... but not a wildcard with a higher q.
  EXPECT_EQ(chosen("application/vnd.pypi.simple.v1+json;q=0.5, */*"), kText);
}

TEST(Negotiation, QValuesAndServerPreference) {
  EXPECT_EQ(chosen("text/html, application/vnd.pypi.simple.v1+json"), kJson);  // equal q: JSON first
  EXPECT_EQ(chosen("text/html, application/vnd.pypi.simple.v1+html"), kHtml);
  EXPECT_EQ(chosen("text/html;q=1.0, application/vnd.pypi.simple.v1+json;q=0.999"), kText);
  EXPECT_EQ(chosen("application/vnd.pypi.simple.v1+html;q=0.3, application/vnd.pypi.simple.v1+json;q=0.2"), kHtml);
  EXPECT_EQ(chosen("TEXT/HTML;Q=0.5"), kText);  // case-insensitive
}

TEST(Negotiation, QZeroMeansNotAcceptable) {
  EXPECT_EQ(chosen("application/vnd.pypi.simple.v1+json;q=0"), "406");
  EXPECT_EQ(chosen("*/*, application/vnd.pypi.simple.v1+json;q=0"), kText);
  EXPECT_EQ(chosen("*/*, text/html;q=0"), kHtml);
  EXPECT_EQ(chosen("*/*, text/html;q=0, application/vnd.pypi.simple.v1+html;q=0.000"), kJson);
  EXPECT_EQ(chosen("*/*;q=0"), "406");
  EXPECT_EQ(chosen("application/json"), "406");
  EXPECT_EQ(chosen("image/png, application/xml;q=0.9"), "406");
}

TEST(Negotiation, LatestAliasesAnswerWithV1) {
  EXPECT_EQ(chosen("application/vnd.pypi.simple.latest+json"), kJson);
  EXPECT_EQ(chosen("application/vnd.pypi.simple.latest+html"), kHtml);
  EXPECT_EQ(chosen("application/vnd.pypi.simple.latest+html, text/html;q=0.5"), kHtml);
}

TEST(Negotiation, FormatQueryOverridesAccept) {
  EXPECT_EQ(chosen("text/html", "application/vnd.pypi.simple.v1+json"), kJson);
  EXPECT_EQ(chosen("application/vnd.pypi.simple.v1+json", "application/vnd.pypi.simple.v1+html"), kHtml);
  EXPECT_EQ(chosen("application/vnd.pypi.simple.v1+json", "text/html"), kText);
  EXPECT_EQ(chosen("", "application/vnd.pypi.simple.latest+json"), kJson);
  EXPECT_EQ(chosen("", "application/vnd.pypi.simple.v1 json"), kJson);  // '+' decoded as ' '
  EXPECT_EQ(chosen("application/json", "application/vnd.pypi.simple.v1+json"), kJson);  // even over a 406
  // A value that names none of our types leaves the decision to Accept.
  EXPECT_EQ(chosen("application/vnd.pypi.simple.v1+json", "json"), kJson);
  EXPECT_EQ(chosen("text/html", "*/*"), kText);
  EXPECT_EQ(chosen("application/json", "application/xml"), "406");
}

TEST(Negotiation, MalformedEntriesAreSkipped) {
  EXPECT_EQ(chosen("application/vnd.pypi.simple.v1+json;q=abc, text/html"), kText);
  EXPECT_EQ(chosen("application/vnd.pypi.simple.v1+json;q=2, text/html"), kText);
  EXPECT_EQ(chosen("application/vnd.pypi.simple.v1+json;q=0.1234, text/html;q=0.1"), kText);
  EXPECT_EQ(chosen("application/vnd.pypi.simple.v1+json;novalue, text/html;q=0.1"), kText);
  EXPECT_EQ(chosen("*/json, text/html;q=0.1"), kText);
  EXPECT_EQ(chosen("text/html;level=\"a,b;q=0\";q=0.2, application/vnd.pypi.simple.v1+html;q=0.1"), kText);
  // Nothing parses at all: as if there were no Accept.
  EXPECT_EQ(chosen(",,;;"), kText);
  EXPECT_EQ(chosen("garbage"), kText);
}

TEST(Negotiation, NeverThrowsOnGarbage) {
  for (const std::string& accept :
       {std::string("\0\0\0", 3), std::string(";q="), std::string("a/b;q=0."), std::string("\"unterminated"),
        std::string("text/html;q=\"0.5\""), std::string(10000, ','), std::string("*/*;q=1.001"),
        std::string("\\"), std::string("text/html;q=0.5\\\""), std::string("\xff\xfe/\x80")}) {
    EXPECT_NO_THROW((void)negotiate(accept, accept));
  }
}

}  // namespace
}  // namespace capsule::proxy::pypi
