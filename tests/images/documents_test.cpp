// Digests, the blob store, image refs and OCI document parsing: the small pieces the image store is
// built from, including every way their inputs are refused.
#include <gtest/gtest.h>

#include <fcntl.h>
#include <unistd.h>

#include <sstream>

#include "store/blob_store.h"
#include "store/digest.h"
#include "images/error.h"
#include "images/image_ref.h"
#include "images/oci_image.h"
#include "tests/images/fixtures.h"

namespace capsule::images {
namespace {

using testing::count_entries;
using testing::TempDir;

const char* kAbc = "sha256:ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad";

TEST(Digest, ParsesOnlyCanonicalSha256) {
  EXPECT_EQ(store::Digest::parse(kAbc).str(), kAbc);
  EXPECT_EQ(store::Digest::parse(kAbc).hex().size(), 64u);
  EXPECT_FALSE(store::Digest::try_parse("sha256:BA7816BF8F01CFEA414140DE5DAE2223B00361A396177A9CB410FF61F20015AD"));
  EXPECT_FALSE(store::Digest::try_parse("sha256:abc"));
  EXPECT_FALSE(store::Digest::try_parse("ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"));
  EXPECT_FALSE(store::Digest::try_parse(std::string("sha256:") + std::string(63, 'a') + "g"));
  try {
    store::Digest::parse("sha512:abcd");
    FAIL() << "sha512 accepted";
  } catch (const base::Error& e) {
    EXPECT_EQ(e.cause().step, "digest");
    EXPECT_NE(std::string(e.what()).find("unsupported digest algorithm"), std::string::npos) << e.what();
  }
}

TEST(Digest, Sha256StreamsLikeOneShot) {
  EXPECT_EQ(store::sha256_of("abc").str(), kAbc);
  store::Sha256 hasher;
  hasher.update("a");
  hasher.update("bc");
  EXPECT_EQ(hasher.finish().str(), kAbc);
  EXPECT_EQ(store::sha256_of("").str(), "sha256:e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
}

TEST(BlobStore, PutVerifiesAndStoresByDigest) {
  TempDir dir;
  store::BlobStore store(dir.path());
  const store::Digest digest = store.put_bytes("abc");
  EXPECT_EQ(digest.str(), kAbc);
  EXPECT_TRUE(store.has(digest));
  EXPECT_EQ(store.path(digest), dir / "blobs/sha256" / digest.hex());
  EXPECT_EQ(store.read(digest, 100), "abc");
  EXPECT_EQ(store.size(digest), 3u);

  std::istringstream stream("hello");
  const store::Digest hello = store.put_stream(stream, store::sha256_of("hello"), 5);
  testing::write_file(dir / "src", "from a file");
  const store::Digest from_file = store.put_file(dir / "src", store::sha256_of("from a file"));
  int fd = open((dir / "src").c_str(), O_RDONLY);
  EXPECT_EQ(store.put_fd(fd), from_file);
  close(fd);
  std::vector<store::Digest> expected = {digest, hello, from_file};
  std::sort(expected.begin(), expected.end());
  EXPECT_EQ(store.list(), expected);

  EXPECT_TRUE(store.remove(hello));
  EXPECT_FALSE(store.remove(hello));
  EXPECT_FALSE(store.has(hello));
}

TEST(BlobStore, MismatchThrowsAndLeavesNothing) {
  TempDir dir;
  store::BlobStore store(dir.path());
  EXPECT_THROW(store.put_bytes("tampered", store::sha256_of("original")), base::Error);
  std::istringstream too_long("0123456789");
  EXPECT_THROW(store.put_stream(too_long, std::nullopt, 4), base::Error);
  std::istringstream too_short("01");
  EXPECT_THROW(store.put_stream(too_short, store::sha256_of("01"), 4), base::Error);
  {
    store::BlobWriter abandoned = store.writer();
    abandoned.write("partial", 7);
  }
  EXPECT_EQ(count_entries(dir / "blobs/sha256"), 0u);
  EXPECT_EQ(count_entries(dir / "tmp"), 0u);
  try {
    store.put_bytes("tampered", store::sha256_of("original"));
  } catch (const base::Error& e) {
    EXPECT_EQ(e.cause().path, store::sha256_of("original").str());
    EXPECT_NE(e.cause().detail.find(store::sha256_of("tampered").str()), std::string::npos) << e.what();
  }
}

TEST(BlobStore, KnownBlobIsNotReadAgainButSizeIsChecked) {
  TempDir dir;
  store::BlobStore store(dir.path());
  const store::Digest digest = store.put_bytes("abc");
  int fd = open("/dev/null", O_RDONLY);
  EXPECT_EQ(store.put_fd(fd, digest, 3), digest);  // nothing read from /dev/null
  EXPECT_THROW(store.put_fd(fd, digest, 4), base::Error);
  close(fd);
}

TEST(ImageRef, ParsesTagsDigestsAndNames) {
  EXPECT_EQ(ImageRef::parse("jdk17").str(), "jdk17:latest");
  EXPECT_EQ(ImageRef::parse("toolchains/jdk:17-slim").str(), "toolchains/jdk:17-slim");
  EXPECT_EQ(ImageRef::parse("registry.local:5000/base").str(), "registry.local:5000/base:latest");
  EXPECT_EQ(ImageRef::parse("registry.local:5000/base:v1").tag, "v1");
  const ImageRef by_digest = ImageRef::parse(std::string("base@") + kAbc);
  EXPECT_TRUE(by_digest.by_digest());
  EXPECT_EQ(by_digest.name, "base");
  EXPECT_EQ(ImageRef::parse(kAbc).str(), kAbc);
  for (const char* bad : {"", "UPPER", "a//b", "-a", "a:", "a:-tag", "a@sha256:12", "sha256:xyz", "a b", "../x",
                          "a:b:c"}) {
    EXPECT_THROW(ImageRef::parse(bad), ImageError) << bad;
  }
}

TEST(OciDocuments, ParsesIndexManifestAndConfigIncludingDocker) {
  const std::string index = R"({"schemaVersion":2,"manifests":[{"mediaType":"application/vnd.oci.image.manifest.v1+json",
    "digest":")" + std::string(kAbc) + R"(","size":7,"platform":{"os":"linux","architecture":"amd64"},
    "annotations":{"org.opencontainers.image.ref.name":"v1"}}]})";
  const ImageIndex parsed_index = parse_index(index, "index.json");
  ASSERT_EQ(parsed_index.manifests.size(), 1u);
  EXPECT_EQ(parsed_index.manifests[0].size, 7u);
  EXPECT_EQ(parsed_index.manifests[0].platform->architecture, "amd64");
  EXPECT_EQ(parsed_index.manifests[0].annotations.at("org.opencontainers.image.ref.name"), "v1");

  const std::string docker_manifest = R"({"schemaVersion":2,
    "mediaType":"application/vnd.docker.distribution.manifest.v2+json",
    "config":{"mediaType":"application/vnd.docker.container.image.v1+json","digest":")" + std::string(kAbc) +
                                      R"(","size":3},
    "layers":[{"mediaType":"application/vnd.docker.image.rootfs.diff.tar.gzip","digest":")" + std::string(kAbc) +
                                      R"(","size":3}]})";
  const ImageManifest manifest = parse_manifest(docker_manifest, "m");
  EXPECT_EQ(manifest.layers.size(), 1u);
  EXPECT_EQ(manifest.config.media_type, media_type::kDockerConfig);

  const std::string config = R"({"architecture":"amd64","os":"linux","config":{"Env":["PATH=/bin","A=b=c"],
    "WorkingDir":"/work","User":"1000:1000","Labels":{"capsule.toolchain":"jdk17"}},
    "rootfs":{"type":"layers","diff_ids":[")" + std::string(kAbc) + R"("]}})";
  const ImageConfig parsed = parse_config(config, "c");
  EXPECT_EQ(parsed.env, (std::vector<std::string>{"PATH=/bin", "A=b=c"}));
  EXPECT_EQ(parsed.working_dir, "/work");
  EXPECT_EQ(parsed.user, "1000:1000");
  EXPECT_EQ(parsed.labels.at("capsule.toolchain"), "jdk17");
  EXPECT_EQ(parsed.diff_ids.size(), 1u);
  // Docker writes nulls for empty fields.
  const ImageConfig nulls = parse_config(
      R"({"config":{"Env":null,"Labels":null,"User":""},"rootfs":{"type":"layers","diff_ids":[]}})", "c");
  EXPECT_TRUE(nulls.env.empty());
  EXPECT_TRUE(nulls.labels.empty());
}

TEST(OciDocuments, RefusesMalformedDocuments) {
  const std::string digest = kAbc;
  const std::string good_config = R"({"mediaType":"application/vnd.oci.image.config.v1+json","digest":")" + digest +
                                  R"(","size":3})";
  const std::string layers = R"("layers":[])";
  const std::vector<std::string> bad_manifests = {
      "not json",
      R"({"schemaVersion":1,"config":)" + good_config + "," + layers + "}",
      R"({"schemaVersion":2,)" + layers + "}",
      R"({"schemaVersion":2,"mediaType":"application/vnd.oci.image.index.v1+json","config":)" + good_config + "," +
          layers + "}",
      R"({"schemaVersion":2,"config":{"mediaType":"application/vnd.cncf.helm.config.v1+json","digest":")" + digest +
          R"(","size":3},)" + layers + "}",
      R"({"schemaVersion":2,"config":)" + good_config +
          R"(,"layers":[{"mediaType":"application/x-made-up","digest":")" + digest + R"(","size":3}]})",
      R"({"schemaVersion":2,"config":{"mediaType":"application/vnd.oci.image.config.v1+json","digest":"sha256:1","size":3},)" +
          layers + "}",
      R"({"schemaVersion":2,"config":{"mediaType":"application/vnd.oci.image.config.v1+json","digest":")" + digest +
          R"(","size":-1},)" + layers + "}",
  };
  for (const auto& text : bad_manifests) {
    EXPECT_THROW(parse_manifest(text, "m"), ImageError) << text;
  }
  EXPECT_THROW(parse_index(R"({"schemaVersion":2})", "i"), ImageError);
  EXPECT_THROW(parse_config(R"({"rootfs":{"type":"layers","diff_ids":["sha256:1"]}})", "c"), ImageError);
  EXPECT_THROW(parse_config(R"({"config":{"Env":["NOVALUE"]},"rootfs":{"type":"layers","diff_ids":[]}})", "c"),
               ImageError);
  EXPECT_THROW(parse_config(R"({"config":{}})", "c"), ImageError);
}

}  // namespace
}  // namespace capsule::images
