// Maven's version order (ComparableVersion as shipped with Maven 3.8/3.9): how Maven sorts the versions of an
// artifact for ranges, LATEST and RELEASE; used here to order synthesized maven-metadata.xml.
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace capsule::proxy::maven {

// Negative, zero or positive as a sorts before, equal to or after b in Maven's order. Versions split into
// numbers and qualifiers at '.', '-' and digit/letter transitions; '-' (and a transition) opens a sub-list that
// sorts below a '.'-separated number; trailing zeros and release qualifiers ("", "ga", "final", "release") are
// dropped, so 1 == 1.0 == 1.ga. Known qualifiers: alpha (a) < beta (b) < milestone (m) < rc (cr) < snapshot <
// "" < sp; unknown ones ("debian", "jre") come after all of them, in lexical order, case-insensitively.
// Only ASCII letters and digits are classified; other bytes are qualifier characters compared as bytes.
int compare_versions(std::string_view a, std::string_view b);

// Sorts versions ascending by compare_versions, equal ones by text. Maven's order is not transitive for some odd
// versions ("0.0" < "dbian" < "-a2l" < "0.0"), which std::sort must not be given; this is a merge sort, safe and
// deterministic whatever the comparisons say, and every adjacent pair of the result is in order.
void sort_versions(std::vector<std::string>& versions);

// The normalized form Maven prints for a version (its getCanonical()): "1.0.0.Final" -> "1", "1.0-RC1" -> "1-rc-1".
// Versions that compare equal have the same canonical form, but not conversely: "1-ga-1" < "1-1", both "1-1".
std::string canonical_version(std::string_view version);

// Maven's notion of a snapshot: the version ends with "SNAPSHOT" (any case) or is a timestamped snapshot
// ("1.0-20230101.120000-3"). Snapshots never become <release>.
bool is_snapshot_version(std::string_view version);

}  // namespace capsule::proxy::maven
