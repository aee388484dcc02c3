// Tests of the POST /v1/images body `capsule images import` builds: labels from repeated --label and from a
// --labels-file (the labels.json the recipes write), the explicit --label winning, and bad files refused.
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <memory>

#include "client/cli_images.h"

namespace capsule::client {
namespace {

using nlohmann::json;
namespace fs = std::filesystem;

class ImportBody : public ::testing::Test {
 protected:
  void SetUp() override {
    char pattern[] = "/tmp/capsule-import-args-XXXXXX";
    ASSERT_NE(::mkdtemp(pattern), nullptr);
    dir_ = pattern;
  }
  void TearDown() override { fs::remove_all(dir_); }

  std::string write(const std::string& name, const std::string& content) const {
    std::ofstream(dir_ / name, std::ios::binary) << content;
    return (dir_ / name).string();
  }
  ImageImportOptions rootfs() const {
    ImageImportOptions options;
    options.source = (dir_ / "rootfs.tar.gz").string();
    options.ref = "py:3.12";
    return options;
  }

  fs::path dir_;
};

TEST_F(ImportBody, NoLabelsNoField) {
  const json body = build_import_body(rootfs());
  EXPECT_EQ(body, json({{"source", (dir_ / "rootfs.tar.gz").string()}, {"format", "rootfs"}, {"ref", "py:3.12"}}));
}

TEST_F(ImportBody, SharingFlagsBecomePublicAndGroup) {
  ImageImportOptions options = rootfs();
  options.sharing.make_private = true;
  options.sharing.group = "team";
  EXPECT_EQ(build_import_body(options)["public"], false);
  EXPECT_EQ(build_import_body(options)["group"], "team");
  json body = json::object();
  add_sharing_fields(ImageSharing{true, false, "", true}, body);
  EXPECT_EQ(body, json({{"public", true}, {"group", nullptr}}));
}

TEST_F(ImportBody, LabelsFileAndLabelsCombineTheExplicitLabelWinning) {
  ImageImportOptions options = rootfs();
  options.labels_file = write("labels.json", R"({"org.capsule.toolchain.python": "3.12.1", "base": "debian"})");
  options.labels = {"base=ubuntu", "extra=1"};
  EXPECT_EQ(build_import_body(options)["labels"],
            json({{"org.capsule.toolchain.python", "3.12.1"}, {"base", "ubuntu"}, {"extra", "1"}}));
  options.labels.clear();
  EXPECT_EQ(build_import_body(options)["labels"],
            json({{"org.capsule.toolchain.python", "3.12.1"}, {"base", "debian"}}));
}

TEST_F(ImportBody, BadLabelsFilesAreRefusedWithTheReason) {
  const auto refusal = [&](const std::string& content) {
    ImageImportOptions options = rootfs();
    options.labels_file = write("bad.json", content);
    try {
      build_import_body(options);
    } catch (const std::invalid_argument& e) {
      return std::string(e.what());
    }
    return std::string("accepted");
  };
  EXPECT_NE(refusal("{\"a\": ").find("not valid JSON"), std::string::npos);
  EXPECT_NE(refusal("[\"a=b\"]").find("expected a JSON object"), std::string::npos);
  EXPECT_NE(refusal(R"({"java": 17})").find("label java is not a string"), std::string::npos);
  EXPECT_NE(refusal(R"({"": "x"})").find("empty name"), std::string::npos);
  const std::string big = "{\"k\": \"" + std::string(kMaxLabelsFileBytes, 'x') + "\"}";
  EXPECT_NE(refusal(big).find("larger than 65536 bytes"), std::string::npos);
  ImageImportOptions missing = rootfs();
  missing.labels_file = (dir_ / "missing.json").string();
  EXPECT_THROW(build_import_body(missing), std::runtime_error);
}

}  // namespace
}  // namespace capsule::client
