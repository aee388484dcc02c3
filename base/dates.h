// Dates and instants, parsed in ONE place: "YYYY-MM-DD" and RFC 3339 ("2023-04-11T12:30:00.5+02:00"), for the
// package proxy's cutoffs and upload times and the images' as_of dates and created times. UTC, no time zones.
#pragma once

#include <chrono>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace capsule::base {

using Micros = std::int64_t;  // microseconds since 1970-01-01T00:00:00Z
inline constexpr Micros kMicrosPerSecond = 1'000'000;
using Date = std::chrono::year_month_day;

// An RFC 3339 instant ('T'/'t'/' ' separator, 'Z'/'z' or an offset, any fraction: digits past microseconds
// are dropped), or with `allow_date_only` a bare "YYYY-MM-DD" meaning 00:00:00Z. Out-of-range fields (month 13,
// Feb 30, hour 24, second 60) are refused.
std::optional<Micros> parse_instant(std::string_view text, bool allow_date_only);
// Exactly "YYYY-MM-DD" (a real day).
std::optional<Date> parse_date(std::string_view text);
// "2023-04-11T00:00:00Z", with ".ffffff" only when the value has a sub-second part.
std::string format_rfc3339(Micros at);
// "YYYY-MM-DD".
std::string format_date(Date date);

// Civil-date arithmetic (proleptic Gregorian), for formats built on the same calendar (HTTP dates).
std::int64_t days_from_civil(std::int64_t year, unsigned month, unsigned day);
unsigned days_in_month(std::int64_t year, unsigned month);

}  // namespace capsule::base
