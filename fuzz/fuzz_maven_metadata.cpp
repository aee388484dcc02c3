// libFuzzer target: bytes as an upstream maven-metadata.xml through inspect_metadata, rewrite_artifact_metadata
// (publish times derived from a hash of each version) and synthesize_artifact_metadata; checks that what the
// proxy would serve re-parses and shows only versions published before the cutoff.
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <optional>
#include <pugixml.hpp>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include "proxy/error.h"
#include "proxy/maven/metadata.h"

namespace {

using capsule::proxy::Micros;
using capsule::proxy::ProxyError;
using capsule::proxy::maven::canonical_version;
using capsule::proxy::maven::compare_versions;
using capsule::proxy::maven::inspect_metadata;
using capsule::proxy::maven::is_snapshot_version;
using capsule::proxy::maven::MetadataInfo;
using capsule::proxy::maven::rewrite_artifact_metadata;
using capsule::proxy::maven::RewriteOptions;
using capsule::proxy::maven::synthesize_artifact_metadata;

constexpr Micros kCutoff = 500;
constexpr std::string_view kDeclaration = "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n";

void check(bool ok, const char* invariant) {
  if (ok) return;
  std::fprintf(stderr, "fuzz_maven_metadata: invariant violated: %s\n", invariant);
  std::abort();
}

std::uint64_t fnv1a(std::string_view text) {
  std::uint64_t hash = 14695981039346656037ull;
  for (const char c : text) hash = (hash ^ static_cast<unsigned char>(c)) * 1099511628211ull;
  return hash;
}

// One version in five is undated; the others fall on either side of kCutoff, some exactly on it.
std::optional<Micros> publish_time(const std::string& version) {
  const std::uint64_t hash = fnv1a(version);
  if (hash % 5 == 0) return std::nullopt;
  return static_cast<Micros>(hash % 1001);
}

bool visible(const std::string& version, bool include_undated) {
  const auto published = publish_time(version);
  return published ? *published < kCutoff : include_undated;
}

std::string_view local_name(const pugi::xml_node& node) {
  const std::string_view name = node.name();
  const std::size_t colon = name.rfind(':');
  return colon == std::string_view::npos ? name : name.substr(colon + 1);
}

// The first <name> element under parent, namespace prefix ignored, as inspect_metadata reads it.
pugi::xml_node element(const pugi::xml_node& parent, std::string_view name) {
  for (const pugi::xml_node& node : parent.children())
    if (node.type() == pugi::node_element && local_name(node) == name) return node;
  return {};
}

std::optional<std::string> element_text(const pugi::xml_node& parent, std::string_view name) {
  const pugi::xml_node node = element(parent, name);
  if (!node) return std::nullopt;
  const std::string text = node.text().get();
  const std::size_t first = text.find_first_not_of(" \t\r\n");
  if (first == std::string::npos) return std::string();
  return text.substr(first, text.find_last_not_of(" \t\r\n") - first + 1);
}

void check_version_order(const std::vector<std::string>& versions) {
  const std::size_t count = versions.size() < 12 ? versions.size() : 12;
  for (std::size_t i = 0; i < count; ++i)
    for (std::size_t j = 0; j < count; ++j) {
      const int forward = compare_versions(versions[i], versions[j]);
      const int backward = compare_versions(versions[j], versions[i]);
      check((forward < 0) == (backward > 0) && (forward == 0) == (backward == 0), "compare_versions is antisymmetric");
      if (forward == 0)
        check(canonical_version(versions[i]) == canonical_version(versions[j]),
              "equal versions have one canonical form");
    }
}

void check_synthesis(const MetadataInfo& info) {
  const std::string xml = synthesize_artifact_metadata(info.group_id, info.artifact_id, info.versions);
  check(xml.rfind(kDeclaration, 0) == 0, "synthesized metadata starts with the XML declaration");
  const MetadataInfo again = inspect_metadata(xml);
  check(again.kind == MetadataInfo::Kind::kArtifact, "synthesized metadata is artifact-level");
  check(std::set<std::string>(again.versions.begin(), again.versions.end()) ==
            std::set<std::string>(info.versions.begin(), info.versions.end()),
        "synthesized metadata lists every version");
  check(again.versions.size() == std::set<std::string>(info.versions.begin(), info.versions.end()).size(),
        "synthesized metadata has no repeats");
  for (std::size_t i = 1; i < again.versions.size(); ++i)
    check(compare_versions(again.versions[i - 1], again.versions[i]) <= 0, "synthesized versions are sorted");
}

void check_rewrite(std::string_view xml, const MetadataInfo& info, bool include_undated) {
  const RewriteOptions options{kCutoff, include_undated};
  std::optional<std::string> rewritten;
  try {
    rewritten = rewrite_artifact_metadata(xml, publish_time, options);
  } catch (const ProxyError& error) {
    check(error.code() == "bad_upstream", "a refused rewrite is a bad upstream");
    return;  // repeated <versioning>/<versions>
  }

  std::vector<std::string> expected;
  std::set<std::string> seen;
  for (const std::string& version : info.versions)
    if (seen.insert(version).second && visible(version, include_undated)) expected.push_back(version);
  if (!rewritten) {
    check(expected.empty(), "nullopt only when no version is visible");
    return;
  }

  check(rewritten->rfind(kDeclaration, 0) == 0, "rewritten metadata starts with the XML declaration");
  const MetadataInfo again = inspect_metadata(*rewritten);
  check(again.kind == MetadataInfo::Kind::kArtifact, "rewritten metadata is artifact-level");
  check(again.versions == expected, "exactly the visible versions, in their original order");

  pugi::xml_document document;
  check(static_cast<bool>(document.load_buffer(rewritten->data(), rewritten->size())), "output re-parses");
  const pugi::xml_node versioning = element(document.document_element(), "versioning");
  const std::set<std::string> kept(expected.begin(), expected.end());
  const auto latest = element_text(versioning, "latest");
  check(latest && kept.count(*latest) != 0, "<latest> is a kept version");
  if (const auto release = element_text(versioning, "release"))
    check(kept.count(*release) != 0 && !is_snapshot_version(*release), "<release> is a kept non-snapshot");
  if (const auto top = element_text(document.document_element(), "version"))
    check(kept.count(*top) != 0, "a top-level <version> is a kept version");

  check(rewrite_artifact_metadata(xml, publish_time, options) == rewritten, "the rewrite is deterministic");
  check(rewrite_artifact_metadata(*rewritten, publish_time, options) == rewritten, "the rewrite is idempotent");
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string_view xml(reinterpret_cast<const char*>(data), size);
  MetadataInfo info;
  try {
    info = inspect_metadata(xml);
  } catch (const ProxyError& error) {
    check(error.code() == "bad_upstream", "unreadable metadata is a bad upstream");
    return 0;
  }
  check_version_order(info.versions);
  if (info.kind != MetadataInfo::Kind::kArtifact) {
    bool refused = false;
    try {
      rewrite_artifact_metadata(xml, publish_time, RewriteOptions{kCutoff, false});
    } catch (const ProxyError&) {
      refused = true;
    }
    check(refused, "only artifact-level metadata is rewritten");
    return 0;
  }
  check_rewrite(xml, info, false);
  check_rewrite(xml, info, true);
  check_synthesis(info);
  return 0;
}
