// The /v1/images routes: import (OCI layout, oci-archive, plain rootfs), list, inspect, share, remove, save
// and gc on the daemon's ImageStore, each as the caller sees it (daemon/image_access.h). Imports and saves run on the importer's own thread, never on an io thread.
#pragma once

#include <condition_variable>
#include <deque>
#include <functional>
#include <mutex>
#include <nlohmann/json.hpp>
#include <thread>

#include "daemon/auth.h"
#include "http/router.h"
#include "images/image_store.h"

namespace capsule::daemon {

// One worker thread for long image jobs, so two imports never race for the same staging area's disk and
// the API stays responsive. The destructor finishes the queued jobs and joins.
class ImageJobs {
 public:
  ImageJobs();
  ~ImageJobs();
  ImageJobs(const ImageJobs&) = delete;
  ImageJobs& operator=(const ImageJobs&) = delete;
  void post(std::function<void()> job);

 private:
  std::mutex mutex_;
  std::condition_variable ready_;
  std::deque<std::function<void()>> jobs_;
  bool stopping_ = false;
  std::thread thread_;
};

// The API's view of an image: {"digest", "refs", "ref_access": {ref: {"owner", "public", "group"}}, "size", "layers", "config": {"env", "working_dir", "user",
// "labels"}, "toolchains": {name: version}}.
nlohmann::json image_to_json(const images::ImageInfo& image);

void register_images_api(http::Router& router, images::ImageStore& store, ImageJobs& jobs, const AccessPolicy& policy);

}  // namespace capsule::daemon
