// MavenSource: the Maven side of the proxy's data — publish times per GAV (asked once, stored forever), upstream
// metadata kept for the TTL (or synthesized from a listing where a tree has none), and files in the blob cache.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <filesystem>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>

#include "store/blob_store.h"
#include "proxy/cache/page_cache.h"
#include "proxy/cache/publish_times.h"
#include "proxy/cache/singleflight.h"
#include "proxy/proxy_options.h"
#include "proxy/pypi_source.h"
#include "proxy/upstream/maven_upstream.h"

namespace capsule::proxy {

class MavenSource {
 public:
  // `upstream` is never called when options.offline is set. With a publish-times file, logs the rule it follows
  // (its times count only for versions not recorded yet) and warns for each entry that differs from the
  // recorded time (report_publish_times_file).
  MavenSource(const ProxyOptions& options, std::unique_ptr<MavenUpstream> upstream, PublishTimes& times,
              PageCache& pages, store::BlobStore& blobs, std::filesystem::path path_index_dir);

  // When group:artifact:version was published; nullopt when nobody knows (offline and not stored, or no .pom).
  std::optional<Micros> publish_time(const std::string& group_id, const std::string& artifact_id,
                                     const std::string& version);

  // A repository document that may change upstream (maven-metadata.xml and anything that is not an artifact
  // file), fresh within the TTL; the last copy on disk is used offline and while the upstream fails. For an artifact's maven-metadata.xml that the upstream lacks, one is
  // synthesized from the versions the tree holds. nullptr when there is none. `fetched` as in PypiSource.
  std::shared_ptr<const std::string> document(const std::string& path, bool* fetched = nullptr);

  // An artifact file (immutable once published) in the blob cache; nullopt when the upstream has none.
  std::optional<CachedBlob> artifact(const std::string& path);

  std::uint64_t upstream_requests() const { return upstream_requests_; }
  std::string describe() const { return upstream_->describe(); }

 private:
  void remove_abandoned_index_temporaries();
  void report_publish_times_file();
  struct Document {
    std::shared_ptr<const std::string> body;  // null: the upstream has none
    std::chrono::steady_clock::time_point checked;
  };
  std::shared_ptr<const std::string> fetch_document(const std::string& path);
  std::filesystem::path index_file(const std::string& path) const;

  const ProxyOptions& options_;
  std::unique_ptr<MavenUpstream> upstream_;
  PublishTimes& times_;
  PageCache& pages_;  // documents kept for offline use, keyed by the sha256 of their path
  store::BlobStore& blobs_;
  std::filesystem::path path_index_dir_;  // repository path -> blob digest, one small file per path
  std::mutex mutex_;
  std::map<std::string, Document> documents_;
  Singleflight<std::string, std::shared_ptr<const std::string>> document_flights_;
  Singleflight<std::string, std::optional<CachedBlob>> artifact_flights_;
  Singleflight<std::string, std::optional<Micros>> time_flights_;
  std::atomic<std::uint64_t> upstream_requests_{0};
};

}  // namespace capsule::proxy
