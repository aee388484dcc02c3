// The collectors' shared helpers: quoting hostile text for error details (bounded, escaped, cut on a UTF-8
// boundary).
#include "daemon/record/workspace_glob.h"

#include <gtest/gtest.h>

namespace capsule::daemon {
namespace {

TEST(QuoteExcerpt, KeepsShortTextAndEscapesControlsQuotesAndBackslashes) {
  EXPECT_EQ(quote_excerpt("12x"), "12x");
  EXPECT_EQ(quote_excerpt("a\"b\\c\nd"), "a\\x22b\\x5cc\\x0ad");
}

TEST(QuoteExcerpt, CutsLongTextOnAUtf8Boundary) {
  EXPECT_EQ(quote_excerpt(std::string(1000, 'a')), std::string(64, 'a') + "...");
  const std::string euros = std::string(63, 'a') + "\xE2\x82\xAC\xE2\x82\xAC";  // 63 + two 3-byte characters
  EXPECT_EQ(quote_excerpt(euros), std::string(63, 'a') + "...");
  EXPECT_EQ(quote_excerpt(euros, 66), std::string(63, 'a') + "\xE2\x82\xAC...");
}

}  // namespace
}  // namespace capsule::daemon
