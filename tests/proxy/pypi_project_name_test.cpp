// PEP 503 name normalization and the PEP 508 name grammar.
#include "proxy/pypi/project_name.h"

#include <gtest/gtest.h>

namespace capsule::proxy::pypi {
namespace {

TEST(ProjectName, NormalizesLikePep503) {
  // The spellings PEP 503 lists as equivalent, plus runs of mixed separators.
  for (const char* spelling : {"friendly-bard", "Friendly-Bard", "FRIENDLY-BARD", "friendly.bard", "friendly_bard",
                               "friendly--bard", "FrIeNdLy-._.-bArD"})
    EXPECT_EQ(normalize_name(spelling), "friendly-bard") << spelling;
  EXPECT_EQ(normalize_name("Django"), "django");
  EXPECT_EQ(normalize_name("zope.interface"), "zope-interface");
  EXPECT_EQ(normalize_name("typing_extensions"), "typing-extensions");
  EXPECT_EQ(normalize_name("a"), "a");
  EXPECT_EQ(normalize_name(""), "");
}

TEST(ProjectName, ValidNamesFollowPep508) {
  for (const char* good : {"a", "Z", "0", "numpy", "zope.interface", "typing_extensions", "Friendly-Bard", "a-b_c.d",
                           "x--y", "3to2"})
    EXPECT_TRUE(is_valid_name(good)) << good;
  for (const char* bad : {"", "-a", "a-", ".a", "a_", "a b", "a/b", "a%2Fb", "..", "é", "a\nb", "a+b"})
    EXPECT_FALSE(is_valid_name(bad)) << bad;
}

}  // namespace
}  // namespace capsule::proxy::pypi
