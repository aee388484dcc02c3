// The audit bundle's container: a plain tar of regular files under fixed names (docs/api.md, "Audit bundles"),
// written deterministically and read back defensively into a staging dir, each entry hashed as it arrives.
#pragma once

#include <cstdint>
#include <filesystem>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <string_view>

#include "spec/pinned.h"

namespace capsule::daemon {

inline constexpr const char* kBundleFormat = "capsule-bundle/1";
inline constexpr const char* kBundleManifest = "bundle.json";

// The ceilings a bundle is written and read within.
struct BundleLimits {
  std::uint64_t max_bytes = 16ull << 30;           // the whole tar (export: its files together)
  std::uint64_t max_manifest_bytes = 64ull << 20;  // bundle.json
  std::size_t max_entries = spec::kMaxPinnedImages + spec::kMaxPinnedDependencies + 8;
};

// Entry names a bundle uses: "images/<n>.tar", "snapshot.tar", "dependencies/<sha256 hex>", "logs/<stream>".
std::string image_entry(std::size_t index);
std::string dependency_entry(const std::string& sha256_hex);
inline constexpr const char* kSnapshotEntry = "snapshot.tar";
std::string log_entry(const std::string& stream);

// A relative name of components [A-Za-z0-9._-]+ (none "." or ".."), at most 200 characters.
bool valid_entry_name(std::string_view name);

using BundleSink = std::function<void(std::string_view chunk)>;

// Writes tar entries to a sink: regular files 0644, owner 0:0, mtime 0, in the order added. Exceptions from the
// sink propagate.
class BundleTarWriter {
 public:
  explicit BundleTarWriter(BundleSink sink);
  ~BundleTarWriter();
  BundleTarWriter(const BundleTarWriter&) = delete;
  BundleTarWriter& operator=(const BundleTarWriter&) = delete;

  void add_bytes(const std::string& name, std::string_view bytes);
  // The file's bytes; it must still be `size` bytes long (else base::Error "bundle").
  void add_file(const std::string& name, const std::filesystem::path& file, std::uint64_t size);
  void finish();

 private:
  struct State;
  std::unique_ptr<State> state_;
};

struct StagedEntry {
  std::filesystem::path file;  // staging/<n>: never a name taken from the tar
  std::uint64_t size = 0;
  std::string sha256;          // hex
};

// Reads the tar on `fd` into `staging` (an empty private dir). Throws http::ApiError 400 invalid_bundle naming the
// entry for anything but regular files (and directories, skipped) with valid, distinct names (symlinks, hard
// links, devices, "..", absolute names), more than max_entries entries or a broken tar; 413 bundle_too_large once
// the entries' bytes pass max_bytes.
std::map<std::string, StagedEntry> read_bundle_tar(int fd, const std::filesystem::path& staging,
                                                   const BundleLimits& limits);

}  // namespace capsule::daemon
