// BundleStores: what audit bundles are read from and written to beyond the API context — the image store (for
// saving and importing images), the proxy cache's blobs (dependency objects), and a private staging dir.
#pragma once

#include <filesystem>
#include <mutex>

#include "daemon/bundle/bundle_tar.h"
#include "images/image_store.h"
#include "store/blob_store.h"

namespace capsule::daemon {

class BundleStores {
 public:
  // `staging_root` is created 0700; what an export or import interrupted by a crash left there is removed.
  BundleStores(images::ImageStore& images, store::BlobStore& proxy_blobs, std::filesystem::path staging_root,
               BundleLimits limits = {});
  BundleStores(const BundleStores&) = delete;
  BundleStores& operator=(const BundleStores&) = delete;

  // A fresh private dir under the staging root; the caller removes it (base::ScopedDir does).
  std::filesystem::path make_staging() const;

  images::ImageStore& images;
  store::BlobStore& proxy_blobs;  // the package proxy's cache (proxy_options.h cache_dir): frozen replays read it
  const BundleLimits limits;
  std::mutex import_mutex;  // one import at a time: the id check and the row's insert go together

 private:
  std::filesystem::path staging_root_;
};

}  // namespace capsule::daemon
