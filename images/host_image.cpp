// Builds the `host` image: a generated root skeleton (FHS dirs, merged-/usr symlinks, a curated /etc
// copied from the host) as the only layer, with the host's /usr bound read-only on top.
#include "images/host_image.h"

#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <mutex>
#include <optional>

#include "store/digest.h"

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

std::vector<sandbox::BindMount> host_binds() { return {sandbox::BindMount{"/usr", "/usr", true, true}}; }

constexpr std::uint64_t kMaxDpkgStatus = 64ull << 20;
constexpr std::size_t kMaxPackages = 200000;

// "Package=Version" of each stanza whose Status ends in "installed" (not config-files or half-installed ones).
std::vector<std::string> installed_packages(std::string_view status) {
  std::vector<std::string> out;
  std::string package, version, state;
  auto finish = [&] {
    if (!package.empty() && state.ends_with(" installed") && out.size() < kMaxPackages) {
      out.push_back(package + "=" + version);
    }
    package.clear();
    version.clear();
    state.clear();
  };
  while (!status.empty()) {
    const std::size_t end = std::min(status.find('\n'), status.size());
    const std::string_view line = status.substr(0, end);
    status.remove_prefix(std::min(end + 1, status.size()));
    if (line.empty()) {
      finish();
      continue;
    }
    auto value = [&](std::string_view key) -> std::optional<std::string> {
      if (!line.starts_with(key)) return std::nullopt;
      std::string_view rest = line.substr(key.size());
      while (!rest.empty() && rest.front() == ' ') rest.remove_prefix(1);
      return std::string(rest);
    };
    if (auto name = value("Package:")) package = *name;
    if (auto number = value("Version:")) version = *number;
    if (auto status_words = value("Status:")) state = *status_words;
  }
  finish();
  std::sort(out.begin(), out.end());
  return out;
}

}  // namespace

std::string host_image_digest_of(std::string_view dpkg_status, const std::vector<sandbox::BindMount>& binds) {
  std::string exposed = std::string("skeleton ") + kSkeletonName + "\n";
  for (const auto& bind : binds) {
    exposed += "bind " + bind.source + " " + bind.target + (bind.read_only ? " ro" : " rw") + "\n";
  }
  for (const auto& package : installed_packages(dpkg_status)) exposed += "package " + package + "\n";
  return store::sha256_of(exposed).str();
}

std::string host_image_digest(const std::string& dpkg_status_path) {
  static std::mutex mutex;
  static std::string remembered_key, remembered_digest;
  std::string text;
  std::string key;
  struct stat st{};
  if (stat(dpkg_status_path.c_str(), &st) == 0) {
    key = dpkg_status_path + " " + std::to_string(st.st_size) + " " + std::to_string(st.st_mtim.tv_sec) + "." +
          std::to_string(st.st_mtim.tv_nsec);
  }
  {
    std::lock_guard lock(mutex);
    if (!key.empty() && key == remembered_key) return remembered_digest;
  }
  std::ifstream file(dpkg_status_path, std::ios::binary);
  if (file) {
    // The file's size (plus a little for a write under way), not the 64 MiB ceiling, zero-filled each time.
    text.resize(std::min<std::uint64_t>(kMaxDpkgStatus, static_cast<std::uint64_t>(st.st_size) + 4096));
    file.read(text.data(), static_cast<std::streamsize>(text.size()));
    text.resize(static_cast<std::size_t>(file.gcount()));
  }
  const std::string digest = host_image_digest_of(text, host_binds());
  std::lock_guard lock(mutex);
  remembered_key = key;
  remembered_digest = digest;
  return digest;
}

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
  image.mounts = host_binds();
  image.env = {"PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin", "HOME=/root", "USER=root",
               "LANG=C.UTF-8"};
  return image;
}

}  // namespace capsule::images
