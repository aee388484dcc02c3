// Url parsing and RFC 3986 reference resolution: components split as in appendix B, merged as in section 5.2,
// recomposed without the fragment.
#include "proxy/upstream/url.h"

#include <algorithm>
#include <cctype>

#include "base/ascii.h"

namespace capsule::proxy {
namespace {

// Space, control characters and non-ASCII bytes never appear in a URL we accept.
bool has_forbidden_byte(std::string_view text) {
  return std::any_of(text.begin(), text.end(), [](char c) {
    const auto byte = static_cast<unsigned char>(c);
    return byte <= 0x20 || byte >= 0x7f;
  });
}

bool is_alpha(char c) { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z'); }
bool is_hex(char c) { return base::is_ascii_digit(c) || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F'); }

std::string lower(std::string_view text) {
  std::string out(text);
  for (char& c : out) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return out;
}

// The five components of a URI reference; absent and empty differ for scheme, authority and query.
struct Components {
  std::optional<std::string_view> scheme;
  std::optional<std::string_view> authority;
  std::string_view path;
  std::optional<std::string_view> query;
};

bool is_scheme(std::string_view text) {
  return !text.empty() && is_alpha(text.front()) && std::all_of(text.begin(), text.end(), [](char c) {
    return is_alpha(c) || base::is_ascii_digit(c) || c == '+' || c == '-' || c == '.';
  });
}

Components split(std::string_view text) {
  Components parts;
  text = text.substr(0, text.find('#'));
  const auto colon = text.find_first_of(":/?");
  if (colon != std::string_view::npos && text[colon] == ':' && is_scheme(text.substr(0, colon))) {
    parts.scheme = text.substr(0, colon);
    text.remove_prefix(colon + 1);
  }
  if (text.starts_with("//")) {
    text.remove_prefix(2);
    const auto end = std::min(text.find_first_of("/?"), text.size());
    parts.authority = text.substr(0, end);
    text.remove_prefix(end);
  }
  const auto question = text.find('?');
  parts.path = text.substr(0, question);
  if (question != std::string_view::npos) parts.query = text.substr(question + 1);
  return parts;
}

// RFC 3986 section 5.2.4.
std::string remove_dot_segments(std::string_view input) {
  std::string output;
  auto drop_last_segment = [&output] {
    const auto slash = output.rfind('/');
    output.erase(slash == std::string::npos ? 0 : slash);
  };
  while (!input.empty()) {
    if (input.starts_with("../")) {
      input.remove_prefix(3);
    } else if (input.starts_with("./")) {
      input.remove_prefix(2);
    } else if (input.starts_with("/./")) {
      input.remove_prefix(2);
    } else if (input == "/.") {
      input = "/";
    } else if (input.starts_with("/../")) {
      input.remove_prefix(3);
      drop_last_segment();
    } else if (input == "/..") {
      input = "/";
      drop_last_segment();
    } else if (input == "." || input == "..") {
      input = {};
    } else {
      const auto end = std::min(input.find('/', 1), input.size());
      output.append(input.substr(0, end));
      input.remove_prefix(end);
    }
  }
  return output;
}

// RFC 3986 section 5.2.3.
std::string merge(const Components& base, std::string_view reference_path) {
  if (base.authority && base.path.empty()) return "/" + std::string(reference_path);
  const auto slash = base.path.rfind('/');
  if (slash == std::string_view::npos) return std::string(reference_path);
  return std::string(base.path.substr(0, slash + 1)).append(reference_path);
}

bool parse_port(std::string_view text, unsigned short& port) {
  if (text.empty() || text.size() > 5 || !std::all_of(text.begin(), text.end(), base::is_ascii_digit)) return false;
  unsigned value = 0;
  for (char c : text) value = value * 10 + static_cast<unsigned>(c - '0');
  if (value == 0 || value > 65535) return false;
  port = static_cast<unsigned short>(value);
  return true;
}

unsigned short default_port(std::string_view scheme) { return scheme == "https" ? 443 : 80; }

}  // namespace

std::string Url::authority() const {
  std::string out = host.find(':') == std::string::npos ? host : "[" + host + "]";
  if (port != default_port(scheme)) {
    out += ':';
    out += std::to_string(port);
  }
  return out;
}

std::string Url::origin() const { return scheme + "://" + authority(); }

std::string Url::str() const { return origin() + target; }

std::optional<Url> parse_url(std::string_view text) {
  if (has_forbidden_byte(text)) return std::nullopt;
  const Components parts = split(text);
  if (!parts.scheme || !parts.authority) return std::nullopt;
  Url url;
  url.scheme = lower(*parts.scheme);
  if (url.scheme != "http" && url.scheme != "https") return std::nullopt;
  url.port = default_port(url.scheme);

  std::string_view authority = *parts.authority;
  if (authority.find('@') != std::string_view::npos) return std::nullopt;
  std::string_view host, port;
  bool has_port = false;
  if (authority.starts_with('[')) {
    const auto close = authority.find(']');
    if (close == std::string_view::npos) return std::nullopt;
    host = authority.substr(1, close - 1);
    const std::string_view rest = authority.substr(close + 1);
    if (!rest.empty() && rest.front() != ':') return std::nullopt;
    has_port = !rest.empty();
    if (has_port) port = rest.substr(1);
    const bool literal_chars =
        std::all_of(host.begin(), host.end(), [](char c) { return is_hex(c) || c == ':' || c == '.'; });
    if (!literal_chars || host.find(':') == std::string_view::npos) return std::nullopt;
  } else {
    const auto colon = authority.find(':');
    host = authority.substr(0, colon);
    has_port = colon != std::string_view::npos;
    if (has_port) port = authority.substr(colon + 1);
    const bool name_chars = std::all_of(host.begin(), host.end(), [](char c) {
      return is_alpha(c) || base::is_ascii_digit(c) || c == '-' || c == '.' || c == '_' || c == '~';
    });
    if (!name_chars) return std::nullopt;
  }
  if (host.empty()) return std::nullopt;
  // An empty port after ':' means the default (RFC 3986 section 3.2.3).
  if (has_port && !port.empty() && !parse_port(port, url.port)) return std::nullopt;
  url.host = lower(host);

  url.target = parts.path.empty() ? "/" : std::string(parts.path);
  if (parts.query) url.target.append("?").append(*parts.query);
  return url;
}

std::optional<std::string> resolve_url(std::string_view base_text, std::string_view reference_text) {
  if (has_forbidden_byte(base_text) || has_forbidden_byte(reference_text)) return std::nullopt;
  const Components base = split(base_text);
  const Components reference = split(reference_text);
  if (!base.scheme) return std::nullopt;

  std::string_view scheme = *base.scheme;
  std::optional<std::string_view> authority = base.authority;
  std::optional<std::string_view> query = reference.query;
  std::string path;
  if (reference.scheme) {
    scheme = *reference.scheme;
    authority = reference.authority;
    path = remove_dot_segments(reference.path);
  } else if (reference.authority) {
    authority = reference.authority;
    path = remove_dot_segments(reference.path);
  } else if (reference.path.empty()) {
    path = base.path;
    if (!query) query = base.query;
  } else if (reference.path.starts_with('/')) {
    path = remove_dot_segments(reference.path);
  } else {
    path = remove_dot_segments(merge(base, reference.path));
  }

  std::string out(scheme);
  out += ':';
  if (authority) out.append("//").append(*authority);
  out += path;
  if (query) out.append("?").append(*query);
  return out;
}

}  // namespace capsule::proxy
