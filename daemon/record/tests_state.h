// Whether the tests of a run ran at all: the record's tests.state and tests.compile_error, so a harness tells a
// build that broke before its tests ("not_run", compile_error) from a project without tests ("none_found").
#pragma once

#include <string>
#include <string_view>

#include "daemon/record/junit.h"

namespace capsule::daemon {

// "reports": at least one report was read; "unreadable": reports matched but none could be read
// (TestCounts::reports_not_read; a directory the search could not enter is no report);
// "none_found": no report matched and the command succeeded; "not_run": no report matched and the command
// did not succeed (it failed, timed out, was killed, or never started).
std::string tests_state(const TestCounts& counts, bool command_succeeded);

// Whether output shows a compilation failure: Maven's "COMPILATION ERROR" / "Compilation failure" or a javac
// diagnostic ("Foo.java:12: error:").
bool shows_compile_error(std::string_view output);

}  // namespace capsule::daemon
