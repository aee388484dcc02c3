// maven-metadata.xml: what a document is (artifact versions, group plugins, a SNAPSHOT's builds), its rewrite
// as of a cutoff (versions published before it, release/latest/lastUpdated recomputed), and synthesis for
// repository trees that have none (Debian's /usr/share/maven-repo).
#pragma once

#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "proxy/cutoff.h"
#include "proxy/maven/comparable_version.h"

namespace capsule::proxy::maven {

struct MetadataInfo {
  enum class Kind {
    kArtifact,  // <versioning><versions>: the versions of groupId:artifactId
    kPlugins,   // group-level <plugins>: plugin prefixes, no versions
    kSnapshot,  // version-level <versioning><snapshot> or <snapshotVersions>: the builds of one X-SNAPSHOT
    kUnknown,   // well-formed XML, but none of the above
  };
  Kind kind = Kind::kUnknown;
  // Top-level <groupId>, <artifactId> and <version> ("" when absent); for kSnapshot, version is the X-SNAPSHOT
  // the builds belong to.
  std::string group_id;
  std::string artifact_id;
  std::string version;
  std::vector<std::string> versions;  // kArtifact: the non-blank <version>s of <versions>, trimmed, in order
};

// Throws ProxyError("bad_upstream", step "maven-metadata") when xml is not well-formed (or holds NUL).
// Element names are matched without namespace prefixes.
MetadataInfo inspect_metadata(std::string_view xml);

// The publish time of a version of the artifact being rewritten; nullopt when unknown.
using PublishTime = std::function<std::optional<Micros>(const std::string& version)>;

struct RewriteOptions {
  Micros cutoff = 0;
  bool include_undated = false;  // keep versions whose publish time is unknown
};

// The document as of options.cutoff: keeps the <version>s published strictly before the cutoff (undated ones
// only with include_undated; blank and repeated ones never) in their original order. <latest> becomes the kept
// version with the newest publish time (undated ones count as oldest; ties go to the later one in the list),
// <release> the same among non-snapshots (removed when there is none), <lastUpdated> the newest kept publish
// time as yyyyMMddHHmmss (removed when no kept version is dated); a top-level <version> that was not kept
// becomes <latest>. Everything else is kept, except text made only of whitespace (such as &#x20; between
// elements), which a re-read would drop. Output: UTF-8 with an XML declaration, two-space indentation, carriage
// returns as &#13;, the same bytes for the same input, and rewriting it again gives it back unchanged. nullopt
// when no version is left.
// Throws ProxyError bad_upstream as inspect_metadata does, and also for a document that is not kArtifact or has
// repeated <versioning>/<versions> elements.
std::optional<std::string> rewrite_artifact_metadata(std::string_view xml, const PublishTime& publish_time,
                                                     const RewriteOptions& options);

// An artifact-level maven-metadata.xml for a tree that has none: versions deduplicated and sorted by
// compare_versions (equal ones by text), <latest> the greatest, <release> the greatest non-snapshot (absent
// when none), <lastUpdated> only when last_updated is given.
std::string synthesize_artifact_metadata(const std::string& group_id, const std::string& artifact_id,
                                         const std::vector<std::string>& versions,
                                         std::optional<Micros> last_updated = std::nullopt);

}  // namespace capsule::proxy::maven
