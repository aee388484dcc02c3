// ImageStore: the content-addressed OCI image store — imports (OCI layout, oci-archive, plain rootfs),
// refs, unpacked layers for sandbox overlays, export, removal and garbage collection.
#pragma once

#include <cstdint>
#include <filesystem>
#include <map>
#include <string>
#include <vector>

#include "store/blob_store.h"
#include "store/digest.h"
#include "images/layer_unpack.h"
#include "images/oci_image.h"
#include "images/ref_table.h"

namespace capsule::images {

struct ImageInfo {
  store::Digest manifest_digest;               // the image's identity
  std::vector<std::string> refs;        // "name:tag" refs pointing at it that the viewer sees, sorted
  std::map<std::string, RefAccess> ref_access;  // who may use each of those refs
  ImageConfig config;                   // env, working_dir, user, labels (and os, architecture, diff_ids)
  std::vector<store::Digest> layer_digests;    // compressed layer blobs, base layer first (manifest order)
  std::uint64_t size = 0;               // bytes of the manifest, config and layer blobs
  std::vector<std::string> layer_dirs;  // unpacked layers, topmost first: use as SandboxSpec::rootfs_layers
};

struct GcResult {
  std::vector<store::Digest> blobs;          // removed blobs
  std::vector<std::string> layers;    // removed unpacked layers (diff_id hex)
  std::uint64_t blob_bytes = 0;       // bytes of the removed blobs
};

// How import_rootfs describes the image it builds.
struct RootfsOptions {
  std::int64_t epoch = 0;  // SOURCE_DATE_EPOCH: mtimes are clamped to it, and it is the config's `created`
  bool gzip = true;        // layer as tar+gzip (else plain tar)
  std::vector<std::string> env = {"PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"};
  std::string working_dir;
  std::string user;
  std::map<std::string, std::string> labels;  // e.g. {"org.capsule.toolchain.java": "17.0.15"}
};

// Store layout under root (created 0700: layers hold setuid files that must stay unreachable from the host):
//   blobs/sha256/<hex>   verified blobs          layers/<diff_id hex>/  unpacked layers, shared by images
//   refs.json            name:tag -> manifest    tmp/                  per-import staging areas
//   lock, refs.lock      flock files
// Imports stage blobs and layers privately and move them in only when the whole image verified, so a failed
// import leaves nothing behind; re-importing the same content is a no-op returning the same digest.
// Concurrency: every method may be called from several threads and processes at once. Imports, inspect,
// list and save hold `lock` shared, gc holds it exclusively; ref updates are serialised on `refs.lock`.
// All errors are ImageError.
class ImageStore {
 public:
  explicit ImageStore(std::filesystem::path root, UnpackLimits limits = {});

  // Imports from an OCI image layout directory, choosing the host platform's (linux/amd64) manifest when
  // index.json lists several (nested indexes are followed). Every blob is verified against its digest and
  // size while being copied; every layer against its config diff_id while being unpacked. `ref` is a
  // "name[:tag]" that is then pointed at the image. Returns the manifest digest.
  // Every import and commit points its ref with `write` (by default: a system ref the daemon points) and is
  // refused (ImageError step "ref_owner") when the ref is another owner's and `write` may not replace it.
  store::Digest import_layout(const std::filesystem::path& dir, const std::string& ref, const RefWrite& write = {});
  // Imports an oci-archive (a tar, optionally gzip'd, of an OCI layout), extracted with the layer
  // unpacker's safety checks and limits first.
  store::Digest import_archive(const std::filesystem::path& archive, const std::string& ref, const RefWrite& write = {});
  // Packs a plain root filesystem (a directory, or a tar/tar.gz of one) into a single-layer OCI image with
  // a deterministic tar (see tar_pack.h): the same tree always yields the same digest. Device nodes, fifos
  // and sockets in the tree are left out.
  store::Digest import_rootfs(const std::filesystem::path& source, const std::string& ref, const RootfsOptions& options = {},
                              const RefWrite& write = {});

  // Commits a layer onto images: a new image whose layers are those of `bases` (manifest digests, base first),
  // in order, then `layer` (an uncompressed tar in `from`; its digest is its diff_id, as pack_upper_layer makes
  // it), with the bases' merged config (merge_configs) plus `labels`, created at `epoch`; `ref` ("name:tag")
  // then points at it. Staged and committed as an import is: a failure leaves nothing behind. Returns the
  // manifest digest.
  store::Digest commit_layer(const std::vector<store::Digest>& bases, const store::BlobStore& from,
                             const store::Digest& layer, const std::map<std::string, std::string>& labels,
                             const std::string& ref, std::int64_t epoch, const RefWrite& write = {});

  // Writes the image as an oci-archive when `out` ends in ".tar", else as an OCI layout directory (which
  // must not exist or be empty). Deterministic: saving the same image twice gives identical bytes.
  // Reading calls see what `viewer` sees: refs it may not see, and digests only such refs reach, are unknown.
  void save(const std::string& ref, const std::filesystem::path& out, const RefViewer& viewer = {}) const;

  // "name[:tag]", "name@sha256:..." or "sha256:..." to the manifest digest; throws when unknown.
  store::Digest resolve(const std::string& ref, const RefViewer& viewer = {}) const;
  // The image's metadata and its unpacked layer dirs (re-unpacked from blobs if one went missing).
  ImageInfo inspect(const std::string& ref, const RefViewer& viewer = {}) const;
  // Every image some ref points at, sorted by first ref.
  std::vector<ImageInfo> list(const RefViewer& viewer = {}) const;
  // Removes a name:tag ref, or every ref pointing at a digest ref. Blobs and layers stay until gc().
  // Returns the removed refs; throws when none matched, step "ref_owner" when the viewer owns none of them.
  std::vector<std::string> remove(const std::string& ref, const RefViewer& viewer = {});
  // Sets who besides its owner may use a name:tag ref (public, a group); the owner stays. Returns the access.
  RefAccess share(const std::string& ref, const RefAccess& access, const RefViewer& viewer = {});
  // Removes blobs and unpacked layers no ref reaches, and stale staging areas. Layer dirs of removed images
  // that a running sandbox still uses are removed too: call it when no such run is active.
  GcResult gc();

  const std::filesystem::path& root() const { return root_; }

 private:
  class Staging;

  void remove_abandoned_staging();
  store::Digest import_layout_locked(const std::filesystem::path& dir, const std::string& ref, const RefWrite& write);
  store::Digest commit(Staging& staging, const store::Digest& manifest_digest, const ImageManifest& manifest,
                const ImageConfig& config, const std::string& ref, const RefWrite& write);
  // `refs`: the table as loaded by the caller, so a listing reads refs.json once.
  ImageInfo describe(const store::Digest& manifest_digest, const RefViewer& viewer, const RefTable& refs) const;
  void ensure_layers(const ImageManifest& manifest, const ImageConfig& config) const;
  std::filesystem::path layer_dir(const store::Digest& diff_id) const;

  std::filesystem::path root_;
  UnpackLimits limits_;
  store::BlobStore blobs_;
};

}  // namespace capsule::images
