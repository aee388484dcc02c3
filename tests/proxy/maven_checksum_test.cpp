// Checksum sidecars: names both ways and digests of the FIPS 180 / RFC 1321 test vectors.
#include "proxy/maven/checksum.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdlib>
#include <fstream>
#include <stdexcept>
#include <string>

namespace capsule::proxy::maven {
namespace {

TEST(MavenChecksum, SidecarNames) {
  EXPECT_EQ(checksum_for_sidecar("md5"), ChecksumAlgorithm::kMd5);
  EXPECT_EQ(checksum_for_sidecar("sha1"), ChecksumAlgorithm::kSha1);
  EXPECT_EQ(checksum_for_sidecar("sha256"), ChecksumAlgorithm::kSha256);
  EXPECT_EQ(checksum_for_sidecar("sha512"), ChecksumAlgorithm::kSha512);
  for (const char* other : {"", "asc", "asc.sha1", "SHA1", "sha", ".sha1", "sha1 "})
    EXPECT_FALSE(checksum_for_sidecar(other)) << other;
  for (const auto algorithm :
       {ChecksumAlgorithm::kMd5, ChecksumAlgorithm::kSha1, ChecksumAlgorithm::kSha256, ChecksumAlgorithm::kSha512})
    EXPECT_EQ(checksum_for_sidecar(sidecar_for_checksum(algorithm)), algorithm);
}

TEST(MavenChecksum, KnownVectors) {
  EXPECT_EQ(checksum_hex(ChecksumAlgorithm::kMd5, "abc"), "900150983cd24fb0d6963f7d28e17f72");
  EXPECT_EQ(checksum_hex(ChecksumAlgorithm::kSha1, "abc"), "a9993e364706816aba3e25717850c26c9cd0d89d");
  EXPECT_EQ(checksum_hex(ChecksumAlgorithm::kSha256, "abc"),
            "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
  EXPECT_EQ(checksum_hex(ChecksumAlgorithm::kSha512, "abc"),
            "ddaf35a193617abacc417349ae20413112e6fa4e89a97ea20a9eeee64b55d39a"
            "2192992a274fc1a836ba3c23a3feebbd454d4423643ce80e2a9ac94fa54ca49f");
  EXPECT_EQ(checksum_hex(ChecksumAlgorithm::kMd5, ""), "d41d8cd98f00b204e9800998ecf8427e");
  EXPECT_EQ(checksum_hex(ChecksumAlgorithm::kSha1, ""), "da39a3ee5e6b4b0d3255bfef95601890afd80709");
}

TEST(MavenChecksum, BinaryDataIsHashedWhole) {
  const std::string with_nul("a\0b", 3);
  EXPECT_EQ(checksum_hex(ChecksumAlgorithm::kSha1, with_nul), "4a3dec2d1f8245280855c42db0ee4239f917fdb8");
}

// A file is hashed in pieces: the digest of 200 KiB read in 64 KiB chunks equals the one of the bytes in memory.
TEST(MavenChecksum, AFileIsHashedInPiecesToTheSameDigest) {
  std::string bytes;
  for (int i = 0; i < 200 * 1024; ++i) bytes += static_cast<char>(i * 7 % 251);
  char path[] = "/tmp/capsule-checksum-XXXXXX";
  const int fd = mkstemp(path);
  ASSERT_GE(fd, 0);
  ::close(fd);
  std::ofstream(path, std::ios::binary) << bytes;
  for (const auto algorithm :
       {ChecksumAlgorithm::kMd5, ChecksumAlgorithm::kSha1, ChecksumAlgorithm::kSha256, ChecksumAlgorithm::kSha512})
    EXPECT_EQ(checksum_hex_of_file(algorithm, path), checksum_hex(algorithm, bytes));
  ::unlink(path);
  EXPECT_THROW(checksum_hex_of_file(ChecksumAlgorithm::kSha1, path), std::runtime_error);
}

}  // namespace
}  // namespace capsule::proxy::maven
