// MavenUpstream: where the proxy gets Maven repository files and publish times: an HTTPS repository such as
// Maven Central, or local repository trees (e.g. Debian's /usr/share/maven-repo) with a publish-times file.
#pragma once

#include <filesystem>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "proxy/cutoff.h"
#include "proxy/upstream/http_client.h"

namespace capsule::proxy {

struct MavenFetch {
  unsigned status = 0;  // 200 or 404
  std::string body;     // empty for head-only fetches
  std::optional<Micros> last_modified;
};

// Coordinates and paths that could climb out of the repository throw ProxyError 400 (bad_coordinate,
// bad_path); HTTP statuses other than 200/404 throw ProxyError 502 bad_upstream naming the status.
class MavenUpstream {
 public:
  virtual ~MavenUpstream() = default;
  // `path` is a repository-relative path already checked by the caller (no "..", no leading '/').
  virtual MavenFetch get(const std::string& path) = 0;
  // Streams a 200 body into sink (for jars); returns the status (404 writes nothing).
  virtual unsigned get_to(const std::string& path, const BodySink& sink) = 0;
  // When the version was published: the .pom's Last-Modified (HTTP: a HEAD request; local: the publish-times
  // file first, then the .pom file's mtime). nullopt when the .pom does not exist or carries no date.
  virtual std::optional<Micros> publish_time(const std::string& group_id, const std::string& artifact_id,
                                             const std::string& version) = 0;
  // Versions present as <group path>/<artifact>/<version>/<artifact>-<version>.pom, for trees without a
  // maven-metadata.xml (Debian's maven-repo has none, and has "debian" pseudo-versions), merged across roots
  // and sorted lexically (the caller sorts by Maven order). nullopt where listing is impossible (HTTP).
  virtual std::optional<std::vector<std::string>> list_versions(const std::string& group_id,
                                                                const std::string& artifact_id) = 0;
  virtual std::string describe() const = 0;
  // The publish-times file's entries, "g:a:v" -> time (empty without one, and for HTTP), so that the caller can
  // compare them with the times it has already recorded.
  virtual std::map<std::string, Micros> listed_publish_times() const { return {}; }
};

std::unique_ptr<MavenUpstream> make_http_maven_upstream(
    std::shared_ptr<HttpClient> client, std::string base_url = "https://repo.maven.apache.org/maven2/");
// Roots are searched in order (the first that has a path answers). The publish-times file, when given, has one
// "groupId:artifactId:version<TAB or space>RFC3339" per line ('#' comments allowed); it is read once here and a
// malformed line (or a coordinate listed twice with different times) throws ProxyError 502 bad_publish_times
// naming "file:line". Symlinks inside the roots are followed wherever they point (Debian's maven-repo links its
// jars to /usr/share/java): the roots are the operator's trusted trees, and only the request path is kept from
// climbing (no "..", no absolute paths). Last-Modified of a local file is its mtime.
std::unique_ptr<MavenUpstream> make_local_maven_mirror(std::vector<std::filesystem::path> roots,
                                                       std::optional<std::filesystem::path> publish_times_file);

}  // namespace capsule::proxy
