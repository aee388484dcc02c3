// Tests of base64_encode/base64_decode: every byte value and padding length round-trips, and text that is not
// strict base64 (bad length, foreign characters, misplaced padding, quotes) is refused rather than guessed at.
#include <gtest/gtest.h>

#include <string>

#include "base/base64.h"

namespace capsule::base {
namespace {

TEST(Base64, RoundTripsEveryByteValueAndEveryPadding) {
  std::string all;
  for (int i = 0; i < 256; ++i) all += static_cast<char>(i);
  for (std::size_t n = 0; n <= all.size(); ++n) {
    const std::string bytes = all.substr(all.size() - n);
    const std::string text = base64_encode(bytes);
    EXPECT_EQ(text.size(), (n + 2) / 3 * 4);
    EXPECT_EQ(base64_decode(text), bytes) << n;
  }
  EXPECT_EQ(base64_encode("\xF0\x9F\x98\x80"), "8J+YgA==");
  EXPECT_EQ(base64_decode("8J+YgA=="), "\xF0\x9F\x98\x80");
}

TEST(Base64, RejectsWhatIsNotBase64) {
  EXPECT_FALSE(base64_decode("abc"));
  EXPECT_FALSE(base64_decode("ab!d"));
  EXPECT_FALSE(base64_decode("a=bc"));
  EXPECT_FALSE(base64_decode("\"QQ==\""));
}

}  // namespace
}  // namespace capsule::base
