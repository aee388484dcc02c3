// A PyPI project page (PEP 691 JSON as pypi.org serves it) read into typed form, and the date mask applied to
// it: only files uploaded strictly before the cutoff stay, and `versions` is recomputed from them.
#pragma once

#include <cstdint>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "proxy/cutoff.h"

namespace capsule::proxy::pypi {

struct File {
  std::string filename;  // never empty; no '/', '\\' or control characters; not "." or ".."
  std::string url;       // as the page gave it (may be relative to the page); the caller resolves it
  std::map<std::string, std::string> hashes;  // algorithm -> hex digest, e.g. {"sha256": "..."}
  std::optional<std::string> requires_python;
  nlohmann::json core_metadata;  // null when absent, else true/false or {"sha256": "..."} (PEP 658/714)
  nlohmann::json yanked = false;  // false, true or the reason string, never "" (PEP 592)
  std::optional<std::uint64_t> size;
  std::optional<std::string> upload_time_text;  // byte-exact as upstream wrote it (PEP 700)
  std::optional<Micros> upload_time;            // the same instant, parsed
  std::optional<bool> gpg_sig;
  std::string version;  // from the filename (see version_from_filename); "" when not recognized
};

struct ProjectPage {
  std::string name;
  std::vector<std::string> versions;  // upstream order
  std::vector<File> files;            // upstream order; filenames are unique
  std::optional<std::string> last_serial;
};

// Reads a PEP 691 project page, api-version 1.x (1.0 through 1.4 as pypi.org serves them): PEP 700 `versions`,
// `size`, `upload-time`; PEP 714 `core-metadata`, falling back to the older `data-dist-info-metadata` and
// `dist-info-metadata` keys; PEP 592 `yanked`; meta._last-serial (number or string). Without `versions`
// (api 1.0) they are taken from the filenames in order of first appearance. Unknown keys are ignored.
// Throws ProxyError("bad_upstream", "pypi-page", <project>, detail) when the body is not JSON, a field
// has the wrong type, the api-version's major is not 1, a filename is unusable or repeated, a url is empty, a
// hash is not hex, or an upload-time is not an RFC 3339 instant. Null fields read as absent; no `hashes` as {}.
ProjectPage parse_project_json(std::string_view body);

struct FilterOptions {
  bool include_undated = false;  // keep files without upload-time (pip and uv reject or warn about them)
};

// The page as of `cutoff`: a file stays iff its upload_time < cutoff (strictly: a file uploaded exactly at the
// cutoff is hidden, as uv --exclude-newer and pip --uploaded-prior-to do), or it is undated and
// include_undated is set. `versions` keeps the upstream entries, in upstream order, that still have a kept file
// (compared by canonical_version); so versions without any file are dropped too.
ProjectPage filter_page(const ProjectPage& page, Micros cutoff, const FilterOptions& options);
// The rule filter_page applies to each file.
bool is_visible(const File& file, Micros cutoff, const FilterOptions& options);

// The file with exactly this filename, or nullptr.
const File* find_file(const ProjectPage& page, std::string_view filename);

struct ProjectIndex {
  std::vector<std::string> names;  // as upstream spells them
  std::optional<std::string> last_serial;
};

// Reads a PEP 691 root index ({"meta": {...}, "projects": [{"name": ...}, ...]}); names that are not PEP 508
// names are left out (no client could ask for them). Throws ProxyError 502 as parse_project_json does.
ProjectIndex parse_index_json(std::string_view body);

}  // namespace capsule::proxy::pypi
