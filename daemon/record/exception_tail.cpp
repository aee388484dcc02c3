// Reading a Python traceback or a Java uncaught-exception report off the end of a run's stderr, bounded:
// a window of the tail's end, a type of identifier characters only, a message cut at a character boundary.
#include "daemon/record/exception_tail.h"

#include <vector>

#include "sandbox/result_json.h"

namespace capsule::daemon {
namespace {

constexpr std::string_view kPythonHeader = "Traceback (most recent call last):";
constexpr std::string_view kJavaHeader = "Exception in thread \"";
constexpr std::string_view kJavaCausedBy = "Caused by: ";

// The window's lines without their "\n" (or "\r\n"); trailing blank lines dropped. When the window cuts the
// tail, its first line may start mid-line and is blanked, never read as a header.
std::vector<std::string_view> window_lines(std::string_view tail) {
  const bool cut = tail.size() > kExceptionWindowBytes;
  if (cut) tail.remove_prefix(tail.size() - kExceptionWindowBytes);
  std::vector<std::string_view> lines;
  std::size_t start = 0;
  while (start <= tail.size()) {
    std::size_t end = tail.find('\n', start);
    if (end == std::string_view::npos) end = tail.size();
    std::string_view line = tail.substr(start, end - start);
    if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
    lines.push_back(line);
    start = end + 1;
  }
  while (!lines.empty() && lines.back().find_first_not_of(" \t") == std::string_view::npos) lines.pop_back();
  if (cut && !lines.empty()) lines.front() = {};
  return lines;
}

// A dotted name of ASCII identifier characters ('$' for Java's nested classes), not starting or ending with
// a dot, of at most kMaxExceptionTypeBytes.
bool is_type_name(std::string_view name) {
  if (name.empty() || name.size() > kMaxExceptionTypeBytes || name.front() == '.' || name.back() == '.') return false;
  for (const char c : name) {
    const bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' ||
                    c == '.' || c == '$';
    if (!ok) return false;
  }
  return true;
}

// "Type: message" or "Type": the exception line both languages print; nullopt when `line` is not one.
std::optional<TailException> exception_line(std::string_view line, const char* language) {
  const std::size_t colon = line.find(": ");
  const std::string_view type = colon == std::string_view::npos ? line : line.substr(0, colon);
  if (!is_type_name(type)) return std::nullopt;
  TailException found;
  found.language = language;
  found.type = std::string(type);
  if (colon != std::string_view::npos) found.message = std::string(line.substr(colon + 2));
  return found;
}

// The message's further lines (an exception's text may hold newlines), then the cut to its ceiling.
void finish_message(TailException& found, const std::vector<std::string_view>& more) {
  for (const std::string_view line : more) {
    if (found.message.size() > kMaxExceptionMessageBytes) break;
    found.message += '\n';
    found.message += line;
  }
  if (found.message.size() > kMaxExceptionMessageBytes) {
    found.message.resize(kMaxExceptionMessageBytes);
    found.message_truncated = true;
  }
  std::string text = sandbox::to_valid_utf8(found.message);
  // A cut through a character leaves one U+FFFD at the end: drop it rather than report a byte never written.
  constexpr std::string_view kReplacement = "\xEF\xBF\xBD";
  if (found.message_truncated && text.size() >= kReplacement.size() &&
      std::string_view(text).substr(text.size() - kReplacement.size()) == kReplacement)
    text.resize(text.size() - kReplacement.size());
  found.message = std::move(text);
}

// The index of the last line `is_header` accepts, or lines.size().
template <typename Predicate>
std::size_t last_header(const std::vector<std::string_view>& lines, Predicate is_header) {
  for (std::size_t i = lines.size(); i-- > 0;)
    if (is_header(lines[i])) return i;
  return lines.size();
}

std::optional<TailException> python_exception(const std::vector<std::string_view>& lines, std::size_t header) {
  if (header == lines.size()) return std::nullopt;
  std::size_t at = header + 1;
  while (at < lines.size() && !lines[at].empty() && lines[at].front() == ' ') ++at;  // the frames
  if (at == header + 1 || at == lines.size()) return std::nullopt;
  auto found = exception_line(lines[at], "python");
  if (!found) return std::nullopt;
  finish_message(*found, {lines.begin() + static_cast<std::ptrdiff_t>(at + 1), lines.end()});
  return found;
}

std::optional<TailException> java_exception(const std::vector<std::string_view>& lines, std::size_t header) {
  if (header == lines.size()) return std::nullopt;
  // The thread's name is quoted unescaped and may hold '" ': the first end of it after which a type follows.
  const std::string_view first = lines[header];
  std::optional<TailException> found;
  for (std::size_t name_end = first.find("\" ", kJavaHeader.size()); !found && name_end != std::string_view::npos;
       name_end = first.find("\" ", name_end + 1)) {
    found = exception_line(first.substr(name_end + 2), "java");
  }
  if (!found) return std::nullopt;
  // The top exception's message runs until its stack; after that only stack lines and "Caused by:" blocks
  // (each with its own message lines) may follow, or this report is not what ended stderr.
  std::vector<std::string_view> message_lines;
  bool top_message = true, in_message = true;
  for (std::size_t i = header + 1; i < lines.size(); ++i) {
    const std::string_view line = lines[i];
    if (!line.empty() && line.front() == '\t') {
      top_message = in_message = false;
    } else if (line.substr(0, kJavaCausedBy.size()) == kJavaCausedBy) {
      top_message = false;
      in_message = true;
    } else if (top_message) {
      message_lines.push_back(line);
    } else if (!in_message) {
      return std::nullopt;
    }
  }
  if (top_message) return std::nullopt;  // no stack at all: not the JVM's report
  finish_message(*found, message_lines);
  return found;
}

}  // namespace

nlohmann::json TailException::to_json() const {
  nlohmann::json j = {{"language", language}, {"type", type}, {"message", message}};
  if (message_truncated) j["message_truncated"] = true;
  return j;
}

std::optional<TailException> exception_ending(std::string_view stderr_tail) {
  const std::vector<std::string_view> lines = window_lines(stderr_tail);
  const std::size_t python = last_header(lines, [](std::string_view line) { return line == kPythonHeader; });
  const std::size_t java = last_header(lines, [](std::string_view line) {
    return line.substr(0, kJavaHeader.size()) == kJavaHeader;
  });
  // The report that starts last is the one that can end stderr.
  if (python != lines.size() && (java == lines.size() || python > java)) return python_exception(lines, python);
  return java_exception(lines, java);
}

}  // namespace capsule::daemon
