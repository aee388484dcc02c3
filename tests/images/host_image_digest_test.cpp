// The host image's digest: what it exposes (installed packages with versions, the paths it binds), nothing else.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include "images/host_image.h"

namespace capsule::images {
namespace {

const std::vector<sandbox::BindMount> kUsr = {sandbox::BindMount{"/usr", "/usr", true, true}};

std::string stanza(const std::string& name, const std::string& version, const std::string& status = "install ok installed") {
  return "Package: " + name + "\nStatus: " + status + "\nPriority: optional\nVersion: " + version + "\n\n";
}

TEST(HostImageDigest, DependsOnInstalledPackagesAndVersionsNotTheirOrder) {
  const std::string a = stanza("python3", "3.11.2-1") + stanza("maven", "3.8.7-1");
  const std::string reordered = stanza("maven", "3.8.7-1") + "Package: python3\nVersion: 3.11.2-1\nStatus: install ok installed\n";
  EXPECT_EQ(host_image_digest_of(a, kUsr), host_image_digest_of(reordered, kUsr));
  EXPECT_EQ(host_image_digest_of(a, kUsr).rfind("sha256:", 0), 0u);
  EXPECT_NE(host_image_digest_of(a, kUsr), host_image_digest_of(stanza("python3", "3.11.4-1") + stanza("maven", "3.8.7-1"), kUsr))
      << "an upgrade changes it";
  EXPECT_NE(host_image_digest_of(a, kUsr), host_image_digest_of(a + stanza("openjdk-17-jre", "17.0.9"), kUsr));
  EXPECT_EQ(host_image_digest_of(a, kUsr), host_image_digest_of(a + stanza("old", "1.0", "deinstall ok config-files"), kUsr))
      << "packages removed but for their configuration expose nothing";
}

TEST(HostImageDigest, DependsOnWhatItBinds) {
  const std::string a = stanza("python3", "3.11.2-1");
  std::vector<sandbox::BindMount> more = kUsr;
  more.push_back(sandbox::BindMount{"/opt", "/opt", true, true});
  EXPECT_NE(host_image_digest_of(a, kUsr), host_image_digest_of(a, more));
}

TEST(HostImageDigest, OfThisHostIsStableAndFollowsTheStatusFile) {
  const auto dir = std::filesystem::temp_directory_path() / ("host-digest-" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  const auto status = (dir / "status").string();
  std::ofstream(status) << stanza("python3", "3.11.2-1");
  const std::string first = host_image_digest(status);
  EXPECT_EQ(first, host_image_digest(status));
  EXPECT_EQ(first, host_image_digest_of(stanza("python3", "3.11.2-1"), kUsr)) << "the host image binds /usr";
  std::ofstream(status) << stanza("python3", "3.11.2-1") << stanza("maven", "3.8.7-1");
  EXPECT_NE(first, host_image_digest(status)) << "a changed status file is read again";
  EXPECT_EQ(host_image_digest("/nonexistent/status"), host_image_digest_of("", kUsr));
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace capsule::images
