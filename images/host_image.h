// The built-in `host` image: the host's /usr (read-only) under a generated minimal root with a curated /etc.
// It is the embedded default so python3, java and mvn from the host work inside with zero set-up.
#pragma once

#include <string>
#include <string_view>
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

// Why a run on the host image does not replay byte for byte (spec/pinned.h not_replayable).
inline constexpr const char* kHostImageNotReplayable =
    "the host image is the host's /usr: replaying later uses whatever is installed then";

// The host image's digest: "sha256:<hex>" over what it exposes — the skeleton's version, each host path it
// binds, and every installed package with its version (the sorted "Package=Version" lines of a dpkg status
// file's installed entries). Equal digests: the same packages at the same versions under the same binds.
std::string host_image_digest_of(std::string_view dpkg_status, const std::vector<sandbox::BindMount>& binds);
// Of this host (/var/lib/dpkg/status, read up to 64 MiB; an unreadable file counts as empty), remembered
// while the file's size and mtime stay the same.
std::string host_image_digest(const std::string& dpkg_status_path = "/var/lib/dpkg/status");

}  // namespace capsule::images
