// libFuzzer target: bytes as an upstream PEP 691 project page (parse -> date filter -> JSON and HTML renderers),
// as a root index, and as an Accept header / ?format= value; checks the mask, escaping and round-trip invariants.
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <set>
#include <string>
#include <string_view>

#include "proxy/error.h"
#include "proxy/pypi/negotiation.h"
#include "proxy/pypi/page_render.h"
#include "proxy/pypi/project_page.h"
#include "proxy/pypi/version.h"

namespace {

using capsule::proxy::Micros;
using capsule::proxy::ProxyError;
using namespace capsule::proxy::pypi;

void check(bool ok, const char* invariant) {
  if (ok) return;
  std::fprintf(stderr, "fuzz_pypi_page: invariant violated: %s\n", invariant);
  std::abort();
}

std::size_t count(std::string_view text, char c) {
  std::size_t n = 0;
  for (const char x : text) n += x == c;
  return n;
}

std::string file_url(const File& file) { return "/pypi/snapshot/2023-04-11T00:00:00Z/files/" + file.filename; }

void check_parsed(const ProjectPage& page) {
  check(!page.name.empty(), "a page has a name");
  std::set<std::string> filenames;
  for (const auto& file : page.files) {
    check(!file.filename.empty() && file.filename != "." && file.filename != "..", "filenames are usable");
    check(file.filename.find_first_of("/\\") == std::string::npos, "filenames hold no path separator");
    check(filenames.insert(file.filename).second, "filenames are unique");
    check(file.upload_time.has_value() == file.upload_time_text.has_value(), "upload-time text and instant agree");
    check(file.yanked.is_boolean() || (file.yanked.is_string() && file.yanked != ""), "yanked is a boolean or a reason");
    check(find_file(page, file.filename) == &file, "find_file finds each file");
  }
}

void check_filtered(const ProjectPage& page, const ProjectPage& kept, Micros cutoff, const FilterOptions& options) {
  std::size_t expected = 0;
  for (const auto& file : page.files)
    expected += file.upload_time ? *file.upload_time < cutoff : options.include_undated;
  check(kept.files.size() == expected, "exactly the files before the cutoff are kept");
  std::set<std::string> kept_versions;
  for (const auto& file : kept.files) {
    check(file.upload_time ? *file.upload_time < cutoff : options.include_undated, "no file at or after the cutoff");
    kept_versions.insert(canonical_version(file.version));
  }
  std::size_t upstream_index = 0;  // kept.versions is a subsequence of page.versions
  for (const auto& version : kept.versions) {
    while (upstream_index < page.versions.size() && page.versions[upstream_index] != version) ++upstream_index;
    check(upstream_index < page.versions.size(), "versions keep upstream order and add nothing");
    ++upstream_index;
    check(kept_versions.count(canonical_version(version)) == 1, "every listed version has a kept file");
  }
}

void check_html(const ProjectPage& page, const std::string& html) {
  // Our markup only: 13 tags for the page and <a>, </a>, <br /> per file; every '<', '>' and '"' is ours.
  check(count(html, '<') == 13 + 3 * page.files.size(), "no '<' from the data reaches the HTML");
  check(count(html, '>') == 13 + 3 * page.files.size(), "no '>' from the data reaches the HTML");
  std::size_t attributes = 0;
  for (const auto& file : page.files) {
    const bool metadata = file.core_metadata.is_object() || file.core_metadata == true;
    attributes += 1 + file.requires_python.has_value() + (file.yanked != false) + 2 * metadata +
                  file.gpg_sig.has_value() + file.upload_time_text.has_value();
  }
  check(count(html, '"') == 6 + 2 * attributes, "no '\"' from the data reaches the HTML");
  check(count(html, '\'') == 0, "no '\\'' from the data reaches the HTML");
}

void project_page(std::string_view body) {
  ProjectPage page;
  try {
    page = parse_project_json(body);
  } catch (const ProxyError& e) {
    check(e.code() == "bad_upstream", "a refused page is bad_upstream (502)");
    return;
  }
  check_parsed(page);

  // The boundary case: the first dated file's own upload time, which must hide it.
  Micros cutoff = 1681171200LL * 1000000;  // 2023-04-11
  for (const auto& file : page.files)
    if (file.upload_time) {
      cutoff = *file.upload_time;
      break;
    }
  for (const bool include_undated : {false, true}) {
    const FilterOptions options{include_undated};
    const ProjectPage kept = filter_page(page, cutoff, options);
    check_filtered(page, kept, cutoff, options);

    const std::string json = render_project_json(kept, file_url);
    check(json.find("\"dist-info-metadata\"") == std::string::npos, "no bare dist-info-metadata key");
    ProjectPage again;
    try {
      again = parse_project_json(json);
    } catch (const ProxyError& e) {
      std::fprintf(stderr, "fuzz_pypi_page: our own JSON was refused: %s\n", e.what());
      std::abort();
    }
    check(again.files.size() == kept.files.size() && again.versions == kept.versions, "the JSON reads back");
    check(filter_page(again, cutoff, options).files.size() == again.files.size(), "filtering is idempotent");
    check(render_project_json(again, file_url) == json, "render(parse(render(page))) == render(page)");

    const std::string html = render_project_html(kept, file_url);
    check_html(kept, html);
    check(render_project_html(kept, file_url) == html, "HTML output is deterministic");
  }
}

void index_page(std::string_view body) {
  ProjectIndex index;
  try {
    index = parse_index_json(body);
  } catch (const ProxyError& e) {
    check(e.code() == "bad_upstream", "a refused index is bad_upstream (502)");
    return;
  }
  const std::string json = render_index_json(index);
  check(parse_index_json(json).names == index.names, "the index JSON reads back");
  const std::string html = render_index_html(index);
  check(count(html, '<') == 11 + 2 * index.names.size(), "no '<' from the data reaches the index HTML");
}

void negotiation(std::string_view text) {
  // First line as Accept, the rest as ?format=.
  const std::size_t newline = text.find('\n');
  const std::string_view accept = text.substr(0, newline);
  const std::string_view format = newline == std::string_view::npos ? "" : text.substr(newline + 1);
  for (const auto& chosen : {negotiate(accept, format), negotiate(accept, "")}) {
    if (!chosen) continue;
    check(chosen->format == (chosen->content_type == kJsonType ? Format::kJson : Format::kHtml),
          "the content type matches the format");
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  // ProxyError is the only way the parsers may refuse; anything else escaping is a bug.
  try {
    negotiation(text);
    project_page(text);
    index_page(text);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "fuzz_pypi_page: unexpected exception: %s\n", e.what());
    std::abort();
  }
  return 0;
}
