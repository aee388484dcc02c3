// RepositoryPath: a request path inside a Maven repository (the part after /maven/snapshot/{cutoff}/), checked
// and classified once: metadata to rewrite, an artifact file of one GAV to mask by date, or anything else.
#pragma once

#include <optional>
#include <string>
#include <string_view>

namespace capsule::proxy::maven {

struct RepositoryPath {
  enum class Kind {
    kMetadata,  // maven-metadata.xml (or one of its sidecars); which kind of metadata only its content tells
    kArtifact,  // <group...>/<artifactId>/<version>/<artifactId>-<version>[-classifier].<ext>[.sidecar]
    kOther,     // anything else: served unchanged
  };
  Kind kind = Kind::kOther;
  std::string path;         // the relative path, segments joined by '/'
  std::string group_id;     // dotted ("com.google.guava"); kMetadata: a candidate, see parse_repository_path
  std::string artifact_id;  // kArtifact; kMetadata: a candidate
  std::string version;      // the version directory (kArtifact; kMetadata: set only for a "-SNAPSHOT" directory)
  std::string file_name;    // the last segment without its sidecar suffix ("guava-31.1-jre.jar")
  // The checksum/signature suffix after the main file: "", "md5", "sha1", "sha256", "sha512", "asc" or "asc."
  // followed by one of the checksums ("asc.sha1": the checksum of the signature).
  std::string sidecar;

  // The path of the main file a sidecar belongs to (path itself when sidecar is empty).
  std::string main_path() const;
};

// nullopt for a path no repository file can have: empty, absolute, an empty, "." or ".." segment (so also a
// trailing '/'), a backslash, NUL or another control character. The input is already percent-decoded.
//
// kMetadata: the file is maven-metadata.xml. Its directory is ambiguous: g/a/ (artifact-level versions), g/
// (group-level plugin prefixes) or g/a/v/ (a SNAPSHOT's builds). The candidates filled in read it as g/a/, or
// as g/a/v/ when the last directory ends in "-SNAPSHOT"; inspect_metadata on the content decides.
// kArtifact: at least four segments, and the file name starts with "<artifactId>-<version>" followed by '.' or
// '-'; in an "X-SNAPSHOT" directory also "<artifactId>-X-<yyyyMMdd.HHmmss>-<n>" (a timestamped build).
std::optional<RepositoryPath> parse_repository_path(std::string_view path);

}  // namespace capsule::proxy::maven
