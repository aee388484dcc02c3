// BundleStores' staging: one private dir per export or import, all under a root cleared at start.
#include "daemon/bundle/bundle_stores.h"

#include <sys/stat.h>

#include <cstdlib>
#include <system_error>

#include "base/error.h"

namespace capsule::daemon {

BundleStores::BundleStores(images::ImageStore& image_store, store::BlobStore& proxy_blob_store,
                           std::filesystem::path staging_root, BundleLimits bundle_limits)
    : images(image_store), proxy_blobs(proxy_blob_store), limits(bundle_limits), staging_root_(std::move(staging_root)) {
  std::error_code ignored;
  std::filesystem::remove_all(staging_root_, ignored);
  std::filesystem::create_directories(staging_root_);
  if (chmod(staging_root_.c_str(), 0700) != 0) base::throw_errno("bundle", staging_root_.string(), "chmod");
}

std::filesystem::path BundleStores::make_staging() const {
  std::string name = (staging_root_ / "XXXXXX").string();
  if (mkdtemp(name.data()) == nullptr) base::throw_errno("bundle", staging_root_.string(), "mkdtemp");
  return name;
}

}  // namespace capsule::daemon
