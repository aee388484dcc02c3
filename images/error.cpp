// ImageError's throw helpers, so every part of the image store reports a failure the same way.
#include "images/error.h"

#include <cerrno>

namespace capsule::images {

void throw_image_error(const std::string& step, const std::string& path, const std::string& detail) {
  throw ImageError(step, path, detail);
}

void throw_image_errno(const std::string& step, const std::string& path, const std::string& detail) {
  throw ImageError(step, path, detail, errno);
}

}  // namespace capsule::images
