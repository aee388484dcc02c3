// ImageRef: how callers name an image — "name:tag" (tag defaults to "latest"), "name@sha256:<hex>" or a
// bare "sha256:<hex>" manifest digest. ImageRef::parse is the one place reference text is checked.
#pragma once

#include <optional>
#include <string>
#include <string_view>

#include "store/digest.h"

namespace capsule::images {

struct ImageRef {
  std::string name;              // "toolchains/jdk17", "registry.local:5000/base"; empty for a bare digest
  std::string tag;               // empty when the reference is by digest
  std::optional<store::Digest> digest;  // set for "name@sha256:..." and "sha256:..."

  // Names: lowercase [a-z0-9] components joined by '/', each may contain single '.', '_' or runs of '-'
  // between alphanumerics ("__" allowed); the first component may be a host[:port]. Tags:
  // [A-Za-z0-9_][A-Za-z0-9_.-]{0,127}. Throws ImageError{step "ref"}.
  static ImageRef parse(std::string_view text);

  bool by_digest() const { return digest.has_value(); }
  // Canonical text: "name:tag", "name@sha256:..." or "sha256:...".
  std::string str() const;
};

}  // namespace capsule::images
