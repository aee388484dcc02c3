// PEP 691 content negotiation for the simple index: which of JSON and HTML a request gets, from its Accept
// header (q-values, wildcards, the "latest" aliases) and the optional ?format= query parameter.
#pragma once

#include <optional>
#include <string>
#include <string_view>

namespace capsule::proxy::pypi {

enum class Format { kJson, kHtml };

struct Negotiated {
  Format format;
  std::string content_type;  // for the Content-Type header: a v1 type, or "text/html; charset=utf-8"
};

inline constexpr std::string_view kJsonType = "application/vnd.pypi.simple.v1+json";
inline constexpr std::string_view kHtmlType = "application/vnd.pypi.simple.v1+html";

// The representation to answer with, or nullopt for 406 Not Acceptable. Never throws.
//
// We offer v1+json, v1+html and text/html (the latter two are the same page). Each offer takes the q-value of
// the most specific Accept range that matches it (exact type, then type/*, then */*); the latest+json /
// latest+html aliases count as exact matches of the v1 types. The highest q > 0 wins; on equal q the more
// specific match wins (a named type over type/* over */*); then the server's preference decides: among named
// types JSON > v1+html > text/html (so pip >= 23 and uv get JSON), among wildcard matches text/html > v1+html
// > JSON, because a client that names no type ("*/*", requests' default) most likely predates PEP 691 and
// parses HTML. A missing or empty Accept, or one in which no entry parses, counts as "*/*" and so gets
// text/html, as PEP 503 clients expect. Entries with malformed parameters or q-values are skipped, as real
// servers do.
//
// `format_query` is the decoded value of ?format= (empty when absent). When it names one of the types above
// or a latest alias, it overrides Accept (PEP 691); as form decoding turns an unescaped '+' into ' ', a space
// there is read as '+'. Any other value is ignored and Accept decides (PEP 691 allows either).
std::optional<Negotiated> negotiate(std::string_view accept, std::string_view format_query);

}  // namespace capsule::proxy::pypi
