// ImageError: an image-store failure that carries its cause (step, path, errno, detail) up to the API.
// Every file in images/ throws this (a std::runtime_error); what() reads "step path: cause (detail)".
#pragma once

#include <stdexcept>
#include <string>

namespace capsule::images {

class ImageError : public std::runtime_error {
 public:
  // step: what was being done ("blob", "unpack", "manifest", "import", ...); path: file, digest or ref involved.
  ImageError(std::string step, std::string path, std::string detail, int errno_value = 0);

  const std::string& step() const { return step_; }
  const std::string& path() const { return path_; }
  const std::string& detail() const { return detail_; }
  int errno_value() const { return errno_value_; }

 private:
  std::string step_;
  std::string path_;
  std::string detail_;
  int errno_value_;
};

// Throws ImageError{step, path, detail} without an errno.
[[noreturn]] void throw_image_error(const std::string& step, const std::string& path, const std::string& detail);
// Throws ImageError{step, path, detail} with the current errno.
[[noreturn]] void throw_image_errno(const std::string& step, const std::string& path, const std::string& detail);

}  // namespace capsule::images
