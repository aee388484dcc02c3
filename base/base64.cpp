// Table-driven base64 over 3-byte groups: cheap enough for relaying output at hundreds of MB/s.
#include "base/base64.h"

#include <array>
#include <cstdint>

namespace capsule::base {
namespace {

constexpr char kAlphabet[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

constexpr std::array<std::int8_t, 256> make_values() {
  std::array<std::int8_t, 256> values{};
  for (auto& v : values) v = -1;
  for (int i = 0; i < 64; ++i) values[static_cast<unsigned char>(kAlphabet[i])] = static_cast<std::int8_t>(i);
  return values;
}
constexpr std::array<std::int8_t, 256> kValues = make_values();

}  // namespace

std::string base64_encode(std::string_view bytes) {
  std::string out((bytes.size() + 2) / 3 * 4, '=');
  const auto* in = reinterpret_cast<const unsigned char*>(bytes.data());
  char* o = out.data();
  std::size_t i = 0;
  for (; i + 3 <= bytes.size(); i += 3) {
    const std::uint32_t group = (std::uint32_t(in[i]) << 16) | (std::uint32_t(in[i + 1]) << 8) | in[i + 2];
    *o++ = kAlphabet[group >> 18];
    *o++ = kAlphabet[(group >> 12) & 63];
    *o++ = kAlphabet[(group >> 6) & 63];
    *o++ = kAlphabet[group & 63];
  }
  const std::size_t rest = bytes.size() - i;
  if (rest > 0) {
    const std::uint32_t group = (std::uint32_t(in[i]) << 16) | (rest == 2 ? std::uint32_t(in[i + 1]) << 8 : 0);
    *o++ = kAlphabet[group >> 18];
    *o++ = kAlphabet[(group >> 12) & 63];
    if (rest == 2) *o++ = kAlphabet[(group >> 6) & 63];
  }
  return out;
}

std::optional<std::string> base64_decode(std::string_view text) {
  if (text.size() % 4 != 0) return std::nullopt;
  std::size_t padding = 0;
  if (!text.empty() && text.back() == '=') padding = text[text.size() - 2] == '=' ? 2 : 1;
  std::string out(text.size() / 4 * 3 - padding, '\0');
  char* o = out.data();
  const auto* in = reinterpret_cast<const unsigned char*>(text.data());
  const std::size_t groups = text.size() / 4;
  for (std::size_t g = 0; g < groups; ++g) {
    const unsigned char* p = in + g * 4;
    const bool last = g + 1 == groups;
    const int pad_here = last ? static_cast<int>(padding) : 0;
    std::int32_t v[4];
    for (int k = 0; k < 4; ++k) {
      if (k >= 4 - pad_here) {
        v[k] = 0;
        continue;
      }
      v[k] = kValues[p[k]];
      if (v[k] < 0) return std::nullopt;
    }
    const std::uint32_t group = (std::uint32_t(v[0]) << 18) | (std::uint32_t(v[1]) << 12) | (std::uint32_t(v[2]) << 6) |
                                std::uint32_t(v[3]);
    *o++ = static_cast<char>(group >> 16);
    if (pad_here < 2) *o++ = static_cast<char>((group >> 8) & 0xFF);
    if (pad_here < 1) *o++ = static_cast<char>(group & 0xFF);
  }
  return out;
}

}  // namespace capsule::base
