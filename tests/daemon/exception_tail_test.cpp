// The exception that ends stderr: real Python 3.11 and JDK 17 reports (tests/daemon/fixtures/exceptions),
// reports that do not end stderr, and hostile tails (long types and messages, invalid UTF-8, huge tails).
#include "daemon/record/exception_tail.h"

#include <gtest/gtest.h>

#include <fstream>
#include <sstream>

#include "daemon/record/run_record.h"
#include "spec/limits.h"
#include "tests/support/test_support.h"

namespace capsule::daemon {
namespace {

std::string exception_fixture(const std::string& name) {
  std::ifstream file(std::string(CAPSULE_SOURCE_DIR) + "/tests/daemon/fixtures/exceptions/" + name, std::ios::binary);
  std::ostringstream text;
  text << file.rdbuf();
  EXPECT_FALSE(text.str().empty()) << name;
  return text.str();
}

TEST(ExceptionTail, PythonTracebacksGiveTheLastExceptionsTypeAndMessage) {
  auto found = exception_ending(exception_fixture("python_json_decode.txt"));
  ASSERT_TRUE(found);
  EXPECT_EQ(found->language, "python");
  EXPECT_EQ(found->type, "json.decoder.JSONDecodeError");
  EXPECT_EQ(found->message, "Expecting property name enclosed in double quotes: line 1 column 2 (char 1)");

  found = exception_ending(exception_fixture("python_chained.txt"));
  ASSERT_TRUE(found);
  EXPECT_EQ(found->type, "ValueError") << "the exception that ended the program, not its cause (KeyError)";
  EXPECT_EQ(found->message, "wrapped: \xC3\xBCn\xC3\xAF" "code");

  found = exception_ending(exception_fixture("python_multiline.txt"));
  ASSERT_TRUE(found);
  EXPECT_EQ(found->type, "MyErr");
  EXPECT_EQ(found->message, "line one\nline two");

  found = exception_ending(exception_fixture("python_no_message.txt"));
  ASSERT_TRUE(found);
  EXPECT_EQ(found->type, "RuntimeError");
  EXPECT_EQ(found->message, "");
  EXPECT_EQ(found->to_json(), nlohmann::json({{"language", "python"}, {"type", "RuntimeError"}, {"message", ""}}));
}

TEST(ExceptionTail, JavaReportsGiveTheTopException) {
  auto found = exception_ending("Picked up JAVA_TOOL_OPTIONS: -Xss4m\n" + exception_fixture("java_caused_by.txt"));
  ASSERT_TRUE(found);
  EXPECT_EQ(found->language, "java");
  EXPECT_EQ(found->type, "java.lang.RuntimeException") << "the top exception, not the Caused by";
  EXPECT_EQ(found->message, "outer wrapper");

  found = exception_ending(exception_fixture("java_npe.txt"));
  ASSERT_TRUE(found);
  EXPECT_EQ(found->type, "java.lang.NullPointerException");
  EXPECT_EQ(found->message, "Cannot invoke \"Object.toString()\" because \"<local1>\" is null");

  found = exception_ending("Exception in thread \"pool-1 \" worker\" a.B$Inner: two\nlines\n\tat a.B.run(B.java:3)\n"
                           "Caused by: c.D: deep\nmore of deep\n\t... 1 more\n");
  ASSERT_TRUE(found);
  EXPECT_EQ(found->type, "a.B$Inner");
  EXPECT_EQ(found->message, "two\nlines");
}

TEST(ExceptionTail, NothingWhenNoReportEndsStderr) {
  EXPECT_FALSE(exception_ending(""));
  EXPECT_FALSE(exception_ending("x\n")) << "SystemExit(\"x\") prints only its message";
  EXPECT_FALSE(exception_ending(exception_fixture("java_npe.txt") + "[ERROR] BUILD FAILURE\n"))
      << "a line after the stack: the report is not what ended stderr";
  EXPECT_FALSE(exception_ending("Exception in thread \"main\" java.lang.Error: no stack\n"));
  EXPECT_FALSE(exception_ending("Traceback (most recent call last):\n  File \"a.py\", line 1\n"));
  EXPECT_FALSE(exception_ending("Traceback (most recent call last):\nnot a type: x\n"));
  EXPECT_FALSE(exception_ending("Traceback (most recent call last):\n  File \"a.py\"\nbad type!: x\n"));
  // A traceback printed by a program that then went on: a Java report after it is what ends stderr.
  const auto found = exception_ending(exception_fixture("python_no_message.txt") + exception_fixture("java_npe.txt"));
  ASSERT_TRUE(found);
  EXPECT_EQ(found->language, "java");
}

TEST(ExceptionTail, HostileTailsAreBounded) {
  const std::string frames = "Traceback (most recent call last):\n  File \"a.py\", line 1, in <module>\n";
  EXPECT_FALSE(exception_ending(frames + std::string(kMaxExceptionTypeBytes + 1, 'E') + ": x\n"));
  EXPECT_TRUE(exception_ending(frames + std::string(kMaxExceptionTypeBytes, 'E') + ": x\n"));

  // A message of 2-byte characters cut at an odd byte count: whole characters only, flagged.
  std::string long_message;
  for (int i = 0; i < 1000; ++i) long_message += "\xC3\xA9";
  auto found = exception_ending("x\n" + frames + "ValueError: a" + long_message + "\n");
  ASSERT_TRUE(found);
  EXPECT_TRUE(found->message_truncated);
  EXPECT_EQ(found->message, "a" + long_message.substr(0, kMaxExceptionMessageBytes - 2));
  EXPECT_EQ(found->to_json()["message_truncated"], true);

  found = exception_ending(frames + "ValueError: bad \xFF\xFE bytes\n");
  ASSERT_TRUE(found);
  EXPECT_EQ(found->message, "bad \xEF\xBF\xBD\xEF\xBF\xBD bytes") << "invalid bytes become U+FFFD";
  EXPECT_NO_THROW((void)found->to_json().dump());

  // Many message lines stop being read once the ceiling is passed; a report past the window is not seen.
  found = exception_ending(frames + "ValueError: x\n" + std::string(60000, '\n') + "y\n");
  ASSERT_TRUE(found);
  EXPECT_LE(found->message.size(), kMaxExceptionMessageBytes);
  EXPECT_FALSE(exception_ending(frames + "ValueError: x\n" + std::string(kExceptionWindowBytes, 'y') + "\n"));
  found = exception_ending(std::string(1 << 20, 'z') + "\n" + exception_fixture("python_json_decode.txt"));
  ASSERT_TRUE(found);
  EXPECT_EQ(found->type, "json.decoder.JSONDecodeError");
}

TEST(ExceptionTail, TheRecordCarriesItInResult) {
  const spec::RunSpec spec = spec::parse_run_spec(nlohmann::json{{"argv", {"python3"}}}, spec::default_limit_policy());
  sandbox::Result result;
  result.status = sandbox::Status::kFailed;
  result.exit_code = 1;
  result.stderr_capture.head = result.stderr_capture.tail = exception_fixture("python_json_decode.txt");
  EXPECT_EQ(build_record(spec, result, {})["result"]["exception"]["type"], "json.decoder.JSONDecodeError");
  result.stderr_capture.head = result.stderr_capture.tail = "plain failure\n";
  EXPECT_FALSE(build_record(spec, result, {})["result"].contains("exception"));
}

}  // namespace
}  // namespace capsule::daemon
