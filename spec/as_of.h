// The spec's date cutoffs (`as_of`, `as_of_packages`): absolute, or a span back from the submission that is
// resolved when the spec is parsed, so the stored spec, the record and a replay only ever hold absolute dates.
#pragma once

#include <nlohmann/json.hpp>
#include <string>

#include "base/dates.h"
#include "proxy/cutoff.h"

namespace capsule::spec {

// `text` as a request may give it -> the absolute text the spec keeps: "YYYY-MM-DD" and RFC 3339 unchanged; a
// span in days and weeks ("7 days", "2 weeks", "1 week 2 days", "3d", optionally followed by "ago", or ISO 8601
// "P7D", "P2W", "P1W2D"; at most 36500 days) -> the UTC date that many days before `today` (its 00:00:00Z, so
// a relative cutoff hides up to a day more, never less, and runs submitted on one day share one snapshot).
// Throws invalid_spec naming `field`.
std::string resolve_as_of(const std::string& text, const std::string& field, base::Date today);
// The same with today's UTC date from the system clock: what a submission resolves against.
std::string resolve_as_of(const std::string& text, const std::string& field);

// `as_of_packages`: {"pypi": {"requests": "2024-05-01"}, "maven": {"org.slf4j:slf4j-api": "30 days"}}, each value
// what resolve_as_of takes; PyPI names are PEP 503-normalized, Maven keys are "groupId:artifactId". At most
// kMaxPackageCutoffs entries. Throws invalid_spec naming the field.
constexpr std::size_t kMaxPackageCutoffs = 1000;
proxy::PackageCutoffs parse_package_cutoffs(const nlohmann::json& value, const std::string& field, base::Date today);
proxy::PackageCutoffs parse_package_cutoffs(const nlohmann::json& value, const std::string& field);
// The stored form: {"pypi": {name: RFC 3339}, "maven": {...}}, an ecosystem without entries left out.
nlohmann::json package_cutoffs_json(const proxy::PackageCutoffs& cutoffs);

}  // namespace capsule::spec
