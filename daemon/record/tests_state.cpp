// tests.state from what collect.junit found and how the command ended, and the compile-failure markers of
// Maven and javac searched for in the output the record keeps.
#include "daemon/record/tests_state.h"

#include <cctype>

namespace capsule::daemon {

std::string tests_state(const TestCounts& counts, bool command_succeeded) {
  if (!counts.files.empty()) return "reports";
  if (counts.reports_not_read > 0) return "unreadable";  // search problems alone matched nothing
  return command_succeeded ? "none_found" : "not_run";
}

bool shows_compile_error(std::string_view output) {
  if (output.find("COMPILATION ERROR") != std::string_view::npos) return true;
  if (output.find("Compilation failure") != std::string_view::npos) return true;
  // javac: "<file>.java:<line>: error: ".
  constexpr std::string_view kError = ": error: ";
  for (std::size_t at = output.find(kError); at != std::string_view::npos; at = output.find(kError, at + 1)) {
    std::size_t digits = at;
    while (digits > 0 && std::isdigit(static_cast<unsigned char>(output[digits - 1])) != 0) --digits;
    if (digits < at && output.substr(0, digits).ends_with(".java:")) return true;
  }
  return false;
}

}  // namespace capsule::daemon
