// Deterministic file contents for image_bench's test layers: the same seed gives the same bytes in every run,
// so layer sizes and compression ratios do not move between measurements.
#pragma once

#include <cstdint>
#include <string>

namespace capsule::bench::image_bench {

// xorshift64* bytes (incompressible) or words from a small vocabulary (like source text).
class Content {
 public:
  std::uint64_t next();
  std::uint64_t below(std::uint64_t n) { return next() % n; }
  std::string random_bytes(std::size_t size);
  std::string text(std::size_t size);  // 64 words: gzip gets about 4:1

 private:
  std::uint64_t state_ = 0x9E3779B97F4A7C15ull;
};

}  // namespace capsule::bench::image_bench
