// maven-metadata.xml through pugixml: one loading point (well-formedness, NUL, encodings to UTF-8), the
// classification shared by inspect and rewrite, and one writer whose output re-reads as the same document.
#include "proxy/maven/metadata.h"

#include <pugixml.hpp>

#include <algorithm>
#include <cstddef>
#include <set>
#include <utility>

#include "proxy/error.h"

namespace capsule::proxy::maven {
namespace {

ProxyError bad_metadata(const std::string& detail) {
  return ProxyError("bad_upstream", "maven-metadata", "maven-metadata.xml", detail);
}

void load(pugi::xml_document& document, std::string_view xml) {
  if (xml.find('\0') != std::string_view::npos) throw bad_metadata("not XML: contains a NUL byte");
  const pugi::xml_parse_result result =
      document.load_buffer(xml.data(), xml.size(), pugi::parse_default, pugi::encoding_auto);
  if (!result)
    throw bad_metadata(std::string("not well-formed XML: ") + result.description() + " at byte " +
                       std::to_string(result.offset));
}

std::string_view local_name(const pugi::xml_node& node) {
  const std::string_view name = node.name();
  const std::size_t colon = name.rfind(':');
  return colon == std::string_view::npos ? name : name.substr(colon + 1);
}

bool is_element(const pugi::xml_node& node, std::string_view name) {
  return node.type() == pugi::node_element && local_name(node) == name;
}

std::vector<pugi::xml_node> children(const pugi::xml_node& parent, std::string_view name) {
  std::vector<pugi::xml_node> found;
  for (const pugi::xml_node& node : parent.children())
    if (is_element(node, name)) found.push_back(node);
  return found;
}

pugi::xml_node child(const pugi::xml_node& parent, std::string_view name) {
  for (const pugi::xml_node& node : parent.children())
    if (is_element(node, name)) return node;
  return {};
}

std::string trimmed_text(const pugi::xml_node& node) {
  const std::string_view text = node.text().get();
  constexpr std::string_view kSpace = " \t\r\n";
  const std::size_t first = text.find_first_not_of(kSpace);
  if (first == std::string_view::npos) return {};
  return std::string(text.substr(first, text.find_last_not_of(kSpace) - first + 1));
}

void set_text(pugi::xml_node node, const std::string& value) {
  while (node.first_child()) node.remove_child(node.first_child());
  node.append_child(pugi::node_pcdata).set_value(value.c_str());
}

MetadataInfo::Kind classify(const pugi::xml_node& root) {
  if (!is_element(root, "metadata")) return MetadataInfo::Kind::kUnknown;
  const pugi::xml_node versioning = child(root, "versioning");
  if (child(versioning, "snapshot") || child(versioning, "snapshotVersions")) return MetadataInfo::Kind::kSnapshot;
  if (child(versioning, "versions")) return MetadataInfo::Kind::kArtifact;
  if (child(root, "plugins")) return MetadataInfo::Kind::kPlugins;
  return MetadataInfo::Kind::kUnknown;
}

// Collects the output, writing a carriage return as &#13;: pugixml writes it raw, and a reader turns a raw CR into
// LF. No other CR reaches the writer: attributes are escaped by pugixml, and parsing (parse_eol) leaves none in
// CDATA, whose text cannot be escaped.
class StringWriter : public pugi::xml_writer {
 public:
  void write(const void* data, std::size_t size) override {
    const std::string_view chunk(static_cast<const char*>(data), size);
    for (std::size_t start = 0; start < chunk.size();) {
      const std::size_t cr = std::min(chunk.find('\r', start), chunk.size());
      text.append(chunk.substr(start, cr - start));
      if (cr < chunk.size()) text.append("&#13;");
      start = cr + 1;
    }
  }
  std::string text;
};

// Removes the text the writer cannot carry through a re-read: a run of adjacent PCDATA nodes that holds only
// spaces, tabs and newlines (or nothing, as &#0; leaves) is written raw, so a reader drops it, and it would also
// switch off the indentation around it. Such runs come from character references (&#x20;) or from removed
// elements; Maven ignores them. Runs with other text are kept: a reader sees them as one node of the same text.
void drop_blank_text(pugi::xml_node parent) {
  std::vector<pugi::xml_node> elements{parent};
  std::vector<pugi::xml_node> blank;
  while (!elements.empty()) {
    const pugi::xml_node element = elements.back();
    elements.pop_back();
    std::vector<pugi::xml_node> run;
    bool run_is_blank = true;
    for (pugi::xml_node node = element.first_child();; node = node.next_sibling()) {
      if (node && node.type() == pugi::node_pcdata) {
        run.push_back(node);
        const std::string_view text = node.value();
        run_is_blank = run_is_blank && text.find_first_not_of(" \t\n") == std::string_view::npos;
        continue;
      }
      if (run_is_blank) blank.insert(blank.end(), run.begin(), run.end());
      run.clear();
      run_is_blank = true;
      if (!node) break;
      if (node.type() == pugi::node_element) elements.push_back(node);
    }
  }
  for (const pugi::xml_node& node : blank) node.parent().remove_child(node);
}

std::string serialize(pugi::xml_document& document) {
  drop_blank_text(document);
  pugi::xml_node declaration = document.prepend_child(pugi::node_declaration);
  declaration.append_attribute("version") = "1.0";
  declaration.append_attribute("encoding") = "UTF-8";
  StringWriter writer;
  document.save(writer, "  ", pugi::format_indent, pugi::encoding_utf8);
  return std::move(writer.text);
}

// The only <name> child of parent after removing any repeats, or a null node when there is none.
pugi::xml_node single_child(pugi::xml_node parent, std::string_view name) {
  std::vector<pugi::xml_node> found = children(parent, name);
  for (std::size_t i = 1; i < found.size(); ++i) parent.remove_child(found[i]);
  return found.empty() ? pugi::xml_node() : found.front();
}

// Sets <name> under parent to value, adding it before `before` (or last) when absent; removes it when value is
// nullopt.
void put_element(pugi::xml_node parent, const char* name, const std::optional<std::string>& value,
                 const pugi::xml_node& before) {
  pugi::xml_node node = single_child(parent, name);
  if (!value) {
    if (node) parent.remove_child(node);
    return;
  }
  if (!node) node = before ? parent.insert_child_before(name, before) : parent.append_child(name);
  set_text(node, *value);
}

struct KeptVersion {
  std::string version;
  std::optional<Micros> published;  // nullopt: undated, kept because include_undated
};

// The version with the newest publish time (undated oldest; the later one on ties), optionally non-snapshots only.
std::optional<std::string> newest(const std::vector<KeptVersion>& kept, bool releases_only) {
  const KeptVersion* best = nullptr;
  for (const KeptVersion& candidate : kept) {
    if (releases_only && is_snapshot_version(candidate.version)) continue;
    if (best == nullptr || candidate.published >= best->published) best = &candidate;
  }
  if (best == nullptr) return std::nullopt;
  return best->version;
}

}  // namespace

MetadataInfo inspect_metadata(std::string_view xml) {
  pugi::xml_document document;
  load(document, xml);
  const pugi::xml_node root = document.document_element();
  MetadataInfo info;
  info.kind = classify(root);
  if (!is_element(root, "metadata")) return info;
  info.group_id = trimmed_text(child(root, "groupId"));
  info.artifact_id = trimmed_text(child(root, "artifactId"));
  info.version = trimmed_text(child(root, "version"));
  if (info.kind == MetadataInfo::Kind::kArtifact) {
    for (const pugi::xml_node& node : children(child(child(root, "versioning"), "versions"), "version")) {
      std::string version = trimmed_text(node);
      if (!version.empty()) info.versions.push_back(std::move(version));
    }
  }
  return info;
}

std::optional<std::string> rewrite_artifact_metadata(std::string_view xml, const PublishTime& publish_time,
                                                     const RewriteOptions& options) {
  pugi::xml_document document;
  load(document, xml);
  const pugi::xml_node root = document.document_element();
  if (classify(root) != MetadataInfo::Kind::kArtifact)
    throw bad_metadata("not artifact-level metadata (no <versioning><versions>, or a snapshot's)");
  if (children(root, "versioning").size() != 1) throw bad_metadata("repeated <versioning> element");
  pugi::xml_node versioning = child(root, "versioning");
  if (children(versioning, "versions").size() != 1) throw bad_metadata("repeated <versions> element");
  pugi::xml_node versions = child(versioning, "versions");

  std::vector<KeptVersion> kept;
  std::set<std::string> seen;
  for (const pugi::xml_node& node : children(versions, "version")) {
    std::string version = trimmed_text(node);
    if (!version.empty() && seen.insert(version).second) {
      const std::optional<Micros> published = publish_time(version);
      if (published ? *published < options.cutoff : options.include_undated) {
        set_text(node, version);  // exactly the text that was dated, whatever else the element held
        kept.push_back(KeptVersion{std::move(version), published});
        continue;
      }
    }
    versions.remove_child(node);
  }
  if (kept.empty()) return std::nullopt;

  const std::optional<std::string> latest = newest(kept, false);
  const std::optional<std::string> release = newest(kept, true);
  std::optional<Micros> last_published;
  for (const KeptVersion& version : kept)
    if (version.published && (!last_published || *version.published > *last_published))
      last_published = version.published;

  if (pugi::xml_node top_version = single_child(root, "version")) {
    const std::string value = trimmed_text(top_version);
    const bool top_kept =
        std::any_of(kept.begin(), kept.end(), [&value](const KeptVersion& k) { return k.version == value; });
    set_text(top_version, top_kept ? value : *latest);
  }
  put_element(versioning, "release", release, versions);
  const pugi::xml_node release_node = child(versioning, "release");
  put_element(versioning, "latest", latest, release_node ? release_node : versions);
  put_element(versioning, "lastUpdated",
              last_published ? std::optional<std::string>(format_maven_timestamp(*last_published)) : std::nullopt,
              versions.next_sibling());
  return serialize(document);
}

std::string synthesize_artifact_metadata(const std::string& group_id, const std::string& artifact_id,
                                         const std::vector<std::string>& versions, std::optional<Micros> last_updated) {
  std::vector<std::string> sorted;
  for (const std::string& version : std::set<std::string>(versions.begin(), versions.end()))
    if (!version.empty()) sorted.push_back(version);
  sort_versions(sorted);

  pugi::xml_document document;
  pugi::xml_node root = document.append_child("metadata");
  root.append_child("groupId").text().set(group_id.c_str());
  root.append_child("artifactId").text().set(artifact_id.c_str());
  pugi::xml_node versioning = root.append_child("versioning");
  if (!sorted.empty()) versioning.append_child("latest").text().set(sorted.back().c_str());
  const auto release = std::find_if(sorted.rbegin(), sorted.rend(),
                                    [](const std::string& version) { return !is_snapshot_version(version); });
  if (release != sorted.rend()) versioning.append_child("release").text().set(release->c_str());
  pugi::xml_node list = versioning.append_child("versions");
  for (const std::string& version : sorted) list.append_child("version").text().set(version.c_str());
  if (last_updated) versioning.append_child("lastUpdated").text().set(format_maven_timestamp(*last_updated).c_str());
  return serialize(document);
}

}  // namespace capsule::proxy::maven
