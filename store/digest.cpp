// Digest parsing/validation and SHA-256 hashing through OpenSSL's EVP interface.
// Hashing is streaming so blobs of any size are hashed while they are copied.
#include "store/digest.h"

#include <openssl/evp.h>

#include "base/error.h"

namespace capsule::store {
namespace {

constexpr std::string_view kPrefix = "sha256:";
constexpr std::size_t kHexLength = 64;

bool is_lower_hex(std::string_view text) {
  for (char c : text) {
    if (!((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'))) return false;
  }
  return true;
}

}  // namespace

std::optional<Digest> Digest::try_parse(std::string_view text) {
  if (text.substr(0, kPrefix.size()) != kPrefix) return std::nullopt;
  std::string_view hex = text.substr(kPrefix.size());
  if (hex.size() != kHexLength || !is_lower_hex(hex)) return std::nullopt;
  Digest digest;
  digest.hex_ = std::string(hex);
  return digest;
}

Digest Digest::parse(std::string_view text) {
  auto digest = try_parse(text);
  if (!digest) {
    const std::string shown(text.substr(0, 100));
    if (text.find(':') != std::string_view::npos && text.substr(0, kPrefix.size()) != kPrefix) {
      base::throw_error("digest", shown, "unsupported digest algorithm (only sha256)");
    }
    base::throw_error("digest", shown, "not a digest of the form sha256:<64 lowercase hex digits>");
  }
  return *digest;
}

Digest Digest::from_hex(std::string_view hex) { return parse(std::string(kPrefix) + std::string(hex)); }

struct Sha256::Context {
  EVP_MD_CTX* ctx = nullptr;
  ~Context() { EVP_MD_CTX_free(ctx); }
};

Sha256::Sha256() : context_(std::make_unique<Context>()) {
  context_->ctx = EVP_MD_CTX_new();
  if (context_->ctx == nullptr || EVP_DigestInit_ex(context_->ctx, EVP_sha256(), nullptr) != 1) {
    base::throw_error("digest", "", "OpenSSL EVP sha256 initialisation failed");
  }
}

Sha256::~Sha256() = default;

void Sha256::update(const void* data, std::size_t size) {
  if (size != 0 && EVP_DigestUpdate(context_->ctx, data, size) != 1) {
    base::throw_error("digest", "", "OpenSSL EVP sha256 update failed");
  }
}

Digest Sha256::finish() {
  unsigned char raw[EVP_MAX_MD_SIZE];
  unsigned int length = 0;
  if (EVP_DigestFinal_ex(context_->ctx, raw, &length) != 1 || length != kHexLength / 2) {
    base::throw_error("digest", "", "OpenSSL EVP sha256 final failed");
  }
  static constexpr char kDigits[] = "0123456789abcdef";
  std::string hex;
  hex.reserve(kHexLength);
  for (unsigned int i = 0; i < length; ++i) {
    hex += kDigits[raw[i] >> 4];
    hex += kDigits[raw[i] & 0xf];
  }
  return Digest::from_hex(hex);
}

Digest sha256_of(std::string_view data) {
  Sha256 hasher;
  hasher.update(data);
  return hasher.finish();
}

}  // namespace capsule::store
