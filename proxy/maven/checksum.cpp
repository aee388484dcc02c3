// Checksum sidecars: names and OpenSSL EVP digests.
#include "proxy/maven/checksum.h"

#include <openssl/evp.h>

#include <fstream>
#include <memory>
#include <stdexcept>
#include <vector>

namespace capsule::proxy::maven {
namespace {

const EVP_MD* evp_digest(ChecksumAlgorithm algorithm) {
  switch (algorithm) {
    case ChecksumAlgorithm::kMd5:
      return EVP_md5();
    case ChecksumAlgorithm::kSha1:
      return EVP_sha1();
    case ChecksumAlgorithm::kSha256:
      return EVP_sha256();
    case ChecksumAlgorithm::kSha512:
      return EVP_sha512();
  }
  throw std::logic_error("checksum: unknown algorithm");
}

using Context = std::unique_ptr<EVP_MD_CTX, decltype(&EVP_MD_CTX_free)>;

[[noreturn]] void openssl_failed(ChecksumAlgorithm algorithm) {
  throw std::runtime_error("checksum: OpenSSL could not compute the " + std::string(sidecar_for_checksum(algorithm)) +
                           " digest");
}

Context start(ChecksumAlgorithm algorithm) {
  Context context(EVP_MD_CTX_new(), &EVP_MD_CTX_free);
  if (!context || EVP_DigestInit_ex(context.get(), evp_digest(algorithm), nullptr) != 1) openssl_failed(algorithm);
  return context;
}

std::string finish_hex(ChecksumAlgorithm algorithm, EVP_MD_CTX* context) {
  unsigned char raw[EVP_MAX_MD_SIZE];
  unsigned int length = 0;
  if (EVP_DigestFinal_ex(context, raw, &length) != 1) openssl_failed(algorithm);
  constexpr char kHex[] = "0123456789abcdef";
  std::string hex;
  hex.reserve(length * 2);
  for (unsigned int i = 0; i < length; ++i) {
    hex += kHex[raw[i] >> 4];
    hex += kHex[raw[i] & 0x0f];
  }
  return hex;
}

}  // namespace

std::optional<ChecksumAlgorithm> checksum_for_sidecar(std::string_view sidecar) {
  for (const auto algorithm :
       {ChecksumAlgorithm::kMd5, ChecksumAlgorithm::kSha1, ChecksumAlgorithm::kSha256, ChecksumAlgorithm::kSha512})
    if (sidecar == sidecar_for_checksum(algorithm)) return algorithm;
  return std::nullopt;
}

std::string_view sidecar_for_checksum(ChecksumAlgorithm algorithm) {
  switch (algorithm) {
    case ChecksumAlgorithm::kMd5:
      return "md5";
    case ChecksumAlgorithm::kSha1:
      return "sha1";
    case ChecksumAlgorithm::kSha256:
      return "sha256";
    case ChecksumAlgorithm::kSha512:
      return "sha512";
  }
  throw std::logic_error("checksum: unknown algorithm");
}

std::string checksum_hex(ChecksumAlgorithm algorithm, std::string_view data) {
  Context context = start(algorithm);
  if (EVP_DigestUpdate(context.get(), data.data(), data.size()) != 1) openssl_failed(algorithm);
  return finish_hex(algorithm, context.get());
}

std::string checksum_hex_of_file(ChecksumAlgorithm algorithm, const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw std::runtime_error("checksum: cannot open " + path);
  Context context = start(algorithm);
  std::vector<char> buffer(64 * 1024);
  while (in) {
    in.read(buffer.data(), static_cast<std::streamsize>(buffer.size()));
    if (in.gcount() > 0 && EVP_DigestUpdate(context.get(), buffer.data(), static_cast<std::size_t>(in.gcount())) != 1)
      openssl_failed(algorithm);
  }
  if (in.bad()) throw std::runtime_error("checksum: cannot read " + path);
  return finish_hex(algorithm, context.get());
}

}  // namespace capsule::proxy::maven
