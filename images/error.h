// ImageError: an image-store failure, a base::Error whose cause names the step ("unpack", "manifest",
// "import", ...) and the path, digest or ref involved. Every file in images/ throws it.
#pragma once

#include <string>

#include "base/error.h"

namespace capsule::images {

class ImageError : public base::Error {
 public:
  ImageError(std::string step, std::string path, std::string detail, int errno_value = 0)
      : base::Error(base::Cause{std::move(step), std::move(path), errno_value, std::move(detail)}) {}
};

// Throws ImageError{step, path, detail} without an errno.
[[noreturn]] void throw_image_error(const std::string& step, const std::string& path, const std::string& detail);
// Throws ImageError{step, path, detail} with the current errno.
[[noreturn]] void throw_image_errno(const std::string& step, const std::string& path, const std::string& detail);

}  // namespace capsule::images
