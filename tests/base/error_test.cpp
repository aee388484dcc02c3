// base::Error and its Cause: how a cause reads, which code an error carries, and what the throw helpers throw,
// since every module's errors (and so every message a client sees) are built on them.
#include "base/error.h"

#include <gtest/gtest.h>

#include <cerrno>
#include <cstring>

namespace capsule::base {
namespace {

TEST(Cause, DescribeJoinsStepPathErrnoAndDetail) {
  EXPECT_EQ((Cause{"mount", "/proc", EPERM, "mounting proc"}).describe(),
            std::string("mount /proc: ") + std::strerror(EPERM) + " (mounting proc)");
  EXPECT_EQ((Cause{"blob", "sha256:ab", 0, "truncated"}).describe(), "blob sha256:ab: truncated");
  EXPECT_EQ((Cause{"open", "/x", ENOENT, ""}).describe(), std::string("open /x: ") + std::strerror(ENOENT));
  EXPECT_EQ((Cause{"spec", "", 0, "no argv"}).describe(), "spec: no argv");
  EXPECT_EQ((Cause{"cgroup", "", 0, ""}).describe(), "cgroup");
}

TEST(Error, FromACauseIsInternalUnlessGivenACode) {
  const Error internal(Cause{"ledger", "/db", 0, "locked"});
  EXPECT_EQ(internal.code(), "internal_error");
  EXPECT_STREQ(internal.what(), "ledger /db: locked");
  EXPECT_EQ(internal.cause().step, "ledger");
  EXPECT_EQ(internal.cause().path, "/db");
  EXPECT_EQ(internal.cause().detail, "locked");

  const Error coded(Cause{"cutoff", "2020-13-01", 0, "not a date"}, "bad_cutoff");
  EXPECT_EQ(coded.code(), "bad_cutoff");
  EXPECT_STREQ(coded.what(), "cutoff 2020-13-01: not a date");
}

TEST(Error, ACallerFacingMessageIsTheWholeStory) {
  const Error error("not_found", "no run with id r-1");
  EXPECT_EQ(error.code(), "not_found");
  EXPECT_STREQ(error.what(), "no run with id r-1");
  EXPECT_EQ(error.cause().detail, "no run with id r-1");
  EXPECT_TRUE(error.cause().step.empty());
}

TEST(Error, AWrittenMessageKeepsItsCause) {
  const Error error(Cause{"connect", "/run/capsule.sock", ENOENT, ""}, "connect_failed",
                    "cannot connect to capsuled at /run/capsule.sock");
  EXPECT_STREQ(error.what(), "cannot connect to capsuled at /run/capsule.sock");
  EXPECT_EQ(error.code(), "connect_failed");
  EXPECT_EQ(error.cause().errno_value, ENOENT);
  EXPECT_EQ(error.cause().path, "/run/capsule.sock");
}

TEST(ThrowHelpers, ThrowErrnoKeepsTheCurrentErrno) {
  errno = EACCES;
  try {
    throw_errno("open", "/secret", "reading the key");
    FAIL() << "throw_errno returned";
  } catch (const Error& e) {
    EXPECT_EQ(e.cause().errno_value, EACCES);
    EXPECT_EQ(e.code(), "internal_error");
    EXPECT_EQ(std::string(e.what()), std::string("open /secret: ") + std::strerror(EACCES) + " (reading the key)");
  }
}

TEST(ThrowHelpers, ThrowErrorHasNoErrno) {
  errno = EIO;
  try {
    throw_error("diff", "/upper", "not a directory");
    FAIL() << "throw_error returned";
  } catch (const Error& e) {
    EXPECT_EQ(e.cause().errno_value, 0);
    EXPECT_STREQ(e.what(), "diff /upper: not a directory");
  }
}

}  // namespace
}  // namespace capsule::base
