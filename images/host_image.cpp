// Builds the `host` image: a generated root skeleton (FHS dirs, merged-/usr symlinks, a curated /etc
// copied from the host) as the only layer, with the host's /usr bound read-only on top.
#include "images/host_image.h"

#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

#include "sandbox/error.h"

namespace capsule::images {
namespace fs = std::filesystem;
namespace {

// Bump when the skeleton's content rules change, so old skeletons are not reused.
constexpr const char* kSkeletonName = "host-root-v1";

// Host /etc entries that toolchains need (alternatives symlinks, JDK/Maven/Python config, TLS roots,
// loader config). Anything else — pip.conf, environment, profile, shells' rc files — stays out.
constexpr const char* kEtcAllowlist[] = {
    "alternatives", "java-17-openjdk", "java-21-openjdk", "java-11-openjdk", "maven", "python3",
    "python3.11",   "ssl",             "ca-certificates", "ca-certificates.conf", "ld.so.conf",
    "ld.so.conf.d", "ld.so.cache",     "localtime",       "timezone",       "mime.types",
    "debian_version", "os-release",    "protocols",       "services",       "networks", "gai.conf",
    "host.conf",    "magic",           "magic.mime",      "inputrc",        "terminfo", "xml", "sgml",
};

constexpr const char* kDirs[] = {"usr", "etc", "root", "home", "tmp", "proc", "sys", "dev", "run", "mnt",
                                 "opt", "srv", "workspace", "var", "var/tmp", "var/cache", "var/lib", "var/log"};

void write_file(const fs::path& path, const std::string& content) {
  std::ofstream file(path, std::ios::trunc);
  file << content;
  if (!file) sandbox::throw_error("host-image", path.string(), "write failed");
}

void build_skeleton(const fs::path& root) {
  fs::create_directories(root);
  for (const char* dir : kDirs) fs::create_directories(root / dir);
  fs::permissions(root / "tmp", fs::perms::all | fs::perms::sticky_bit);
  fs::permissions(root / "var/tmp", fs::perms::all | fs::perms::sticky_bit);
  fs::permissions(root / "root", fs::perms::owner_all);
  for (const char* link : {"bin", "sbin", "lib", "lib32", "lib64", "libx32"}) {
    if (fs::is_symlink(fs::path("/") / link)) fs::create_symlink(fs::read_symlink(fs::path("/") / link), root / link);
  }
  const fs::path etc = root / "etc";
  for (const char* name : kEtcAllowlist) {
    const fs::path source = fs::path("/etc") / name;
    if (!fs::exists(fs::symlink_status(source))) continue;
    fs::copy(source, etc / name, fs::copy_options::recursive | fs::copy_options::copy_symlinks);
  }
  write_file(etc / "passwd",
             "root:x:0:0:root:/root:/bin/sh\nnobody:x:65534:65534:nobody:/nonexistent:/usr/sbin/nologin\n");
  write_file(etc / "group", "root:x:0:\ntty:x:5:\nnogroup:x:65534:\n");
  write_file(etc / "hosts", "127.0.0.1\tlocalhost capsule\n::1\tlocalhost ip6-localhost ip6-loopback\n");
  write_file(etc / "hostname", "capsule\n");
  write_file(etc / "resolv.conf", "");
  write_file(etc / "nsswitch.conf", "passwd: files\ngroup: files\nshadow: files\nhosts: files\n");
}

}  // namespace

HostImage prepare_host_image(const std::string& cache_dir) {
  const fs::path root = fs::path(cache_dir) / kSkeletonName;
  try {
    if (!fs::exists(root)) {
      fs::create_directories(cache_dir);
      // Built beside its final name and renamed, so concurrent preparers never see half a skeleton.
      const fs::path staging = fs::path(cache_dir) / (std::string(kSkeletonName) + ".tmp-" + std::to_string(getpid()));
      fs::remove_all(staging);
      build_skeleton(staging);
      std::error_code ec;
      fs::rename(staging, root, ec);
      if (ec) fs::remove_all(staging);  // another process won the race; theirs is identical
    }
  } catch (const fs::filesystem_error& e) {
    sandbox::throw_error("host-image", e.path1().string(), e.what());
  }
  HostImage image;
  image.layers = {root.string()};
  image.mounts = {sandbox::BindMount{"/usr", "/usr", true, true}};
  image.env = {"PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin", "HOME=/root", "USER=root",
               "LANG=C.UTF-8"};
  return image;
}

}  // namespace capsule::images
