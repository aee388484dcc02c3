// The one parser of dates and instants (and their RFC 3339 printing) with civil-date arithmetic: no time zone
// database, no locale, so every module reads "2023-04-11" and "2023-04-11T00:00:00Z" the same way.
#include "base/dates.h"

#include <array>
#include <cstdio>

namespace capsule::base {
namespace {

struct Civil {
  std::int64_t year;
  unsigned month, day;
};

Civil civil_from_days(std::int64_t days) {
  days += 719468;
  const std::int64_t era = (days >= 0 ? days : days - 146096) / 146097;
  const auto day_of_era = static_cast<unsigned>(days - era * 146097);
  const unsigned year_of_era = (day_of_era - day_of_era / 1460 + day_of_era / 36524 - day_of_era / 146096) / 365;
  const unsigned day_of_year = day_of_era - (365 * year_of_era + year_of_era / 4 - year_of_era / 100);
  const unsigned mp = (5 * day_of_year + 2) / 153;
  const unsigned day = day_of_year - (153 * mp + 2) / 5 + 1;
  const unsigned month = mp < 10 ? mp + 3 : mp - 9;
  return {static_cast<std::int64_t>(year_of_era) + era * 400 + (month <= 2 ? 1 : 0), month, day};
}

struct DaysAndRest {
  Micros days;  // since the epoch, rounded down
  Micros rest;  // microseconds into that day, 0 <= rest < one day
};

DaysAndRest split_days(Micros at) {
  constexpr Micros kMicrosPerDay = 86400 * kMicrosPerSecond;
  DaysAndRest out{at / kMicrosPerDay, at % kMicrosPerDay};
  if (out.rest < 0) {
    out.rest += kMicrosPerDay;
    --out.days;
  }
  return out;
}

bool is_leap(std::int64_t year) { return (year % 4 == 0 && year % 100 != 0) || year % 400 == 0; }

// Reads exactly `width` digits at `pos`.
bool read_digits(std::string_view text, std::size_t& pos, std::size_t width, unsigned& out) {
  if (pos + width > text.size()) return false;
  unsigned value = 0;
  for (std::size_t i = 0; i < width; ++i) {
    const char c = text[pos + i];
    if (c < '0' || c > '9') return false;
    value = value * 10 + static_cast<unsigned>(c - '0');
  }
  pos += width;
  out = value;
  return true;
}

bool expect(std::string_view text, std::size_t& pos, char c) {
  if (pos >= text.size() || text[pos] != c) return false;
  ++pos;
  return true;
}

}  // namespace

std::int64_t days_from_civil(std::int64_t year, unsigned month, unsigned day) {
  year -= month <= 2 ? 1 : 0;
  const std::int64_t era = (year >= 0 ? year : year - 399) / 400;
  const auto year_of_era = static_cast<unsigned>(year - era * 400);
  const unsigned day_of_year = (153 * (month + (month > 2 ? -3 : 9)) + 2) / 5 + day - 1;
  const unsigned day_of_era = year_of_era * 365 + year_of_era / 4 - year_of_era / 100 + day_of_year;
  return era * 146097 + static_cast<std::int64_t>(day_of_era) - 719468;
}

unsigned days_in_month(std::int64_t year, unsigned month) {
  static constexpr std::array<unsigned, 12> kDays{31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31};
  return month == 2 && is_leap(year) ? 29 : kDays[month - 1];
}

std::optional<Micros> parse_instant(std::string_view text, bool allow_date_only) {
  std::size_t pos = 0;
  unsigned year = 0, month = 0, day = 0;
  if (!read_digits(text, pos, 4, year) || !expect(text, pos, '-') || !read_digits(text, pos, 2, month) ||
      !expect(text, pos, '-') || !read_digits(text, pos, 2, day))
    return std::nullopt;
  if (month < 1 || month > 12 || day < 1 || day > days_in_month(year, month)) return std::nullopt;
  const Micros midnight = days_from_civil(year, month, day) * 86400 * kMicrosPerSecond;
  if (pos == text.size()) {
    if (!allow_date_only) return std::nullopt;
    return midnight;
  }
  const char separator = text[pos++];
  if (separator != 'T' && separator != 't' && separator != ' ') return std::nullopt;
  unsigned hour = 0, minute = 0, second = 0;
  if (!read_digits(text, pos, 2, hour) || !expect(text, pos, ':') || !read_digits(text, pos, 2, minute) ||
      !expect(text, pos, ':') || !read_digits(text, pos, 2, second))
    return std::nullopt;
  if (hour > 23 || minute > 59 || second > 59) return std::nullopt;  // leap seconds are not representable
  Micros fraction = 0;
  if (pos < text.size() && text[pos] == '.') {
    ++pos;
    std::size_t digits = 0;
    Micros scale = 100000;
    while (pos < text.size() && text[pos] >= '0' && text[pos] <= '9') {
      fraction += (text[pos] - '0') * scale;  // digits past microseconds are truncated
      scale /= 10;
      ++pos;
      ++digits;
    }
    if (digits == 0) return std::nullopt;
  }
  if (pos >= text.size()) return std::nullopt;
  Micros offset = 0;
  const char zone = text[pos++];
  if (zone == '+' || zone == '-') {
    unsigned offset_hours = 0, offset_minutes = 0;
    if (!read_digits(text, pos, 2, offset_hours) || !expect(text, pos, ':') ||
        !read_digits(text, pos, 2, offset_minutes) || offset_hours > 23 || offset_minutes > 59)
      return std::nullopt;
    offset = (static_cast<Micros>(offset_hours) * 3600 + offset_minutes * 60) * kMicrosPerSecond;
    if (zone == '-') offset = -offset;
  } else if (zone != 'Z' && zone != 'z') {
    return std::nullopt;
  }
  if (pos != text.size()) return std::nullopt;
  const Micros local = midnight + (static_cast<Micros>(hour) * 3600 + minute * 60 + second) * kMicrosPerSecond;
  return local + fraction - offset;
}

std::optional<Date> parse_date(std::string_view text) {
  if (text.size() != 10) return std::nullopt;
  const auto midnight = parse_instant(text, true);
  if (!midnight) return std::nullopt;
  return Date{std::chrono::sys_days{std::chrono::days{*midnight / (86400 * kMicrosPerSecond)}}};
}

std::string format_rfc3339(Micros at) {
  const auto [days, rest] = split_days(at);
  const Civil date = civil_from_days(days);
  const auto seconds = rest / kMicrosPerSecond;
  const auto micros = rest % kMicrosPerSecond;
  char buffer[64];
  if (micros == 0) {
    std::snprintf(buffer, sizeof buffer, "%04lld-%02u-%02uT%02lld:%02lld:%02lldZ", static_cast<long long>(date.year),
                  date.month, date.day, static_cast<long long>(seconds / 3600),
                  static_cast<long long>(seconds / 60 % 60), static_cast<long long>(seconds % 60));
  } else {
    std::snprintf(buffer, sizeof buffer, "%04lld-%02u-%02uT%02lld:%02lld:%02lld.%06lldZ",
                  static_cast<long long>(date.year), date.month, date.day, static_cast<long long>(seconds / 3600),
                  static_cast<long long>(seconds / 60 % 60), static_cast<long long>(seconds % 60),
                  static_cast<long long>(micros));
  }
  return buffer;
}

std::string format_date(Date date) {
  char buffer[32];
  std::snprintf(buffer, sizeof buffer, "%04d-%02u-%02u", static_cast<int>(date.year()),
                static_cast<unsigned>(date.month()), static_cast<unsigned>(date.day()));
  return buffer;
}

}  // namespace capsule::base
