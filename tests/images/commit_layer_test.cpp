// ImageStore::commit_layer: a packed upper stacked on installed images as a new image (layers in order, merged
// config, labels, ref), usable like any import; a failed commit leaves no ref, blob or layer behind.
#include <gtest/gtest.h>

#include "images/error.h"
#include "images/image_store.h"
#include "images/upper_layer.h"
#include "tests/images/fixtures.h"

namespace capsule::images {
namespace {

namespace fs = std::filesystem;
using testing::LayoutBuilder;
using testing::TempDir;

class CommitLayerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    LayoutBuilder layout(tmp_ / "layout");
    ImageConfig config;
    config.env = {"PATH=/usr/bin:/bin"};
    config.labels = {{"base.label", "kept"}};
    const Descriptor manifest = layout.add_image(testing::three_layers(), config);
    layout.write_index({manifest});
    base_ = store_.import_layout(layout.dir(), "base:1");
    fs::create_directories(tmp_ / "upper/root/.m2");
    testing::write_file(tmp_ / "upper/root/.m2/settings.xml", "<settings/>");
    layer_ = pack_upper_layer(tmp_ / "upper", outputs_, UpperLayerOptions{0, 0, 1700000000, 0, {}})->digest;
  }

  TempDir tmp_;
  ImageStore store_{tmp_ / "store"};
  store::BlobStore outputs_{tmp_ / "outputs"};
  store::Digest base_;
  store::Digest layer_;
};

TEST_F(CommitLayerTest, StacksTheLayerOnTheBaseWithItsConfigAndLabels) {
  const store::Digest committed =
      store_.commit_layer({base_}, outputs_, layer_, {{"org.capsule.committed.from_run", "r1"}}, "built:1", 1700000000);
  const ImageInfo info = store_.inspect("built:1");
  EXPECT_EQ(info.manifest_digest, committed);
  const ImageInfo base = store_.inspect("base:1");
  ASSERT_EQ(info.layer_digests.size(), base.layer_digests.size() + 1);
  EXPECT_EQ(info.layer_digests.back(), layer_);
  EXPECT_EQ(info.config.diff_ids.back(), layer_);
  EXPECT_EQ(info.config.env, base.config.env);
  EXPECT_EQ(info.config.labels.at("base.label"), "kept");
  EXPECT_EQ(info.config.labels.at("org.capsule.committed.from_run"), "r1");
  EXPECT_EQ(testing::read_file(fs::path(info.layer_dirs.front()) / "root/.m2/settings.xml"), "<settings/>");
  // The same commit again is the same image.
  EXPECT_EQ(store_.commit_layer({base_}, outputs_, layer_, {{"org.capsule.committed.from_run", "r1"}}, "built:2",
                                1700000000),
            committed);
}

TEST_F(CommitLayerTest, AFailedCommitLeavesNothing) {
  const auto blobs_before = store::BlobStore(tmp_ / "store").list();
  EXPECT_THROW(store_.commit_layer({base_}, outputs_, store::sha256_of("missing"), {}, "built:1", 0), base::Error);
  EXPECT_THROW(store_.commit_layer({base_}, outputs_, layer_, {}, "sha256:" + layer_.hex(), 0), ImageError);
  EXPECT_THROW(store_.resolve("built:1"), ImageError);
  EXPECT_EQ(store::BlobStore(tmp_ / "store").list(), blobs_before);
}

}  // namespace
}  // namespace capsule::images
