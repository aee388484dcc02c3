// ImageError formatting and throw helpers.
// Kept tiny so every part of the image store reports failures the same way.
#include "images/error.h"

#include <cerrno>
#include <cstring>

namespace capsule::images {
namespace {

std::string describe(const std::string& step, const std::string& path, const std::string& detail, int errno_value) {
  std::string text = step;
  if (!path.empty()) text += " " + path;
  if (errno_value != 0) text += std::string(": ") + std::strerror(errno_value);
  if (!detail.empty()) text += errno_value != 0 ? " (" + detail + ")" : ": " + detail;
  return text;
}

}  // namespace

ImageError::ImageError(std::string step, std::string path, std::string detail, int errno_value)
    : std::runtime_error(describe(step, path, detail, errno_value)),
      step_(std::move(step)),
      path_(std::move(path)),
      detail_(std::move(detail)),
      errno_value_(errno_value) {}

void throw_image_error(const std::string& step, const std::string& path, const std::string& detail) {
  throw ImageError(step, path, detail);
}

void throw_image_errno(const std::string& step, const std::string& path, const std::string& detail) {
  throw ImageError(step, path, detail, errno);
}

}  // namespace capsule::images
