// Pinned: what a run's names resolved to when it was accepted (image digests, the toolchain choice, the seccomp
// policy's digest, the proxy's cutoff), what ran it (kernel, capsule), whether it replays byte for byte, and
// every dependency object the proxy served; stored with the spec so the same run can be submitted again (replay).
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

namespace capsule::spec {

// A run's root is at most this many images (each has at least one of the stack's 128 filesystem layers).
inline constexpr std::size_t kMaxPinnedImages = 128;
// A stored run's dependency list is read back only up to this many objects.
inline constexpr std::size_t kMaxPinnedDependencies = 100000;

// One object the package proxy served the run: the URL asked for and the exact bytes' sha256 (hex) and size.
struct Dependency {
  std::string url;
  std::string sha256;
  std::uint64_t size = 0;
};

struct Pinned {
  std::vector<std::string> image_digests;       // every image of the root, base first; empty: the host image
  nlohmann::json image_choice = nlohmann::json::object();  // toolchains: what was asked, found and why
  std::string policy_sha256;                    // sha256 of the seccomp profile's text, "sha256:<hex>"
  std::optional<std::string> workspace_digest;  // content digest of the workspace, when known (snapshots)
  std::optional<std::string> cutoff;            // network "proxy": the date the package proxy showed
  std::map<std::string, std::string> toolchains;  // name -> the version the chosen image provides
  std::optional<std::string> kernel;            // uname release of the machine that ran it
  std::optional<std::string> capsule;           // the capsuled version that ran it
  std::optional<std::string> host_image;        // the built-in host image: digest of what it exposes
  // Why a replay would not see the same bytes (empty: it would); absent in runs stored before it was recorded.
  std::optional<std::vector<std::string>> not_replayable;
  std::vector<Dependency> dependencies;         // every object the proxy served, once per URL (set at the end)
};

// {"image_digests", "image_choice", "policy_sha256", "workspace_digest", "cutoff", "toolchains", "kernel",
// "capsule", "host_image", "replayable" (true, false, or null when unknown), "not_replayable" ([reasons]),
// "dependencies": [{"url", "sha256", "size"}]} (null when absent).
nlohmann::json to_json(const Pinned& pinned);
// Reads what to_json wrote (from a stored run; fields it lacks keep their defaults, so older rows read).
// "replayable" is derived from "not_replayable" and only checked for type. Throws 400 invalid_spec naming
// "pinned.<field>".
Pinned parse_pinned(const nlohmann::json& body);

// A run's pinned.dependencies from its record's proxy.served ([{"url", "sha256", "size", ...}]): the first
// object served for each URL, in order.
std::vector<Dependency> dependencies_of(const nlohmann::json& served);
nlohmann::json to_json(const std::vector<Dependency>& dependencies);

}  // namespace capsule::spec
