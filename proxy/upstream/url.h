// Url: the one parser for the absolute http(s) URLs upstreams and pages carry, and RFC 3986 reference
// resolution for the relative file URLs PEP 691 pages may hold.
#pragma once

#include <optional>
#include <string>
#include <string_view>

namespace capsule::proxy {

struct Url {
  std::string scheme;       // "http" or "https", lower case
  std::string host;         // lower case; an IPv6 literal without brackets
  unsigned short port = 0;  // explicit or the scheme's default
  std::string target;       // path and query, at least "/" (the fragment is dropped)

  std::string authority() const;  // "host[:port]" as the Host header carries it (port only when not the default)
  std::string origin() const;     // "https://" + authority()
  std::string str() const;        // origin() + target
};

// Absolute http/https URLs only; nullopt for other schemes, userinfo, an empty host, bad ports (0, > 65535, not
// digits), spaces, control characters or non-ASCII bytes. A host is letters, digits, '-', '.', '_' and '~', or
// a bracketed IPv6 literal. The path is kept as written (no dot-segment removal, no re-encoding).
std::optional<Url> parse_url(std::string_view text);
// `reference` resolved against `base` (RFC 3986 section 5.2, strict, with dot-segment removal); the fragment
// is dropped. Any scheme works (e.g. "mirror:/simple/demo/"); nullopt when base has no scheme, or when either
// holds spaces, control characters or non-ASCII bytes.
std::optional<std::string> resolve_url(std::string_view base, std::string_view reference);

}  // namespace capsule::proxy
