// PEP 691 project and index pages: strict type checks on what we use, unknown keys ignored; the date filter.
#include "proxy/pypi/project_page.h"

#include <set>
#include <utility>

#include "proxy/error.h"
#include "proxy/pypi/project_name.h"
#include "proxy/pypi/version.h"

namespace capsule::proxy::pypi {
namespace {

using nlohmann::json;

// Reads one page; every refusal names the project once its name is known.
class PageReader {
 public:
  [[noreturn]] void fail(const std::string& detail) const {
    throw ProxyError("bad_upstream", "pypi-page", subject_.empty() ? "(unnamed page)" : subject_, detail);
  }

  json parse(std::string_view body) const {
    json document = json::parse(body.begin(), body.end(), nullptr, /*allow_exceptions=*/false);
    if (document.is_discarded()) fail("the page is not valid JSON");
    if (!document.is_object()) fail("the page is not a JSON object");
    return document;
  }

  void set_subject(std::string subject) { subject_ = std::move(subject); }

  // The member `key` of `object`, or nullptr when it is absent or null.
  static const json* member(const json& object, const char* key) {
    const auto it = object.find(key);
    return it == object.end() || it->is_null() ? nullptr : &*it;
  }

  std::string string_at(const json& object, const char* key, const std::string& where) const {
    const json* value = member(object, key);
    if (!value) fail(where + " has no \"" + key + "\"");
    if (!value->is_string()) fail(where + ": \"" + key + "\" is not a string");
    return value->get<std::string>();
  }

  std::optional<std::string> last_serial(const json& document) const {
    const json* meta = member(document, "meta");
    if (!meta) return std::nullopt;
    if (!meta->is_object()) fail("\"meta\" is not an object");
    if (const json* version = member(*meta, "api-version")) {
      if (!version->is_string()) fail("meta.api-version is not a string");
      const auto& text = version->get_ref<const std::string&>();
      if (text.substr(0, text.find('.')) != "1") fail("unsupported api-version " + text + " (we read 1.x)");
    }
    const json* serial = member(*meta, "_last-serial");
    if (!serial) return std::nullopt;
    if (serial->is_number_unsigned()) return std::to_string(serial->get<std::uint64_t>());
    if (serial->is_string()) return serial->get<std::string>();
    fail("meta._last-serial is neither a number nor a string");
  }

  // {"algorithm": "hexdigest", ...}, as in `hashes` and a dict-valued core-metadata.
  std::map<std::string, std::string> digests(const json& value, const std::string& where) const {
    if (!value.is_object()) fail(where + " is not an object");
    std::map<std::string, std::string> out;
    for (const auto& item : value.items()) {
      const std::string& algorithm = item.key();
      constexpr std::string_view kAlgorithmChars = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_-";
      if (algorithm.empty() || algorithm.find_first_not_of(kAlgorithmChars) != std::string::npos)
        fail(where + " names an unusable hash algorithm");
      if (!item.value().is_string()) fail(where + "." + algorithm + " is not a string");
      const auto& digest = item.value().get_ref<const std::string&>();
      if (digest.empty() || digest.find_first_not_of("0123456789abcdefABCDEF") != std::string::npos)
        fail(where + "." + algorithm + " is not a hex digest");
      out.emplace(algorithm, digest);
    }
    return out;
  }

  File file(const json& entry, const std::string& project) const {
    if (!entry.is_object()) fail("a \"files\" entry is not an object");
    File file;
    file.filename = string_at(entry, "filename", "a file");
    check_filename(file.filename);
    const std::string where = "file " + file.filename + ": ";
    file.url = string_at(entry, "url", "file " + file.filename);
    if (file.url.empty()) fail(where + "url is empty");
    const json* hashes = member(entry, "hashes");
    if (hashes) file.hashes = digests(*hashes, where + "hashes");
    if (const json* requires_python = member(entry, "requires-python")) {
      if (!requires_python->is_string()) fail(where + "requires-python is not a string");
      file.requires_python = requires_python->get<std::string>();
    }
    file.core_metadata = core_metadata(entry, where);
    if (const json* yanked = member(entry, "yanked")) {
      if (!yanked->is_boolean() && !yanked->is_string()) fail(where + "yanked is neither a boolean nor a string");
      // PEP 691 wants a reason to be non-empty; "" still says "yanked" (pip's JSON reader would say "not").
      file.yanked = yanked->is_string() && yanked->get_ref<const std::string&>().empty() ? json(true) : *yanked;
    }
    if (const json* size = member(entry, "size")) {
      if (!size->is_number_unsigned()) fail(where + "size is not a non-negative integer");
      file.size = size->get<std::uint64_t>();
    }
    if (const json* upload_time = member(entry, "upload-time")) {
      if (!upload_time->is_string()) fail(where + "upload-time is not a string");
      file.upload_time_text = upload_time->get<std::string>();
      file.upload_time = parse_timestamp(*file.upload_time_text);
      if (!file.upload_time) fail(where + "upload-time \"" + *file.upload_time_text + "\" is not an RFC 3339 instant");
    }
    if (const json* gpg_sig = member(entry, "gpg-sig")) {
      if (!gpg_sig->is_boolean()) fail(where + "gpg-sig is not a boolean");
      file.gpg_sig = gpg_sig->get<bool>();
    }
    file.version = version_from_filename(file.filename, project);
    return file;
  }

 private:
  void check_filename(const std::string& filename) const {
    if (filename.empty() || filename == "." || filename == "..") fail("a file has an unusable filename");
    for (const char c : filename)
      if (c == '/' || c == '\\' || static_cast<unsigned char>(c) < 0x20 || c == 0x7f)
        fail("filename \"" + filename + "\" holds a path separator or control character");
  }

  // PEP 714 renamed the key; older pages carry data-dist-info-metadata or dist-info-metadata.
  json core_metadata(const json& entry, const std::string& where) const {
    for (const char* key : {"core-metadata", "data-dist-info-metadata", "dist-info-metadata"}) {
      const json* value = member(entry, key);
      if (!value) continue;
      if (value->is_boolean()) return *value;
      return json(digests(*value, where + key));
    }
    return nullptr;
  }

  std::string subject_;
};

// Versions in order of first appearance among the files, for pages without `versions` (api 1.0).
std::vector<std::string> versions_of(const std::vector<File>& files) {
  std::vector<std::string> versions;
  std::set<std::string> seen;
  for (const auto& file : files)
    if (!file.version.empty() && seen.insert(canonical_version(file.version)).second)
      versions.push_back(file.version);
  return versions;
}

}  // namespace

ProjectPage parse_project_json(std::string_view body) {
  PageReader reader;
  const json document = reader.parse(body);
  ProjectPage page;
  page.name = reader.string_at(document, "name", "the page");
  if (page.name.empty()) reader.fail("the page has an empty name");
  reader.set_subject(page.name);
  page.last_serial = reader.last_serial(document);

  const json* files = PageReader::member(document, "files");
  if (!files || !files->is_array()) reader.fail("the page has no \"files\" array");
  std::set<std::string> filenames;
  for (const auto& entry : *files) {
    page.files.push_back(reader.file(entry, page.name));
    if (!filenames.insert(page.files.back().filename).second)
      reader.fail("filename " + page.files.back().filename + " appears twice");
  }

  if (const json* versions = PageReader::member(document, "versions")) {
    if (!versions->is_array()) reader.fail("\"versions\" is not an array");
    for (const auto& version : *versions) {
      if (!version.is_string()) reader.fail("a \"versions\" entry is not a string");
      page.versions.push_back(version.get<std::string>());
    }
  } else {
    page.versions = versions_of(page.files);
  }
  return page;
}

bool is_visible(const File& file, Micros cutoff, const FilterOptions& options) {
  return file.upload_time ? *file.upload_time < cutoff : options.include_undated;
}

ProjectPage filter_page(const ProjectPage& page, Micros cutoff, const FilterOptions& options) {
  ProjectPage out;
  out.name = page.name;
  out.last_serial = page.last_serial;
  std::set<std::string> kept_versions;
  for (const auto& file : page.files) {
    if (!is_visible(file, cutoff, options)) continue;
    out.files.push_back(file);
    if (!file.version.empty()) kept_versions.insert(canonical_version(file.version));
  }
  for (const auto& version : page.versions)
    if (kept_versions.count(canonical_version(version))) out.versions.push_back(version);
  return out;
}

const File* find_file(const ProjectPage& page, std::string_view filename) {
  for (const auto& file : page.files)
    if (file.filename == filename) return &file;
  return nullptr;
}

ProjectIndex parse_index_json(std::string_view body) {
  PageReader reader;
  reader.set_subject("/simple/");
  const json document = reader.parse(body);
  ProjectIndex index;
  index.last_serial = reader.last_serial(document);
  const json* projects = PageReader::member(document, "projects");
  if (!projects || !projects->is_array()) reader.fail("the index has no \"projects\" array");
  index.names.reserve(projects->size());
  for (const auto& project : *projects) {
    if (!project.is_object()) reader.fail("a \"projects\" entry is not an object");
    std::string name = reader.string_at(project, "name", "a project");
    if (is_valid_name(name)) index.names.push_back(std::move(name));
  }
  return index;
}

}  // namespace capsule::proxy::pypi
