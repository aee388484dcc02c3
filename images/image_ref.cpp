// Image reference parsing (a small subset of the distribution reference grammar) and canonical printing.
// Refs are the keys of <store>/refs.json, so what is accepted here is exactly what can be stored.
#include "images/image_ref.h"

#include <cctype>

#include "images/error.h"

namespace capsule::images {
namespace {

constexpr std::size_t kMaxName = 255;
constexpr std::size_t kMaxTag = 128;

bool lower_alnum(char c) { return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9'); }

// [a-z0-9]+ ((\.|_|__|-+) [a-z0-9]+)*
bool valid_component(std::string_view part) {
  if (part.empty() || !lower_alnum(part.front()) || !lower_alnum(part.back())) return false;
  for (std::size_t i = 0; i < part.size(); ++i) {
    const char c = part[i];
    if (lower_alnum(c) || c == '-') continue;
    if (c == '.' && lower_alnum(part[i + 1])) continue;
    if (c == '_' && (lower_alnum(part[i + 1]) || (part[i + 1] == '_' && lower_alnum(part[i + 2])))) {
      if (part[i + 1] == '_') ++i;
      continue;
    }
    return false;
  }
  return true;
}

// host or host:port, e.g. "registry.local:5000" or "localhost".
bool valid_host(std::string_view part) {
  const std::size_t colon = part.find(':');
  std::string_view host = part.substr(0, colon);
  if (host.empty() || !std::isalnum(static_cast<unsigned char>(host.front())) ||
      !std::isalnum(static_cast<unsigned char>(host.back()))) {
    return false;
  }
  for (char c : host) {
    if (!std::isalnum(static_cast<unsigned char>(c)) && c != '.' && c != '-') return false;
  }
  if (colon == std::string_view::npos) return true;
  std::string_view port = part.substr(colon + 1);
  if (port.empty() || port.size() > 5) return false;
  for (char c : port) {
    if (!std::isdigit(static_cast<unsigned char>(c))) return false;
  }
  return true;
}

bool valid_name(std::string_view name) {
  if (name.empty() || name.size() > kMaxName) return false;
  std::size_t start = 0;
  bool first = true;
  for (;;) {
    const std::size_t slash = name.find('/', start);
    std::string_view part = name.substr(start, slash == std::string_view::npos ? name.npos : slash - start);
    const bool is_host = first && slash != std::string_view::npos && valid_host(part);
    if (!is_host && !valid_component(part)) return false;
    if (slash == std::string_view::npos) return true;
    start = slash + 1;
    first = false;
  }
}

bool valid_tag(std::string_view tag) {
  if (tag.empty() || tag.size() > kMaxTag) return false;
  for (std::size_t i = 0; i < tag.size(); ++i) {
    const char c = tag[i];
    const bool word = std::isalnum(static_cast<unsigned char>(c)) || c == '_';
    if (!word && (i == 0 || (c != '.' && c != '-'))) return false;
  }
  return true;
}

}  // namespace

ImageRef ImageRef::parse(std::string_view text) {
  const std::string shown(text.substr(0, 300));
  ImageRef ref;
  if (text.rfind("sha256:", 0) == 0) {
    auto digest = store::Digest::try_parse(text);
    if (!digest) throw_image_error("ref", shown, "not a valid sha256:<64 hex> digest");
    ref.digest = *digest;
    return ref;
  }
  std::string_view name = text;
  if (const std::size_t at = text.find('@'); at != std::string_view::npos) {
    auto digest = store::Digest::try_parse(text.substr(at + 1));
    if (!digest) throw_image_error("ref", shown, "the part after '@' is not a sha256:<64 hex> digest");
    ref.digest = *digest;
    name = text.substr(0, at);
  } else {
    const std::size_t slash = text.rfind('/');
    const std::size_t colon = text.rfind(':');
    if (colon != std::string_view::npos && (slash == std::string_view::npos || colon > slash)) {
      ref.tag = std::string(text.substr(colon + 1));
      name = text.substr(0, colon);
      if (!valid_tag(ref.tag)) throw_image_error("ref", shown, "invalid tag \"" + ref.tag + "\"");
    } else {
      ref.tag = "latest";
    }
  }
  if (!valid_name(name)) {
    throw_image_error("ref", shown, "invalid image name \"" + std::string(name.substr(0, 300)) +
                                        "\" (lowercase letters, digits, '.', '_', '-', '/')");
  }
  ref.name = std::string(name);
  return ref;
}

std::string ImageRef::str() const {
  if (name.empty()) return digest ? digest->str() : std::string();
  if (digest) return name + "@" + digest->str();
  return name + ":" + tag;
}

}  // namespace capsule::images
