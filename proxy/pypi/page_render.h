// Renders (filtered) project pages and the root index as PEP 691 v1 JSON and PEP 503 HTML. Output is a pure
// function of the input (stable key and attribute order), so its hash can serve as a strong ETag.
#pragma once

#include <functional>
#include <string>

#include "proxy/pypi/project_page.h"

namespace capsule::proxy::pypi {

// The URL a client should fetch a file from (the proxy's own), given the file.
using FileUrl = std::function<std::string(const File&)>;

// The api-version we claim: 1.1 (PEP 700: versions, size, upload-time); nothing newer is emitted.
inline constexpr const char* kApiVersion = "1.1";

// {"files": [...], "meta": {"_last-serial": N, "api-version": "1.1"}, "name": ..., "versions": [...]}, keys
// sorted. Each file has filename, url, hashes, yanked (always, false included, as pypi.org does), and when
// known requires-python, core-metadata and data-dist-info-metadata (the same value; never the bare
// "dist-info-metadata" key, on whose dict value pip 23.0 crashes), gpg-sig, size and upload-time (upstream's
// text byte for byte). _last-serial is a number when it is a plain decimal, as pypi.org sends it, else a
// string. Invalid UTF-8 (only possible through FileUrl) is replaced, never thrown on.
std::string render_project_json(const ProjectPage& page, const FileUrl& file_url);

// An HTML5 page with <meta name="pypi:repository-version" content="1.1"> and one <a> per file: href = url +
// "#sha256=<hex>" (else the first algorithm's hash, any fragment of url replaced; url unchanged without
// hashes), then data-requires-python, data-yanked ("" without a reason), data-core-metadata and
// data-dist-info-metadata ("sha256=<hex>" or "true"), data-gpg-sig, data-upload-time, when they apply.
// Every attribute value and text is HTML-escaped (& < > " ').
std::string render_project_html(const ProjectPage& page, const FileUrl& file_url);

// {"meta": {...}, "projects": [{"name": ...}, ...]}.
std::string render_index_json(const ProjectIndex& index);
// One <a href="<normalized name>/"> per project.
std::string render_index_html(const ProjectIndex& index);

// & < > " ' as character references; everything else unchanged.
std::string html_escape(std::string_view text);

}  // namespace capsule::proxy::pypi
