// Pinned: what a run's names resolved to when it was accepted (image digests, the toolchain choice, the seccomp
// policy's digest, the proxy's cutoff), stored with the spec so the same run can be submitted again (replay).
#pragma once

#include <cstddef>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

namespace capsule::spec {

// A run's root is at most this many images (each has at least one of the stack's 128 filesystem layers).
inline constexpr std::size_t kMaxPinnedImages = 128;

struct Pinned {
  std::vector<std::string> image_digests;       // every image of the root, base first; empty: the host image
  nlohmann::json image_choice = nlohmann::json::object();  // toolchains: what was asked, found and why
  std::string policy_sha256;                    // sha256 of the seccomp profile's text, "sha256:<hex>"
  std::optional<std::string> workspace_digest;  // content digest of the workspace, when known (snapshots)
  std::optional<std::string> cutoff;            // network "proxy": the date the package proxy showed
  std::map<std::string, std::string> toolchains;  // name -> the version the chosen image provides
};

// {"image_digests", "image_choice", "policy_sha256", "workspace_digest", "cutoff", "toolchains"} (null when absent).
nlohmann::json to_json(const Pinned& pinned);
// Reads what to_json wrote (from a stored run). Throws 400 invalid_spec naming "pinned.<field>".
Pinned parse_pinned(const nlohmann::json& body);

}  // namespace capsule::spec
