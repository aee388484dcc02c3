// The proxy's cutoffs and the timestamp forms upstreams write (RFC 3339 through base/dates, Maven's
// lastUpdated, HTTP dates), on the one date parser of base/dates.
#include "proxy/cutoff.h"

#include <array>
#include <cstdio>

namespace capsule::proxy {

using base::days_from_civil;
using base::days_in_month;
using base::kMicrosPerSecond;

std::optional<Cutoff> parse_cutoff(std::string_view text) {
  const auto at = base::parse_instant(text, true);
  if (!at) return std::nullopt;
  return Cutoff{*at, base::format_rfc3339(*at)};
}

const Cutoff& PackageCutoffs::for_pypi(const std::string& normalized_project, const Cutoff& otherwise) const {
  const auto found = pypi.find(normalized_project);
  return found == pypi.end() ? otherwise : found->second;
}

const Cutoff& PackageCutoffs::for_maven(const std::string& group_id, const std::string& artifact_id,
                                        const Cutoff& otherwise) const {
  if (maven.empty()) return otherwise;
  const auto found = maven.find(group_id + ":" + artifact_id);
  return found == maven.end() ? otherwise : found->second;
}

std::optional<Micros> parse_timestamp(std::string_view text) { return base::parse_instant(text, false); }

std::string format_maven_timestamp(Micros at) {
  const std::string iso = base::format_rfc3339(at);  // YYYY-MM-DDTHH:MM:SS...
  return iso.substr(0, 4) + iso.substr(5, 2) + iso.substr(8, 2) + iso.substr(11, 2) + iso.substr(14, 2) +
         iso.substr(17, 2);
}

namespace {

constexpr std::array<std::string_view, 12> kMonths{"Jan", "Feb", "Mar", "Apr", "May", "Jun",
                                                   "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"};
constexpr std::array<std::string_view, 7> kWeekdays{"Thu", "Fri", "Sat", "Sun", "Mon", "Tue", "Wed"};  // from 1970-01-01

std::optional<unsigned> month_number(std::string_view name) {
  for (unsigned i = 0; i < kMonths.size(); ++i)
    if (kMonths[i] == name) return i + 1;
  return std::nullopt;
}

std::optional<Micros> http_date_at(unsigned year, std::string_view month_name, unsigned day, unsigned hour,
                                   unsigned minute, unsigned second) {
  const auto month = month_number(month_name);
  if (!month || day < 1 || day > days_in_month(year, *month) || hour > 23 || minute > 59 || second > 60)
    return std::nullopt;
  return (days_from_civil(year, *month, day) * 86400 + hour * 3600 + minute * 60 + second) * kMicrosPerSecond;
}

}  // namespace

std::optional<Micros> parse_http_date(std::string_view text) {
  const std::string copy(text);
  char weekday[16] = {}, month[4] = {}, zone[4] = {};
  unsigned day = 0, year = 0, hour = 0, minute = 0, second = 0;
  int consumed = 0;
  // IMF-fixdate: "Sun, 06 Nov 1994 08:49:37 GMT"
  if (std::sscanf(copy.c_str(), "%3s, %2u %3s %4u %2u:%2u:%2u %3s%n", weekday, &day, month, &year, &hour, &minute,
                  &second, zone, &consumed) == 8 &&
      static_cast<std::size_t>(consumed) == copy.size() && std::string_view(zone) == "GMT")
    return http_date_at(year, month, day, hour, minute, second);
  // RFC 850: "Sunday, 06-Nov-94 08:49:37 GMT" (two-digit years are 19xx/20xx by the 50-year rule)
  if (std::sscanf(copy.c_str(), "%15[A-Za-z], %2u-%3s-%2u %2u:%2u:%2u %3s%n", weekday, &day, month, &year, &hour,
                  &minute, &second, zone, &consumed) == 8 &&
      static_cast<std::size_t>(consumed) == copy.size() && std::string_view(zone) == "GMT")
    return http_date_at(year < 50 ? 2000 + year : 1900 + year, std::string_view(month).substr(0, 3), day, hour,
                        minute, second);
  // asctime: "Sun Nov  6 08:49:37 1994"
  if (std::sscanf(copy.c_str(), "%3s %3s %2u %2u:%2u:%2u %4u%n", weekday, month, &day, &hour, &minute, &second,
                  &year, &consumed) == 7 &&
      static_cast<std::size_t>(consumed) == copy.size())
    return http_date_at(year, month, day, hour, minute, second);
  return std::nullopt;
}

std::string format_http_date(Micros at) {
  const std::string iso = base::format_rfc3339(at);  // YYYY-MM-DDTHH:MM:SS...
  constexpr Micros kMicrosPerDay = 86400 * kMicrosPerSecond;
  const Micros days = at / kMicrosPerDay - (at % kMicrosPerDay < 0 ? 1 : 0);
  const auto month = static_cast<std::size_t>(std::stoi(iso.substr(5, 2)));
  return std::string(kWeekdays[static_cast<std::size_t>(((days % 7) + 7) % 7)]) + ", " + iso.substr(8, 2) + " " +
         std::string(kMonths[month - 1]) + " " + iso.substr(0, 4) + " " + iso.substr(11, 8) + " GMT";
}

}  // namespace capsule::proxy
