// The built-in `host` image: the host's /usr (read-only) under a generated minimal root with a curated /etc.
// It is the embedded default so python3, java and mvn from the host work inside with zero set-up.
#pragma once

#include <string>
#include <vector>

#include "sandbox/spec.h"

namespace capsule::images {

struct HostImage {
  std::vector<std::string> layers;               // overlay lower dirs, topmost first
  std::vector<sandbox::BindMount> mounts;        // host /usr and friends, read-only, idmapped
  std::vector<std::string> env;                  // default environment (PATH, HOME, LANG, ...)
};

// Builds (once, atomically) the image's root skeleton under <cache_dir>/host-root and returns the image.
// Host configuration that changes tool behaviour (pip.conf, PIP_*, ~/.m2, /etc/environment) is not copied.
HostImage prepare_host_image(const std::string& cache_dir);

}  // namespace capsule::images
