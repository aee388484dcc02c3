// http::status_for, the one error code -> HTTP status table: a few codes of each status group, and 500 for a
// code the table does not know; error_code_of, the code an API edge answers for an exception.
#include <gtest/gtest.h>

#include "http/error_status.h"

#include <cerrno>
#include <filesystem>
#include <stdexcept>

#include "base/error.h"

namespace capsule::http {
namespace {

TEST(HttpErrorStatus, CodesMapToTheirStatusGroup) {
  EXPECT_EQ(status_for("bad_request"), 400u);
  EXPECT_EQ(status_for("invalid_spec"), 400u);
  EXPECT_EQ(status_for("bad_upstream_url"), 400u);
  EXPECT_EQ(status_for("forbidden"), 403u);
  EXPECT_EQ(status_for("cutoff_mismatch"), 403u);
  EXPECT_EQ(status_for("not_found"), 404u);
  EXPECT_EQ(status_for("image_not_found"), 404u);
  EXPECT_EQ(status_for("method_not_allowed"), 405u);
  EXPECT_EQ(status_for("not_acceptable"), 406u);
  EXPECT_EQ(status_for("request_timeout"), 408u);
  EXPECT_EQ(status_for("conflict"), 409u);
  EXPECT_EQ(status_for("run_active"), 409u);
  EXPECT_EQ(status_for("payload_too_large"), 413u);
  EXPECT_EQ(status_for("queue_full"), 429u);
  EXPECT_EQ(status_for("headers_too_large"), 431u);
  EXPECT_EQ(status_for("internal_error"), 500u);
  EXPECT_EQ(status_for("log_unreadable"), 500u);
  EXPECT_EQ(status_for("not_implemented"), 501u);
  EXPECT_EQ(status_for("bad_upstream"), 502u);
  EXPECT_EQ(status_for("hash_mismatch"), 502u);
  EXPECT_EQ(status_for("draining"), 503u);
  EXPECT_EQ(status_for("too_many_connections"), 503u);
  EXPECT_EQ(status_for("upstream_timeout"), 504u);
  EXPECT_EQ(status_for("http_version_not_supported"), 505u);
  EXPECT_EQ(status_for("insufficient_storage"), 507u);
}

// What an API edge answers for an exception: a full filesystem is 507 whatever step met it.
TEST(HttpErrorStatus, AFullFilesystemIsInsufficientStorageWhateverStepMetIt) {
  EXPECT_EQ(error_code_of(base::Error(base::Cause{"write", "/x", ENOSPC, ""})), "insufficient_storage");
  EXPECT_EQ(error_code_of(base::Error(base::Cause{"copy", "/x", EDQUOT, ""})), "insufficient_storage");
  EXPECT_EQ(error_code_of(std::filesystem::filesystem_error("copy", std::make_error_code(std::errc::no_space_on_device))),
            "insufficient_storage");
  EXPECT_EQ(error_code_of(base::Error(base::Cause{"write", "/x", EIO, ""})), "internal_error");
  EXPECT_EQ(error_code_of(base::Error(base::Cause{"open", "/x", ENOSPC, ""}, "not_found")), "not_found");  // its own code
  EXPECT_EQ(error_code_of(base::Error("conflict", "taken")), "conflict");
  EXPECT_EQ(error_code_of(std::runtime_error("other")), "internal_error");
}

TEST(HttpErrorStatus, UnknownCodesAre500) {
  EXPECT_EQ(status_for("no_such_code"), 500u);
  EXPECT_EQ(status_for(""), 500u);
  EXPECT_EQ(status_for("NOT_FOUND"), 500u) << "codes are matched exactly";
}

}  // namespace
}  // namespace capsule::http
