// Deterministic file contents for image_bench (see content.h): a xorshift64* stream for random bytes and a
// fixed vocabulary for text that compresses about like source code.
#include "image_bench/content.h"

#include <algorithm>
#include <cstring>
#include <iterator>
#include <sstream>
#include <vector>

namespace capsule::bench::image_bench {

std::uint64_t Content::next() {
  state_ ^= state_ >> 12;
  state_ ^= state_ << 25;
  state_ ^= state_ >> 27;
  return state_ * 0x2545F4914F6CDD1Dull;
}

std::string Content::random_bytes(std::size_t size) {
  std::string out(size, '\0');
  for (std::size_t i = 0; i < size; i += 8) {
    const std::uint64_t word = next();
    std::memcpy(out.data() + i, &word, std::min<std::size_t>(8, size - i));
  }
  return out;
}

std::string Content::text(std::size_t size) {
  static const std::vector<std::string> kWords = [] {
    std::istringstream in(
        "def return self import class if else for while int const auto void static public value result error "
        "config path string vector map std:: 0 1 = == ( ) { } [ ] ; : -> name data size index count buffer layer "
        "image digest blob tar None True False throw try catch new delete assert test java python maven pip "
        "lambda yield");
    return std::vector<std::string>(std::istream_iterator<std::string>(in), std::istream_iterator<std::string>());
  }();
  std::string out;
  out.reserve(size + 16);
  while (out.size() < size) out += kWords[below(kWords.size())] + (below(10) == 0 ? '\n' : ' ');
  out.resize(size);
  return out;
}

}  // namespace capsule::bench::image_bench
