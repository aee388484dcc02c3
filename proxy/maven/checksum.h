// Checksum sidecars of a Maven repository (.md5, .sha1, .sha256, .sha512): which algorithm a sidecar names and
// the lowercase hex digest the proxy serves for a document it rewrote.
#pragma once

#include <optional>
#include <string>
#include <string_view>

namespace capsule::proxy::maven {

enum class ChecksumAlgorithm { kMd5, kSha1, kSha256, kSha512 };

// "md5" -> kMd5, "sha1" -> kSha1, "sha256" -> kSha256, "sha512" -> kSha512; anything else (including "asc" and
// "asc.sha1", which are about the signature, not the file) -> nullopt.
std::optional<ChecksumAlgorithm> checksum_for_sidecar(std::string_view sidecar);

// The sidecar suffix of an algorithm, the inverse of checksum_for_sidecar ("md5", "sha1", ...).
std::string_view sidecar_for_checksum(ChecksumAlgorithm algorithm);

// The digest of data as lowercase hex, the body of a sidecar file. Throws std::runtime_error if OpenSSL fails.
std::string checksum_hex(ChecksumAlgorithm algorithm, std::string_view data);
// The same for a file's contents, read in 64 KiB pieces (an artifact is never held in memory whole for this).
std::string checksum_hex_of_file(ChecksumAlgorithm algorithm, const std::string& path);

}  // namespace capsule::proxy::maven
