// Cutoff and timestamp parsing: accepted forms, refusals, canonical text, HTTP dates and Maven timestamps.
#include "proxy/cutoff.h"

#include <gtest/gtest.h>

namespace capsule::proxy {
namespace {

TEST(Cutoff, BareDateIsMidnightUtc) {
  const auto cutoff = parse_cutoff("2023-04-11");
  ASSERT_TRUE(cutoff);
  EXPECT_EQ(cutoff->text, "2023-04-11T00:00:00Z");
  EXPECT_EQ(cutoff->at, 1681171200LL * 1000000);
}

TEST(Cutoff, Rfc3339WithOffsetAndFraction) {
  const auto cutoff = parse_cutoff("2023-04-11T02:30:00.25+02:30");
  ASSERT_TRUE(cutoff);
  EXPECT_EQ(cutoff->text, "2023-04-11T00:00:00.250000Z");
  EXPECT_EQ(parse_cutoff("2024-12-03t22:12:33z")->text, "2024-12-03T22:12:33Z");
  EXPECT_EQ(parse_timestamp("1969-12-31T23:59:59.5Z"), -500000);
  EXPECT_EQ(base::format_rfc3339(-500000), "1969-12-31T23:59:59.500000Z");
}

TEST(Cutoff, RefusesMalformedAndOutOfRange) {
  for (const char* bad : {"", "2023", "2023-4-11", "2023-02-29", "2024-13-01", "2023-04-11T24:00:00Z",
                          "2023-04-11T10:00:00", "2023-04-11T10:00Z", "2023-04-11T10:00:00.Z", "2023-04-11X",
                          "2023-04-11T10:00:00+0200", "2023-04-11 ", "２023-04-11"})
    EXPECT_FALSE(parse_cutoff(bad)) << bad;
  EXPECT_TRUE(parse_cutoff("2024-02-29"));
  EXPECT_FALSE(parse_timestamp("2023-04-11"));
}

TEST(Cutoff, HttpDatesInAllThreeForms) {
  const Micros expected = 784111777LL * 1000000;
  EXPECT_EQ(parse_http_date("Sun, 06 Nov 1994 08:49:37 GMT"), expected);
  EXPECT_EQ(parse_http_date("Sunday, 06-Nov-94 08:49:37 GMT"), expected);
  EXPECT_EQ(parse_http_date("Sun Nov  6 08:49:37 1994"), expected);
  EXPECT_EQ(format_http_date(expected), "Sun, 06 Nov 1994 08:49:37 GMT");
  EXPECT_FALSE(parse_http_date("Sun, 06 Nov 1994 08:49:37 PST"));
  EXPECT_FALSE(parse_http_date("yesterday"));
}

TEST(Cutoff, MavenTimestamp) {
  EXPECT_EQ(format_maven_timestamp(*parse_timestamp("2023-04-11T07:08:09.5Z")), "20230411070809");
}

}  // namespace
}  // namespace capsule::proxy
