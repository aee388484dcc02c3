// Filename-to-version extraction and PEP 440 canonicalization, by hand over ASCII (no regex, no locale).
#include "proxy/pypi/version.h"

#include <algorithm>
#include <array>
#include <optional>
#include <vector>

#include "base/ascii.h"
#include "proxy/pypi/project_name.h"

namespace capsule::proxy::pypi {
namespace {

bool is_lower_alnum(char c) { return base::is_ascii_digit(c) || (c >= 'a' && c <= 'z'); }
bool is_version_separator(char c) { return c == '-' || c == '_' || c == '.'; }

bool ends_with_nocase(std::string_view text, std::string_view suffix) {
  return text.size() >= suffix.size() && base::ascii_lowercase(text.substr(text.size() - suffix.size())) == suffix;
}

std::vector<std::string_view> split(std::string_view text, char delimiter) {
  std::vector<std::string_view> parts;
  std::size_t start = 0;
  for (std::size_t end; (end = text.find(delimiter, start)) != std::string_view::npos; start = end + 1)
    parts.push_back(text.substr(start, end - start));
  parts.push_back(text.substr(start));
  return parts;
}

// What follows "name-" in `stem`, the name part matched against the project name; see the header.
std::string_view after_name(std::string_view stem, std::string_view project) {
  const std::string wanted = normalize_name(project);
  for (std::size_t dash = stem.find('-'); dash != std::string_view::npos; dash = stem.find('-', dash + 1))
    if (normalize_name(stem.substr(0, dash)) == wanted) return stem.substr(dash + 1);
  for (std::size_t dash = stem.find('-'); dash != std::string_view::npos; dash = stem.find('-', dash + 1))
    if (dash + 1 < stem.size() && base::is_ascii_digit(stem[dash + 1])) return stem.substr(dash + 1);
  return {};
}

// A left-to-right reader over lowercased version text for the PEP 440 grammar.
class Reader {
 public:
  explicit Reader(std::string_view text) : text_(text) {}

  bool done() const { return pos_ == text_.size(); }
  bool peek(char c) const { return pos_ < text_.size() && text_[pos_] == c; }
  bool peek_digit_after(char c) const {
    return peek(c) && pos_ + 1 < text_.size() && base::is_ascii_digit(text_[pos_ + 1]);
  }
  std::size_t mark() const { return pos_; }
  void reset(std::size_t mark) { pos_ = mark; }
  void skip() { ++pos_; }
  void skip_separator() {
    if (pos_ < text_.size() && is_version_separator(text_[pos_])) ++pos_;
  }
  bool word(std::string_view word) {
    if (text_.substr(pos_, word.size()) != word) return false;
    pos_ += word.size();
    return true;
  }
  // Digits with leading zeros dropped ("007" -> "7", "000" -> "0"); kept as text, so any length is fine.
  std::optional<std::string> number() {
    const std::size_t start = pos_;
    while (pos_ < text_.size() && base::is_ascii_digit(text_[pos_])) ++pos_;
    if (pos_ == start) return std::nullopt;
    std::string_view digits = text_.substr(start, pos_ - start);
    while (digits.size() > 1 && digits.front() == '0') digits.remove_prefix(1);
    return std::string(digits);
  }
  // "[-_.]? number", or "0" (and nothing consumed) when no number follows.
  std::string optional_number() {
    const std::size_t start = pos_;
    skip_separator();
    if (auto n = number()) return *n;
    pos_ = start;
    return "0";
  }
  std::string_view alnum_run() {
    const std::size_t start = pos_;
    while (pos_ < text_.size() && is_lower_alnum(text_[pos_])) ++pos_;
    return text_.substr(start, pos_ - start);
  }

 private:
  std::string_view text_;
  std::size_t pos_ = 0;
};

struct Spelling {
  std::string_view word;
  std::string_view canonical;
};

// Longer spellings first, so that "alpha" is not read as "a" followed by "lpha".
constexpr std::array<Spelling, 8> kPreSpellings{{{"alpha", "a"}, {"a", "a"}, {"beta", "b"}, {"b", "b"},
                                                 {"preview", "rc"}, {"pre", "rc"}, {"rc", "rc"}, {"c", "rc"}}};
constexpr std::array<std::string_view, 3> kPostSpellings{"post", "rev", "r"};

std::optional<std::string> parse_pep440(std::string_view text) {
  Reader in(text);
  if (in.peek('v')) in.skip();
  auto first = in.number();
  if (!first) return std::nullopt;
  std::string epoch = "0";
  if (in.peek('!')) {
    in.skip();
    epoch = *first;
    first = in.number();
    if (!first) return std::nullopt;
  }
  std::vector<std::string> release{*first};
  while (in.peek_digit_after('.')) {
    in.skip();
    release.push_back(*in.number());
  }
  while (release.size() > 1 && release.back() == "0") release.pop_back();

  std::string out = epoch == "0" ? "" : epoch + "!";
  for (std::size_t i = 0; i < release.size(); ++i) out += (i ? "." : "") + release[i];

  std::size_t mark = in.mark();
  in.skip_separator();
  bool matched = false;
  for (const auto& spelling : kPreSpellings) {
    if (!in.word(spelling.word)) continue;
    out += std::string(spelling.canonical) + in.optional_number();
    matched = true;
    break;
  }
  if (!matched) in.reset(mark);

  mark = in.mark();
  if (in.peek_digit_after('-')) {  // "1.0-1" is an implicit post-release
    in.skip();
    out += ".post" + *in.number();
  } else {
    in.skip_separator();
    matched = false;
    for (const auto word : kPostSpellings) {
      if (!in.word(word)) continue;
      out += ".post" + in.optional_number();
      matched = true;
      break;
    }
    if (!matched) in.reset(mark);
  }

  mark = in.mark();
  in.skip_separator();
  if (in.word("dev"))
    out += ".dev" + in.optional_number();
  else
    in.reset(mark);

  if (in.peek('+')) {
    in.skip();
    std::string local;
    do {
      const std::string_view part = in.alnum_run();
      if (part.empty()) return std::nullopt;
      std::string segment(part);
      if (segment.find_first_not_of("0123456789") == std::string::npos) {
        while (segment.size() > 1 && segment.front() == '0') segment.erase(0, 1);
      }
      local += (local.empty() ? "" : ".") + segment;
      if (in.done()) break;
      in.skip_separator();
    } while (true);
    out += "+" + local;
  }
  if (!in.done()) return std::nullopt;
  return out;
}

std::string_view trim_blanks(std::string_view text) {
  while (!text.empty() && (text.front() == ' ' || text.front() == '\t' || text.front() == '\n')) text.remove_prefix(1);
  while (!text.empty() && (text.back() == ' ' || text.back() == '\t' || text.back() == '\n')) text.remove_suffix(1);
  return text;
}

constexpr std::array<std::string_view, 6> kSdistExtensions{".tar.gz", ".tgz", ".tar.bz2", ".tar.xz", ".tar", ".zip"};

}  // namespace

std::string version_from_filename(std::string_view filename, std::string_view project) {
  if (ends_with_nocase(filename, ".whl")) {
    const auto parts = split(filename.substr(0, filename.size() - 4), '-');
    return parts.size() == 5 || parts.size() == 6 ? std::string(parts[1]) : "";
  }
  if (ends_with_nocase(filename, ".egg")) {
    const auto parts = split(filename.substr(0, filename.size() - 4), '-');
    return parts.size() >= 2 ? std::string(parts[1]) : "";
  }
  for (const auto extension : kSdistExtensions)
    if (ends_with_nocase(filename, extension))
      return std::string(after_name(filename.substr(0, filename.size() - extension.size()), project));
  if (ends_with_nocase(filename, ".exe") || ends_with_nocase(filename, ".msi")) {
    const std::string_view rest = after_name(filename.substr(0, filename.size() - 4), project);
    const std::string lowered = base::ascii_lowercase(rest);
    std::size_t end = std::min(lowered.find(".win"), lowered.find("-win"));
    if (end == std::string::npos) end = lowered.find("-py");
    return std::string(rest.substr(0, end));
  }
  return "";
}

std::string canonical_version(std::string_view version) {
  const std::string lowered = base::ascii_lowercase(trim_blanks(version));
  if (auto canonical = parse_pep440(lowered)) return *canonical;
  return lowered;
}

}  // namespace capsule::proxy::pypi
