// The exception that ended a run, read from the end of its stderr: a Python traceback or a Java uncaught
// exception ("Exception in thread ..."), so a harness can tell a crash's class without parsing the tail itself.
#pragma once

#include <cstddef>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>

namespace capsule::daemon {

// Only this much of the stderr tail's end is looked at; the type and the message are cut to these sizes.
constexpr std::size_t kExceptionWindowBytes = 64u << 10;
constexpr std::size_t kMaxExceptionTypeBytes = 256;
constexpr std::size_t kMaxExceptionMessageBytes = 1024;

struct TailException {
  std::string language;  // "python" or "java"
  std::string type;      // "json.decoder.JSONDecodeError", "java.lang.IllegalStateException"
  std::string message;   // "" when the exception has none; valid UTF-8, at most kMaxExceptionMessageBytes
  bool message_truncated = false;

  nlohmann::json to_json() const;
};

// The exception whose report ends `stderr_tail` (raw bytes), if one does. Python: the last
// "Traceback (most recent call last):" whose indented frames are followed by a "Type: message" line, the
// message running to the end (tracebacks chained with "During handling..." report the last one, the one that
// ended the program). Java: the last `Exception in thread "NAME" Type: message` whose stack ("\tat", "\t...",
// "Caused by:", "\tSuppressed:") runs to the end; the top exception is reported, not the deepest "Caused by".
std::optional<TailException> exception_ending(std::string_view stderr_tail);

}  // namespace capsule::daemon
