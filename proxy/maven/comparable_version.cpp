// Maven's version order. A version parses into nested lists where every sub-list is the last item of its
// parent, so it is held as a chain of levels and compared with loops (no recursion, whatever the input length).
#include "proxy/maven/comparable_version.h"

#include <algorithm>
#include <array>
#include <cstddef>
#include <string>
#include <utility>
#include <vector>

#include "base/ascii.h"

namespace capsule::proxy::maven {
namespace {

// A number (its digits without leading zeros; "" is zero) or a qualifier (lower case, aliases resolved).
struct Scalar {
  bool number = false;
  std::string text;

  bool is_null() const { return text.empty(); }  // 0 or the release qualifier ""
};

// levels[0] is the top list; levels[k + 1], when present, is the sub-list that ends levels[k].
struct ParsedVersion {
  std::vector<std::vector<Scalar>> levels;

  bool has_child(std::size_t level) const { return level + 1 < levels.size(); }
};

Scalar make_number(std::string_view digits) {
  std::size_t first = 0;
  while (first < digits.size() && digits[first] == '0') ++first;
  return Scalar{true, std::string(digits.substr(first))};
}

// followed_by_digit: "a1" is alpha-1, "b2" beta-2, "m3" milestone-3; a bare "a" stays an unknown qualifier.
Scalar make_qualifier(std::string_view text, bool followed_by_digit) {
  std::string value(text);
  if (followed_by_digit && value.size() == 1) {
    if (value == "a") value = "alpha";
    if (value == "b") value = "beta";
    if (value == "m") value = "milestone";
  }
  if (value == "ga" || value == "final" || value == "release") value.clear();
  if (value == "cr") value = "rc";
  return Scalar{false, std::move(value)};
}

ParsedVersion parse(std::string_view raw) {
  std::string version(raw.size(), '\0');
  for (std::size_t i = 0; i < raw.size(); ++i) version[i] = base::ascii_lower(raw[i]);
  const std::string_view text(version);

  ParsedVersion parsed;
  parsed.levels.emplace_back();
  const auto current = [&parsed]() -> std::vector<Scalar>& { return parsed.levels.back(); };
  const auto open_sub_list = [&parsed] { parsed.levels.emplace_back(); };
  const auto token = [](bool digits, std::string_view part) {
    return digits ? make_number(part) : make_qualifier(part, false);
  };

  bool in_digits = false;
  std::size_t start = 0;
  for (std::size_t i = 0; i < text.size(); ++i) {
    const char c = text[i];
    if (c == '.' || c == '-') {
      current().push_back(i == start ? Scalar{true, ""} : token(in_digits, text.substr(start, i - start)));
      start = i + 1;
      if (c == '-') open_sub_list();
    } else if (base::is_ascii_digit(c)) {
      if (!in_digits && i > start) {
        // A qualifier after a '.' sorts like one after '-' ("1.0.0.X1" == "1.0.0-X1").
        if (!current().empty()) open_sub_list();
        current().push_back(make_qualifier(text.substr(start, i - start), true));
        start = i;
        open_sub_list();
      }
      in_digits = true;
    } else {
      if (in_digits && i > start) {
        current().push_back(make_number(text.substr(start, i - start)));
        start = i;
        open_sub_list();
      }
      in_digits = false;
    }
  }
  if (text.size() > start) {
    if (!in_digits && !current().empty()) open_sub_list();
    current().push_back(token(in_digits, text.substr(start)));
  }

  // Deepest first: drop trailing null items (0, "", an empty sub-list); a non-empty sub-list does not stop the
  // trimming of the nulls before it ("1.0-x" is [1, [x]]).
  for (std::size_t level = parsed.levels.size(); level-- > 0;) {
    auto& items = parsed.levels[level];
    while (!items.empty() && items.back().is_null()) items.pop_back();
    if (level > 0 && items.empty() && !parsed.has_child(level)) parsed.levels.pop_back();
  }
  return parsed;
}

constexpr std::array<std::string_view, 7> kKnownQualifiers{"alpha", "beta", "milestone", "rc", "snapshot", "", "sp"};
constexpr std::string_view kReleaseKey = "5";  // the key of "" below

// Known qualifiers map to their rank ("0".."6"); unknown ones to "7-<name>", after every known one.
std::string qualifier_key(const std::string& qualifier) {
  for (std::size_t i = 0; i < kKnownQualifiers.size(); ++i)
    if (kKnownQualifiers[i] == qualifier) return std::to_string(i);
  return std::to_string(kKnownQualifiers.size()) + "-" + qualifier;
}

int sign(int value) { return (value > 0) - (value < 0); }

int compare_numbers(const std::string& a, const std::string& b) {
  if (a.size() != b.size()) return a.size() < b.size() ? -1 : 1;
  return sign(a.compare(b));
}

int compare_scalars(const Scalar& a, const Scalar& b) {
  if (a.number && b.number) return compare_numbers(a.text, b.text);
  if (a.number != b.number) return a.number ? 1 : -1;  // 1.1 > 1-sp
  return sign(qualifier_key(a.text).compare(qualifier_key(b.text)));
}

// An item against a missing one (the other list ran out): 1.0 == 1, 1.1 > 1, 1-rc < 1, 1-sp > 1.
int compare_scalar_to_nothing(const Scalar& a) {
  if (a.number) return a.is_null() ? 0 : 1;
  return sign(qualifier_key(a.text).compare(kReleaseKey));
}

// The rest of a list (items from `index` of `level`, then its sub-lists) against nothing: the first item that
// is not null decides.
int compare_rest_to_nothing(const ParsedVersion& version, std::size_t level, std::size_t index) {
  for (; level < version.levels.size(); ++level, index = 0) {
    const auto& items = version.levels[level];
    for (; index < items.size(); ++index)
      if (const int result = compare_scalar_to_nothing(items[index])) return result;
  }
  return 0;
}

int compare_parsed(const ParsedVersion& a, const ParsedVersion& b) {
  for (std::size_t level = 0;; ++level) {
    const auto& left = a.levels[level];
    const auto& right = b.levels[level];
    const std::size_t common = std::min(left.size(), right.size());
    for (std::size_t i = 0; i < common; ++i)
      if (const int result = compare_scalars(left[i], right[i])) return result;

    // Past the common items each side holds more scalars, its sub-list, or nothing (at most one side has more
    // scalars).
    const bool left_child = a.has_child(level);
    const bool right_child = b.has_child(level);
    if (left.size() > common) {
      if (right_child) return left[common].number ? 1 : -1;  // 1.1 > 1-1, 1.any < 1-1
      return compare_rest_to_nothing(a, level, common);
    }
    if (right.size() > common) {
      if (left_child) return right[common].number ? -1 : 1;
      return -compare_rest_to_nothing(b, level, common);
    }
    if (left_child && right_child) continue;  // both sub-lists: compare them
    if (left_child) return compare_rest_to_nothing(a, level + 1, 0);
    if (right_child) return -compare_rest_to_nothing(b, level + 1, 0);
    return 0;
  }
}

}  // namespace

int compare_versions(std::string_view a, std::string_view b) { return compare_parsed(parse(a), parse(b)); }

void sort_versions(std::vector<std::string>& versions) {
  const std::size_t count = versions.size();
  std::vector<ParsedVersion> parsed;
  parsed.reserve(count);
  for (const std::string& version : versions) parsed.push_back(parse(version));
  const auto before = [&](std::size_t a, std::size_t b) {
    const int order = compare_parsed(parsed[a], parsed[b]);
    return order != 0 ? order < 0 : versions[a] < versions[b];
  };

  // Bottom-up merge of index runs of width 1, 2, 4...; a right item goes first only when strictly before.
  std::vector<std::size_t> order(count);
  for (std::size_t i = 0; i < count; ++i) order[i] = i;
  std::vector<std::size_t> merged(count);
  for (std::size_t width = 1; width < count; width *= 2) {
    for (std::size_t low = 0; low < count; low += 2 * width) {
      const std::size_t middle = std::min(low + width, count);
      const std::size_t high = std::min(low + 2 * width, count);
      std::size_t left = low, right = middle, out = low;
      while (left < middle && right < high)
        merged[out++] = before(order[right], order[left]) ? order[right++] : order[left++];
      while (left < middle) merged[out++] = order[left++];
      while (right < high) merged[out++] = order[right++];
    }
    order.swap(merged);
  }

  std::vector<std::string> sorted;
  sorted.reserve(count);
  for (const std::size_t index : order) sorted.push_back(std::move(versions[index]));
  versions = std::move(sorted);
}

std::string canonical_version(std::string_view version) {
  const ParsedVersion parsed = parse(version);
  // Built from the deepest level outwards: a sub-list is joined with '-', other items with '.'.
  std::string text;
  for (std::size_t level = parsed.levels.size(); level-- > 0;) {
    std::string line;
    for (const Scalar& item : parsed.levels[level]) {
      if (!line.empty()) line += '.';
      line += (item.number && item.text.empty()) ? "0" : item.text;
    }
    if (parsed.has_child(level)) {
      if (!line.empty()) line += '-';
      line += text;
    }
    text = std::move(line);
  }
  return text;
}

bool is_snapshot_version(std::string_view version) {
  constexpr std::string_view kSnapshot = "snapshot";
  if (version.size() >= kSnapshot.size()) {
    const std::string_view tail = version.substr(version.size() - kSnapshot.size());
    bool matches = true;
    for (std::size_t i = 0; i < tail.size(); ++i) matches = matches && base::ascii_lower(tail[i]) == kSnapshot[i];
    if (matches) return true;
  }
  // <base>-yyyyMMdd.HHmmss-<build number>
  const std::size_t dash = version.rfind('-');
  if (dash == std::string_view::npos || dash + 1 == version.size()) return false;
  for (char c : version.substr(dash + 1))
    if (!base::is_ascii_digit(c)) return false;
  const std::string_view head = version.substr(0, dash);
  constexpr std::size_t kStampLength = 15;  // yyyyMMdd.HHmmss
  if (head.size() < kStampLength + 1 || head[head.size() - kStampLength - 1] != '-') return false;
  const std::string_view stamp = head.substr(head.size() - kStampLength);
  for (std::size_t i = 0; i < stamp.size(); ++i)
    if (i == 8 ? stamp[i] != '.' : !base::is_ascii_digit(stamp[i])) return false;
  return true;
}

}  // namespace capsule::proxy::maven
