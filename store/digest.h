// Digest: a validated content address ("sha256:<64 lowercase hex>"), and Sha256, a streaming hasher over
// OpenSSL EVP. Digest::try_parse is the one place digest text is checked; only sha256 is supported.
#pragma once

#include <compare>
#include <cstddef>
#include <memory>
#include <optional>
#include <string>
#include <string_view>

namespace capsule::store {

class Digest {
 public:
  Digest() = default;  // empty: "no digest" (str() is "")

  // "sha256:<64 lowercase hex>"; anything else (other algorithms, upper case, wrong length) is refused.
  static std::optional<Digest> try_parse(std::string_view text);
  // As try_parse, but throws base::Error{step "digest"} naming the text.
  static Digest parse(std::string_view text);
  // From the 64 hex digits alone.
  static Digest from_hex(std::string_view hex);

  const std::string& hex() const { return hex_; }
  std::string str() const { return hex_.empty() ? std::string() : "sha256:" + hex_; }
  bool empty() const { return hex_.empty(); }

  friend auto operator<=>(const Digest&, const Digest&) = default;

 private:
  std::string hex_;
};

// Incremental SHA-256; finish() may be called once.
class Sha256 {
 public:
  Sha256();
  ~Sha256();
  Sha256(const Sha256&) = delete;
  Sha256& operator=(const Sha256&) = delete;

  void update(const void* data, std::size_t size);
  void update(std::string_view data) { update(data.data(), data.size()); }
  Digest finish();

 private:
  struct Context;
  std::unique_ptr<Context> context_;
};

Digest sha256_of(std::string_view data);

}  // namespace capsule::store
