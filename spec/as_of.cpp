// Resolving the spec's date cutoffs: relative spans ("7 days", "P2W") against today's UTC date, absolute forms
// through base/dates (the one date parser), and per-package cutoffs keyed by canonical package names.
#include "spec/as_of.h"

#include <cctype>

#include "proxy/pypi/project_name.h"
#include "spec/json_fields.h"

namespace capsule::spec {
namespace {

constexpr long kMaxSpanDays = 36500;

std::string folded_case(std::string_view text) {
  std::string out(text);
  for (char& c : out) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return out;
}

// Digits then a unit letter, repeated: "1w2d" (the ISO 8601 form without its "P"). Days, or nullopt.
std::optional<long> iso_span_days(std::string_view text) {
  long days = 0;
  bool any = false;
  std::size_t i = 0;
  while (i < text.size()) {
    long n = 0;
    std::size_t digits = 0;
    for (; i < text.size() && std::isdigit(static_cast<unsigned char>(text[i])) && digits < 6; ++i, ++digits)
      n = n * 10 + (text[i] - '0');
    if (digits == 0 || i == text.size()) return std::nullopt;
    const char unit = text[i++];
    if (unit == 'w') days += 7 * n;
    else if (unit == 'd') days += n;
    else return std::nullopt;
    any = true;
  }
  return any ? std::optional<long>(days) : std::nullopt;
}

// "7 days", "1 week 2 days", "3d", "2w ago": number-unit pairs separated by spaces. Days, or nullopt.
std::optional<long> friendly_span_days(std::string_view text) {
  if (text.ends_with(" ago")) text.remove_suffix(4);
  long days = 0;
  bool any = false;
  std::size_t i = 0;
  const auto skip_spaces = [&] {
    while (i < text.size() && text[i] == ' ') ++i;
  };
  skip_spaces();
  while (i < text.size()) {
    long n = 0;
    std::size_t digits = 0;
    for (; i < text.size() && std::isdigit(static_cast<unsigned char>(text[i])) && digits < 6; ++i, ++digits)
      n = n * 10 + (text[i] - '0');
    if (digits == 0) return std::nullopt;
    skip_spaces();
    const std::size_t start = i;
    while (i < text.size() && std::isalpha(static_cast<unsigned char>(text[i]))) ++i;
    const std::string_view unit = text.substr(start, i - start);
    if (unit == "d" || unit == "day" || unit == "days") days += n;
    else if (unit == "w" || unit == "week" || unit == "weeks") days += 7 * n;
    else return std::nullopt;
    any = true;
    skip_spaces();
  }
  return any ? std::optional<long>(days) : std::nullopt;
}

std::optional<long> span_days(const std::string& text) {
  const std::string folded = folded_case(text);
  if (folded.size() > 1 && folded[0] == 'p') return iso_span_days(std::string_view(folded).substr(1));
  return friendly_span_days(folded);
}

bool is_maven_coordinate_part(std::string_view part) {
  if (part.empty() || part.size() > 256) return false;
  for (const char c : part) {
    if (!std::isalnum(static_cast<unsigned char>(c)) && c != '.' && c != '-' && c != '_') return false;
  }
  return true;
}

proxy::Cutoff package_cutoff(const nlohmann::json& value, const std::string& where, base::Date today) {
  const std::string text = resolve_as_of(string_field(value, where), where, today);
  const auto cutoff = proxy::parse_cutoff(text);
  if (!cutoff) invalid(where, "is not a date the package proxy can show");
  return *cutoff;
}

base::Date utc_today() {
  return base::Date(std::chrono::floor<std::chrono::days>(std::chrono::system_clock::now()));
}

}  // namespace

std::string resolve_as_of(const std::string& text, const std::string& field, base::Date today) {
  if (base::parse_instant(text, true)) return text;
  const auto days = span_days(text);
  if (!days) {
    invalid(field, "must be a date (YYYY-MM-DD), an RFC 3339 time or a span back from now in days or weeks "
                   "(\"7 days\", \"2 weeks\", \"P7D\", \"P2W\"), got \"" + text.substr(0, 64) + "\"");
  }
  if (*days > kMaxSpanDays) invalid(field, "a span of at most " + std::to_string(kMaxSpanDays) + " days");
  return base::format_date(base::Date(std::chrono::sys_days(today) - std::chrono::days(*days)));
}

std::string resolve_as_of(const std::string& text, const std::string& field) {
  return resolve_as_of(text, field, utc_today());
}

proxy::PackageCutoffs parse_package_cutoffs(const nlohmann::json& value, const std::string& field, base::Date today) {
  if (!value.is_object()) invalid(field, "must be an object {\"pypi\": {name: date}, \"maven\": {\"group:artifact\": date}}");
  reject_unknown(value, field, {"pypi", "maven"});
  proxy::PackageCutoffs cutoffs;
  std::size_t entries = 0;
  for (const auto& [ecosystem, packages] : value.items()) {
    const std::string where = field + "." + ecosystem;
    if (!packages.is_object()) invalid(where, "must be an object of package name -> date");
    entries += packages.size();
    if (entries > kMaxPackageCutoffs) invalid(field, "at most " + std::to_string(kMaxPackageCutoffs) + " packages");
    for (const auto& [name, date] : packages.items()) {
      const std::string entry = where + "." + name.substr(0, 128);
      if (ecosystem == "pypi") {
        if (!proxy::pypi::is_valid_name(name)) invalid(entry, "is not a valid PyPI project name");
        if (!cutoffs.pypi.emplace(proxy::pypi::normalize_name(name), package_cutoff(date, entry, today)).second)
          invalid(entry, "names a project already given (names are compared normalized)");
      } else {
        const std::size_t colon = name.find(':');
        if (colon == std::string::npos || !is_maven_coordinate_part(name.substr(0, colon)) ||
            !is_maven_coordinate_part(name.substr(colon + 1))) {
          invalid(entry, "must be \"groupId:artifactId\"");
        }
        cutoffs.maven.emplace(name, package_cutoff(date, entry, today));
      }
    }
  }
  return cutoffs;
}

proxy::PackageCutoffs parse_package_cutoffs(const nlohmann::json& value, const std::string& field) {
  return parse_package_cutoffs(value, field, utc_today());
}

nlohmann::json package_cutoffs_json(const proxy::PackageCutoffs& cutoffs) {
  nlohmann::json j = nlohmann::json::object();
  for (const auto& [ecosystem, packages] : {std::pair{"pypi", &cutoffs.pypi}, std::pair{"maven", &cutoffs.maven}}) {
    if (packages->empty()) continue;
    nlohmann::json& out = j[ecosystem];
    for (const auto& [name, cutoff] : *packages) out[name] = cutoff.text;
  }
  return j;
}

}  // namespace capsule::spec
