// Picks the image for a toolchain request: the CPython release table (images/data/python-releases.json), the
// as_of date rule for Python, and matching org.capsule.toolchain.<name>=<version> labels of installed images.
#pragma once

#include <chrono>
#include <cstddef>
#include <map>
#include <nlohmann/json_fwd.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "base/dates.h"
#include "base/error.h"

namespace capsule::images {

using base::Date;  // parsed and printed by base/dates.h
// The same month and day one year earlier; Feb 29 becomes Feb 28.
Date one_year_before(Date date);

// Component-wise comparison of versions ("3.10.2" > "3.9.18", "17.0.15" > "17", "3.14.0rc1" < "3.14.0",
// "17.0.15+6" > "17.0.15"): <0, 0 or >0. Components are split at '.', numbers compare numerically.
int compare_versions(std::string_view a, std::string_view b);
// `version` equals `prefix` or continues it at a component boundary ('.' or '+'): "3.11" matches "3.11.2",
// "3.1" does not; "17" matches "17.0.15+6".
bool version_matches_prefix(std::string_view version, std::string_view prefix);
// A version or version prefix as labels and requests carry them: starts with a digit, then [0-9A-Za-z.+_~-],
// not ending in '.'.
bool is_valid_version(std::string_view version);

// Everything this file throws: a base::Error whose what() is the whole message and whose code() is
// "invalid_release_data", "invalid_request", "release_data_outdated" (as_of beyond the table) or
// "no_matching_image".
class ToolchainError : public base::Error {
 public:
  ToolchainError(std::string code, const std::string& message) : base::Error(std::move(code), message) {}
};

struct PythonRelease {
  std::string version;  // "3.12.8"
  Date date;
  bool recalled = false;  // withdrawn by the release team (3.9.3, 3.9.8); never picked by the date rule
};

// The validated release table. The one place that reads the data file's format.
class PythonReleases {
 public:
  // Reads and validates the file; ToolchainError("invalid_release_data") naming the path and the entry.
  static PythonReleases load(const std::string& path);
  // Same from text; `origin` names it in errors.
  static PythonReleases parse(std::string_view json_text, const std::string& origin = "<release data>");

  const std::vector<PythonRelease>& releases() const { return releases_; }  // ascending by version
  Date complete_through() const { return complete_through_; }  // every release up to this day is listed
  const std::string& source() const { return source_; }
  const std::string& origin() const { return origin_; }  // the file it was read from, as errors name it
  const PythonRelease* find(std::string_view version) const;

 private:
  std::vector<PythonRelease> releases_;
  Date complete_through_{};
  std::string source_;
  std::string origin_;
};

// The date rule used by date-controlled Python benchmarks.
struct PythonForDate {
  std::string version;  // exact "X.Y.Z"
  std::string minor;    // "X.Y"
  Date minor_released;  // X.Y.0's date
  Date released;        // the chosen patch's date
  std::string reason;   // one sentence explaining the choice
};
// Given as_of D: the newest minor X.Y (>= 3.6) whose X.Y.0 date is <= D minus one year, then that minor's
// newest non-recalled patch dated <= D. When no minor qualifies (D before 3.6.0 + 1 year) the floor 3.6 is
// used; when D precedes 3.6.0 itself, 3.6.0. ToolchainError("release_data_outdated") when D is later than
// complete_through (the answer could be a release the table does not know): the message names the table's
// file, its last day and how to refresh it (scripts/refresh-python-releases.py).
PythonForDate python_for_date(const PythonReleases& releases, Date as_of);

inline constexpr std::string_view kToolchainLabelPrefix = "org.capsule.toolchain.";
// Labels of an image committed from a run's or a session's changes (org.capsule.committed.from_run = <id>). Such an
// image inherits its base's toolchain labels but holds one caller's outputs: it is used only when named by its ref,
// never chosen for a toolchains request (toolchain_candidates marks it unusable).
inline constexpr std::string_view kCommittedLabelPrefix = "org.capsule.committed.";
inline constexpr std::string_view kCommittedFromRunLabel = "org.capsule.committed.from_run";
inline constexpr std::string_view kCommittedFromSessionLabel = "org.capsule.committed.from_session";

// An installed image as the store lists it, or a toolchain layer stacked on its base (see image_stack.h).
struct ImageCandidate {
  std::string ref;      // "capsule/python3:bookworm"
  std::string digest;   // "sha256:..."
  std::string created;  // RFC 3339 from the image config ("2025-05-20T10:00:00Z"); empty or unparsable = oldest
  std::map<std::string, std::string> labels;  // a layer's merged over its base's
  std::string base_ref;     // a layer: the image it is stacked on, as its label names it; empty otherwise
  std::string base_digest;  // a layer: that base, resolved
  std::string unusable;     // why it cannot run (e.g. its base is not installed); such candidates are never chosen
};

// The toolchains a run asks for: name -> version prefix ("17", "3.11", "3.12.8") or "auto" (python only:
// the date rule on as_of picks the exact version).
struct ToolchainRequest {
  std::map<std::string, std::string> toolchains;
  std::optional<Date> as_of;
};
// From the API's JSON: `toolchains` an object of strings, `as_of` "YYYY-MM-DD" or empty.
// ToolchainError("invalid_request") on anything else.
ToolchainRequest parse_toolchain_request(const nlohmann::json& toolchains, std::string_view as_of = {});

struct ToolchainChoice {
  ImageCandidate image;
  std::map<std::string, std::string> wanted;    // name -> prefix or exact version after resolving "auto"
  std::map<std::string, std::string> provided;  // name -> the chosen image's label value
  std::optional<PythonForDate> python_auto;     // set when python was "auto"
  std::size_t matching_images = 0;
  std::string reason;  // why this image: versions, the date rule, the tie-break
};

// The usable candidate providing every requested toolchain (each label value matching its prefix); among
// several, the one with the newest versions (compared toolchain by toolchain in name order), then a
// stand-alone image before a stacked layer, then the fewest toolchains not asked for, then the newest created
// time, then the smallest ref. `releases` is needed only for "auto" (nullptr otherwise is fine). ToolchainError("no_matching_image") names the
// version needed, the label to import it with, and unusable candidates that would have provided it.
ToolchainChoice select_toolchain_image(const std::vector<ImageCandidate>& images, const ToolchainRequest& request,
                                       const PythonReleases* releases);

}  // namespace capsule::images
