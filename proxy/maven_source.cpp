// MavenSource: publish times through the immutable store, TTL-cached documents with metadata synthesis for
// listing-only trees, and artifact files content-addressed with a path -> digest index written atomically.
#include "proxy/maven_source.h"


#include <fcntl.h>
#include <unistd.h>

#include <spdlog/spdlog.h>

#include <fstream>
#include <sstream>

#include "base/dates.h"
#include "base/error.h"
#include "http/error_status.h"
#include "proxy/cache/fetch_lock.h"
#include "proxy/error.h"
#include "proxy/maven/metadata.h"

namespace capsule::proxy {
namespace {

constexpr std::string_view kMetadataName = "maven-metadata.xml";
constexpr const char* kDocumentKind = "maven-document";

[[noreturn]] void offline_miss(const std::string& what) {
  throw ProxyError("offline_miss", "maven", what, "not in the cache, and the proxy is offline");
}

}  // namespace

MavenSource::MavenSource(const ProxyOptions& options, std::unique_ptr<MavenUpstream> upstream, PublishTimes& times,
                         PageCache& pages, store::BlobStore& blobs, std::filesystem::path path_index_dir)
    : options_(options),
      upstream_(std::move(upstream)),
      times_(times),
      pages_(pages),
      blobs_(blobs),
      path_index_dir_(std::move(path_index_dir)) {
  std::filesystem::create_directories(path_index_dir_);
  remove_abandoned_index_temporaries();
  report_publish_times_file();
}

// A version's time is recorded the first time a request needs it and never changes afterwards (a cutoff keeps
// its answers), so an edit of the file counts only for versions not recorded yet: said at start, and each
// entry the edit made disagree with the recorded time is named (the first kMaxNamed; then a count).
void MavenSource::report_publish_times_file() {
  if (!options_.maven_publish_times) return;
  constexpr std::size_t kMaxNamed = 20;
  const auto listed = upstream_->listed_publish_times();
  std::size_t recorded = 0, differing = 0;
  for (const auto& [coordinate, at] : listed) {
    const auto stored = times_.get(coordinate);
    if (!stored) continue;
    ++recorded;
    if (*stored == at) continue;
    if (++differing <= kMaxNamed) {
      spdlog::warn("maven publish times: {} says {} for {}, but {} was recorded for it (in {}); the recorded time "
                   "stays, so this edit is ignored",
                   options_.maven_publish_times->string(), base::format_rfc3339(at), coordinate,
                   base::format_rfc3339(*stored), times_.path());
    }
  }
  if (differing > kMaxNamed) {
    spdlog::warn("maven publish times: {} more entries of {} differ from their recorded times and are ignored",
                 differing - kMaxNamed, options_.maven_publish_times->string());
  }
  spdlog::info("maven publish times: {} lists {} versions, {} of them already recorded in {} ({} differently). A "
               "version's time is recorded the first time it is asked and never changes, so edits of the file "
               "apply only to versions not recorded yet; use a new cache_dir to start over",
               options_.maven_publish_times->string(), listed.size(), recorded, times_.path(), differing);
}

// Index entries are written as <name>.tmp.<pid>.<n> and renamed; one whose writer process is gone was left by
// a kill and is removed (a live process's, this one's or another's sharing the cache, is kept).
void MavenSource::remove_abandoned_index_temporaries() {
  std::error_code ec;
  for (const auto& entry : std::filesystem::directory_iterator(path_index_dir_, ec)) {
    const std::string name = entry.path().filename().string();
    const auto mark = name.find(".tmp.");
    if (mark == std::string::npos) continue;
    const std::string pid = name.substr(mark + 5, name.find('.', mark + 5) - (mark + 5));
    std::error_code missing;
    if (pid.empty() || !std::filesystem::exists("/proc/" + pid, missing)) {
      std::filesystem::remove(entry.path(), missing);
    }
  }
}

std::optional<Micros> MavenSource::publish_time(const std::string& group_id, const std::string& artifact_id,
                                                const std::string& version) {
  const std::string coordinate = group_id + ":" + artifact_id + ":" + version;
  if (auto stored = times_.get(coordinate)) return stored;
  if (options_.offline) return std::nullopt;
  return time_flights_.run(coordinate, [&]() -> std::optional<Micros> {
    if (auto stored = times_.get(coordinate)) return stored;
    ++upstream_requests_;
    const auto at = upstream_->publish_time(group_id, artifact_id, version);
    if (!at) return std::nullopt;
    return times_.put_once(coordinate, *at, upstream_->describe());
  });
}

std::shared_ptr<const std::string> MavenSource::document(const std::string& path, bool* fetched) {
  if (fetched) *fetched = false;
  {
    std::lock_guard lock(mutex_);
    auto found = documents_.find(path);
    if (found != documents_.end() &&
        (options_.offline || std::chrono::steady_clock::now() - found->second.checked < options_.index_ttl))
      return found->second.body;
  }
  if (options_.offline) {
    auto stored = pages_.get(kDocumentKind, store::sha256_of(path).hex());
    if (!stored) offline_miss(path);
    auto body = std::make_shared<const std::string>(std::move(stored->body));
    std::lock_guard lock(mutex_);
    documents_[path] = Document{body, std::chrono::steady_clock::now()};
    return body;
  }
  return document_flights_.run(path, [&] {
    if (fetched) *fetched = true;
    auto body = fetch_document(path);
    std::lock_guard lock(mutex_);
    documents_[path] = Document{body, std::chrono::steady_clock::now()};
    return body;
  });
}

std::shared_ptr<const std::string> MavenSource::fetch_document(const std::string& path) {
  ++upstream_requests_;
  MavenFetch answer;
  try {
    answer = upstream_->get(path);
  } catch (const ProxyError& error) {
    if (http::status_for(error.code()) < 500) throw;
    auto stored = pages_.get(kDocumentKind, store::sha256_of(path).hex());
    if (!stored) throw;
    return std::make_shared<const std::string>(std::move(stored->body));  // stale beats failing
  }
  if (answer.status == 200) {
    CachedPage page;
    page.body = answer.body;
    page.url = path;
    pages_.put(kDocumentKind, store::sha256_of(path).hex(), page);
    return std::make_shared<const std::string>(std::move(answer.body));
  }
  if (answer.status != 404) {
    throw ProxyError("bad_upstream", "maven", path, "upstream answered " + std::to_string(answer.status));
  }
  // <group path>/<artifact>/maven-metadata.xml missing: trees such as Debian's maven-repo only have the files.
  const std::filesystem::path relative(path);
  if (relative.filename() != kMetadataName) return nullptr;
  const auto artifact_dir = relative.parent_path();
  const std::string artifact_id = artifact_dir.filename().string();
  std::string group_id;
  for (const auto& part : artifact_dir.parent_path()) {
    if (!group_id.empty()) group_id += '.';
    group_id += part.string();
  }
  if (group_id.empty() || artifact_id.empty()) return nullptr;
  const auto versions = upstream_->list_versions(group_id, artifact_id);
  if (!versions || versions->empty()) return nullptr;
  return std::make_shared<const std::string>(maven::synthesize_artifact_metadata(group_id, artifact_id, *versions));
}

std::filesystem::path MavenSource::index_file(const std::string& path) const {
  return path_index_dir_ / store::sha256_of(path).hex();
}

std::optional<CachedBlob> MavenSource::artifact(const std::string& path) {
  const auto index = index_file(path);
  auto cached = [&]() -> std::optional<CachedBlob> {
    std::ifstream in(index);
    std::string text;
    if (!(in >> text)) return std::nullopt;
    auto digest = store::Digest::try_parse(text);
    if (!digest || !blobs_.has(*digest)) return std::nullopt;
    return CachedBlob{*digest, blobs_.size(*digest), false};
  };
  if (auto hit = cached()) return hit;
  if (options_.offline) offline_miss(path);
  return artifact_flights_.run(path, [&]() -> std::optional<CachedBlob> {
    const FetchLock other_processes(options_.cache_dir, "maven-artifact " + path);
    if (auto hit = cached()) return hit;
    auto writer = blobs_.writer();
    ++upstream_requests_;
    const unsigned status =
        upstream_->get_to(path, [&](const char* data, std::size_t size) { writer.write(data, size); });
    if (status == 404) return std::nullopt;
    if (status != 200) throw ProxyError("bad_upstream", "maven", path, "upstream answered " + std::to_string(status));
    const auto digest = writer.commit();
    const auto temp = index.string() + ".tmp." + std::to_string(getpid()) + "." +
                      std::to_string(reinterpret_cast<std::uintptr_t>(&writer));
    {
      std::ofstream out(temp, std::ios::trunc);
      out << digest.str() << '\n';
      if (!out.flush()) throw ProxyError("cache_failure", "maven", temp, "cannot write the path index");
    }
    std::filesystem::rename(temp, index);
    return CachedBlob{digest, blobs_.size(digest), true};
  });
}

}  // namespace capsule::proxy
