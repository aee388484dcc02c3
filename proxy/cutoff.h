// Cutoff and timestamps: the date a snapshot is taken at, and the instants compared with it (PEP 700
// upload-time, Maven publish times), as microseconds since the Unix epoch in UTC.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>

#include "base/dates.h"

namespace capsule::proxy {

using Micros = base::Micros;  // microseconds since 1970-01-01T00:00:00Z

struct Cutoff {
  Micros at = 0;
  std::string text;  // canonical form, used in URLs and cache keys: "2023-04-11T00:00:00Z" (fraction kept if any)
};

// Cutoffs for single packages that replace a listener's own for them (a run's as_of_packages, uv's
// --exclude-newer-package): a newer one lets a fixed release through, an older one holds a package back.
struct PackageCutoffs {
  std::map<std::string, Cutoff> pypi;   // by PEP 503-normalized project name
  std::map<std::string, Cutoff> maven;  // by "groupId:artifactId"

  bool empty() const { return pypi.empty() && maven.empty(); }
  // The cutoff that applies to a project / an artifact: its own, else `otherwise`.
  const Cutoff& for_pypi(const std::string& normalized_project, const Cutoff& otherwise) const;
  const Cutoff& for_maven(const std::string& group_id, const std::string& artifact_id, const Cutoff& otherwise) const;
};

// RFC 3339 ("2023-04-11T12:30:00Z", "...T12:30:00.5+02:00"; 'T'/'t'/' ' separator, 'Z'/'z' or an offset) or a
// bare date "YYYY-MM-DD" meaning 00:00:00Z. Out-of-range fields (month 13, Feb 30, hour 24) are refused.
std::optional<Cutoff> parse_cutoff(std::string_view text);
// An RFC 3339 / ISO 8601 instant as upstreams write upload-time ("2023-01-02T03:04:05.123456Z"); same grammar
// as parse_cutoff without the bare-date form.
std::optional<Micros> parse_timestamp(std::string_view text);
// Maven's <lastUpdated> form, "yyyyMMddHHmmss" in UTC.
std::string format_maven_timestamp(Micros at);
// An HTTP date (RFC 9110 IMF-fixdate, also the obsolete RFC 850 and asctime forms) as Last-Modified carries it.
std::optional<Micros> parse_http_date(std::string_view text);
std::string format_http_date(Micros at);

}  // namespace capsule::proxy
