// Tests for images composed at run time: config merging (Env with PATH joined, Labels, WorkingDir, User), the
// layer dirs of a stack, toolchain candidates of layer images, and the run's user and HOME from /etc/passwd.
#include "images/image_stack.h"

#include <gtest/gtest.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>

#include "images/error.h"
#include "images/image_user.h"
#include "tests/images/fixtures.h"

namespace capsule::images {
namespace {

using testing::TempDir;

store::Digest digest_of(char c) { return store::Digest::from_hex(std::string(64, c)); }

ImageInfo info(char id, std::vector<std::string> refs, ImageConfig config, std::vector<std::string> layer_dirs = {}) {
  ImageInfo image;
  image.manifest_digest = digest_of(id);
  image.refs = std::move(refs);
  image.config = std::move(config);
  image.layer_dirs = std::move(layer_dirs);
  return image;
}

ImageConfig config(std::vector<std::string> env, std::map<std::string, std::string> labels = {},
                   std::string working_dir = "", std::string user = "") {
  ImageConfig c;
  c.env = std::move(env);
  c.labels = std::move(labels);
  c.working_dir = std::move(working_dir);
  c.user = std::move(user);
  return c;
}

const std::string kDefaultPath = "PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin";

// ---------------------------------------------------------------------------------------------------------
TEST(MergeConfigs, LaterImageWinsPerVariableAndPathIsJoined) {
  const ImageConfig base = config({kDefaultPath, "LANG=C.UTF-8", "JAVA_HOME=/usr/lib/jvm/default"});
  const ImageConfig layer = config({"JAVA_HOME=/opt/jdk-25", "PATH=/opt/jdk-25/bin:/usr/bin::/opt/jdk-25/bin", "TOOL=1"});
  const ImageConfig merged = merge_configs(base, layer);
  EXPECT_EQ(merged.env, (std::vector<std::string>{
                            "PATH=/opt/jdk-25/bin:/usr/bin:/usr/local/sbin:/usr/local/bin:/usr/sbin:/sbin:/bin",
                            "LANG=C.UTF-8", "JAVA_HOME=/opt/jdk-25", "TOOL=1"}));

  // Only one side sets PATH: it is kept as it is.
  EXPECT_EQ(merge_configs(base, config({"TOOL=1"})).env.front(), kDefaultPath);
  EXPECT_EQ(merge_configs(config({}), layer).env,
            (std::vector<std::string>{"JAVA_HOME=/opt/jdk-25", "PATH=/opt/jdk-25/bin:/usr/bin::/opt/jdk-25/bin",
                                      "TOOL=1"}));
  // The same PATH twice stays one copy of each entry, in order.
  EXPECT_EQ(merge_configs(base, config({kDefaultPath})).env.front(), kDefaultPath);
  // A value containing '=' is not cut there.
  EXPECT_EQ(merge_configs(base, config({"LANG=a=b"})).env[1], "LANG=a=b");
}

TEST(MergeConfigs, LabelsMergeAndWorkingDirAndUserComeFromTheBaseUnlessSet) {
  const ImageConfig base = config({kDefaultPath},
                                  {{"org.capsule.toolchain.python", "3.11.2"}, {"org.capsule.toolchain.pip", "23.0.1"},
                                   {"org.capsule.recipe", "python3"}},
                                  "/srv", "app");
  ImageConfig layer = config({}, {{"org.capsule.toolchain.python", "3.12.1"}, {"org.capsule.layer.path", "/opt/python"}});
  layer.diff_ids = {digest_of('d')};
  ImageConfig merged = merge_configs(base, layer);
  EXPECT_EQ(merged.labels, (std::map<std::string, std::string>{{"org.capsule.toolchain.python", "3.12.1"},
                                                                {"org.capsule.toolchain.pip", "23.0.1"},
                                                                {"org.capsule.recipe", "python3"},
                                                                {"org.capsule.layer.path", "/opt/python"}}));
  EXPECT_EQ(merged.working_dir, "/srv");
  EXPECT_EQ(merged.user, "app");
  EXPECT_EQ(merged.diff_ids, std::vector<store::Digest>{digest_of('d')});

  layer.working_dir = "/work";
  layer.user = "1000:1000";
  merged = merge_configs(base, layer);
  EXPECT_EQ(merged.working_dir, "/work");
  EXPECT_EQ(merged.user, "1000:1000");
}

TEST(StackImages, LayersTopmostFirstOnceEachAndConfigsFoldedFromTheBase) {
  const std::vector<ImageInfo> images = {
      info('a', {"base:1"}, config({kDefaultPath, "A=base"}), {"/l/base-top", "/l/base-bottom"}),
      info('b', {"tool:1"}, config({"PATH=/opt/tool/bin", "A=tool"}), {"/l/tool"}),
      info('c', {"data:1"}, config({"PATH=/opt/data/bin:/opt/tool/bin"}), {"/l/data", "/l/base-bottom"}),
  };
  const ImageStack stack = stack_images(images);
  EXPECT_EQ(stack.digests, (std::vector<store::Digest>{digest_of('a'), digest_of('b'), digest_of('c')}));
  EXPECT_EQ(stack.layer_dirs, (std::vector<std::string>{"/l/data", "/l/base-bottom", "/l/tool", "/l/base-top"}));
  EXPECT_EQ(stack.config.env,
            (std::vector<std::string>{"PATH=/opt/data/bin:/opt/tool/bin:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:"
                                      "/sbin:/bin",
                                      "A=tool"}));

  const ImageStack single = stack_images({images[0]});
  EXPECT_EQ(single.layer_dirs, images[0].layer_dirs);
  EXPECT_EQ(single.config.env, images[0].config.env);
  EXPECT_THROW(stack_images({}), ImageError);
}

TEST(ToolchainCandidates, LayerImagesCarryTheirBaseAndMergedLabels) {
  const std::string python = "org.capsule.toolchain.python";
  const std::string base_label(kLayerBaseLabel);
  const std::vector<ImageInfo> installed = {
      info('a', {"debian/base:12", "debian/base:latest"}, config({}, {{python, "3.11.2"}, {"os", "debian"}})),
      info('b', {"layers/py:3.12"}, config({}, {{python, "3.12.1"}, {base_label, "debian/base:12"}})),
      info('c', {"layers/py-by-digest:3.12"}, config({}, {{python, "3.12.2"}, {base_label, digest_of('a').str()}})),
      info('d', {"layers/py-named-digest:3.12"},
           config({}, {{python, "3.12.3"}, {base_label, "debian/base@" + digest_of('a').str()}})),
      info('e', {"layers/py-lost:3.13"}, config({}, {{python, "3.13.0"}, {base_label, "debian/gone:1"}})),
      info('f', {"layers/py-bad:3.13"}, config({}, {{python, "3.13.1"}, {base_label, "Not A Ref"}})),
      info('1', {"layers/on-layer:1"}, config({}, {{"org.capsule.toolchain.java", "25"}, {base_label, "layers/py:3.12"}})),
      info('2', {}, config({}, {{python, "3.10.0"}})),
  };
  const std::vector<ImageCandidate> candidates = toolchain_candidates(installed);
  ASSERT_EQ(candidates.size(), installed.size());

  EXPECT_EQ(candidates[0].ref, "debian/base:12");
  EXPECT_TRUE(candidates[0].base_ref.empty());
  EXPECT_TRUE(candidates[0].unusable.empty());
  EXPECT_EQ(candidates[0].labels, installed[0].config.labels);

  for (std::size_t i : {1u, 2u, 3u}) {
    SCOPED_TRACE(candidates[i].ref);
    EXPECT_EQ(candidates[i].digest, installed[i].manifest_digest.str());
    EXPECT_EQ(candidates[i].base_ref, installed[i].config.labels.at(base_label));
    EXPECT_EQ(candidates[i].base_digest, digest_of('a').str());
    EXPECT_TRUE(candidates[i].unusable.empty()) << candidates[i].unusable;
    EXPECT_EQ(candidates[i].labels.at(python), installed[i].config.labels.at(python)) << "the layer's version wins";
    EXPECT_EQ(candidates[i].labels.at("os"), "debian") << "the base's labels show through";
  }

  EXPECT_EQ(candidates[4].unusable, "its base debian/gone:1 is not installed");
  EXPECT_TRUE(candidates[4].base_digest.empty());
  EXPECT_NE(candidates[5].unusable.find("org.capsule.layer.base is not an image ref"), std::string::npos)
      << candidates[5].unusable;
  EXPECT_EQ(candidates[6].unusable, "its base layers/py:3.12 is itself a toolchain layer");
  EXPECT_EQ(candidates[7].ref, digest_of('2').str()) << "an image without refs is named by its digest";
}

// A committed image carries its base's toolchain labels but one caller's outputs: it is never chosen for a
// toolchains request, and selection says nothing provides the version when it is the only one that would.
TEST(ToolchainCandidates, CommittedImagesAreChosenOnlyByRef) {
  const std::string python = "org.capsule.toolchain.python";
  const std::vector<ImageInfo> installed = {
      info('a', {"a/venv-committed:1"}, config({}, {{python, "3.11.2"}, {std::string(kCommittedFromRunLabel), "r1"}})),
      info('b', {"capsule/python3-base:bookworm"}, config({}, {{python, "3.11.2"}})),
      info('c', {"layers/py-on-committed:3.13"},
           config({}, {{python, "3.13.0"}, {std::string(kLayerBaseLabel), "a/venv-committed:1"}}))};
  const std::vector<ImageCandidate> candidates = toolchain_candidates(installed);
  ASSERT_EQ(candidates.size(), 3u);
  EXPECT_EQ(candidates[2].unusable, "its base a/venv-committed:1 holds a run's committed outputs");
  EXPECT_EQ(candidates[0].unusable,
            "it holds a run's committed outputs (org.capsule.committed.from_run=r1): chosen only by its ref");
  EXPECT_TRUE(candidates[1].unusable.empty());

  const ToolchainChoice choice = select_toolchain_image(candidates, {{{"python", "3.11"}}, std::nullopt}, nullptr);
  EXPECT_EQ(choice.image.ref, "capsule/python3-base:bookworm");
  EXPECT_EQ(choice.matching_images, 1u);
  try {
    select_toolchain_image({candidates[0]}, {{{"python", "3.11"}}, std::nullopt}, nullptr);
    ADD_FAILURE() << "the committed image was chosen";
  } catch (const ToolchainError& e) {
    EXPECT_EQ(e.code(), "no_matching_image");
    EXPECT_NE(std::string(e.what()).find("a/venv-committed:1 would, but it holds a run's committed outputs"),
              std::string::npos)
        << e.what();
  }
}

// ---------------------------------------------------------------------------------------------------------
class ImageUserTest : public ::testing::Test {
 protected:
  void SetUp() override {
    std::filesystem::create_directories(lower_ / "etc");
    std::filesystem::create_directories(upper_ / "etc");  // an etc/ without passwd: the lower one is read
    testing::write_file(lower_ / "etc/passwd",
                        "root:x:0:0:root:/root:/bin/bash\n"
                        "# a comment\n"
                        "\n"
                        "odd:x:not-a-number:0::/odd:/bin/sh\n"
                        "big:x:4294967294:0::/big:/bin/sh\n"
                        "tester:x:1000:1001:Tester:/home/tester:/bin/sh\n"
                        "nohome:x:1002:1002::\n");
    testing::write_file(lower_ / "etc/group", "root:x:0:\nstaff:x:50:tester\n");
  }
  std::vector<std::string> layers() const { return {upper_.path().string(), lower_.path().string()}; }

  TempDir upper_, lower_;
};

TEST_F(ImageUserTest, NamesAndIdsAsDockerResolvesThem) {
  auto check = [&](const std::string& user, std::uint32_t uid, std::uint32_t gid, const std::string& home) {
    SCOPED_TRACE("user '" + user + "'");
    const ImageUser resolved = resolve_image_user(user, layers());
    EXPECT_EQ(resolved.uid, uid);
    EXPECT_EQ(resolved.gid, gid);
    EXPECT_EQ(resolved.home, home);
  };
  check("", 0, 0, "/root");
  check("root", 0, 0, "/root");
  check("tester", 1000, 1001, "/home/tester");
  check("1000", 1000, 1001, "/home/tester");
  check("tester:staff", 1000, 50, "/home/tester");
  check("tester:777", 1000, 777, "/home/tester");
  check("4242", 4242, 0, "/");  // not listed: used as is, gid 0, HOME "/" (runc's defaults)
  check("4242:4242", 4242, 4242, "/");
  check("nohome", 1002, 1002, "/");
}

TEST_F(ImageUserTest, UnknownNamesAndOutOfRangeIdsAreRefused) {
  for (const std::string user : {"nobody-here", "tester:nogroup", "2147483648", "1000:99999999999"}) {
    try {
      resolve_image_user(user, layers());
      ADD_FAILURE() << "accepted '" << user << "'";
    } catch (const base::Error& e) {
      EXPECT_EQ(e.cause().step, "user");
      EXPECT_EQ(e.cause().path, user);
    }
  }
  EXPECT_EQ(resolve_image_user("2147483647", layers()).uid, 2147483647u);
}

TEST_F(ImageUserTest, TheTopmostLayerWithTheFileDecidesAndWhiteoutsHideIt) {
  testing::write_file(upper_ / "etc/passwd", "root:x:0:0:root:/var/root:/bin/sh\n");
  EXPECT_EQ(resolve_image_user("", layers()).home, "/var/root");
  EXPECT_THROW(resolve_image_user("tester", layers()), ImageError) << "the lower passwd is shadowed";
  EXPECT_EQ(resolve_image_user("tester:staff", {lower_.path().string()}).gid, 50u);

  std::filesystem::remove(upper_ / "etc/passwd");
  if (::mknod((upper_ / "etc/passwd").c_str(), S_IFCHR | 0, makedev(0, 0)) != 0) {
    GTEST_SKIP() << "mknod of an overlayfs whiteout needs CAP_MKNOD";
  }
  EXPECT_EQ(resolve_image_user("", layers()).home, "/");
  EXPECT_THROW(resolve_image_user("tester", layers()), ImageError);
  EXPECT_EQ(resolve_image_user("", {}).home, "/") << "no passwd at all";
}

}  // namespace
}  // namespace capsule::images
