// The per-sandbox disk: this kernel has no usable filesystem quotas (ext4's quota format and XFS quotas are
// not built in), so each sandbox's writable layers get a small ext4 of their own, sized to the limit.
#include "sandbox/quota.h"

#include <fcntl.h>
#include <linux/loop.h>
#include <spawn.h>
#include <sys/ioctl.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <memory>
#include <sstream>
#include <thread>

#include "sandbox/error.h"
#include "base/unique_fd.h"

extern char** environ;

namespace capsule::sandbox {
namespace {

constexpr std::uint64_t kInodeSize = 256;
constexpr std::uint64_t kBytesPerDefaultInode = 16 << 10;
constexpr std::uint64_t kRoomForAsyncRelease = 1ull << 30;  // host free space above which release is async
constexpr std::size_t kMaxTemplates = 32;  // per templates dir: see remove_oldest_templates

const char* mkfs_binary() {
  for (const char* path : {"/usr/sbin/mkfs.ext4", "/sbin/mkfs.ext4"}) {
    if (access(path, X_OK) == 0) return path;
  }
  return "mkfs.ext4";
}

// Makes each component of `relative` below `root` that is missing, owned by `owner`, mode 0755; its path. Ones
// that exist get the current time when `touch`.
std::string make_owned_dirs(const std::string& root, const std::string& relative, std::uint32_t owner, bool touch) {
  std::string path = root;
  for (std::size_t start = 0; start < relative.size();) {
    std::size_t end = relative.find('/', start);
    if (end == std::string::npos) end = relative.size();
    path += '/';
    path.append(relative, start, end - start);
    if (mkdir(path.c_str(), 0755) != 0) {
      if (errno != EEXIST) throw_errno("disk", path, "mkdir");
      if (touch && utimensat(AT_FDCWD, path.c_str(), nullptr, 0) != 0) throw_errno("disk", path, "utimensat");
    }
    if (chown(path.c_str(), owner, owner) != 0) throw_errno("disk", path, "chown");
    start = end + 1;
  }
  return path;
}

// Runs mkfs.ext4 on the image, copying in `tree` when not empty; its stderr (bounded) becomes the error's detail.
void format(const std::string& image, const DiskLimits& limits, std::uint32_t owner, const std::string& tree) {
  int err[2];
  if (pipe2(err, O_CLOEXEC) != 0) throw_errno("disk", image, "pipe2");
  base::UniqueFd read_end(err[0]);
  base::UniqueFd write_end(err[1]);
  const std::string extended = "nodiscard,lazy_itable_init=1,root_owner=" + std::to_string(owner) + ":" +
                               std::to_string(owner);
  const std::string inodes = std::to_string(limits.inodes);
  // No journal and no resize inode: a sandbox's scratch never outlives a crash and never grows. Inline data:
  // small dirs and files live in their inode, so the work dir overlayfs makes at each mount allocates no block.
  std::vector<std::string> args = {"mkfs.ext4", "-q", "-F", "-O", "^has_journal,^resize_inode,inline_data",
                                   "-E", extended, "-m", "0", "-b", "4096", "-N", inodes};
  if (!tree.empty()) args.insert(args.end(), {"-d", tree});
  args.push_back(image);
  std::vector<char*> argv;
  for (auto& arg : args) argv.push_back(arg.data());
  argv.push_back(nullptr);
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_addopen(&actions, STDIN_FILENO, "/dev/null", O_RDONLY, 0);
  posix_spawn_file_actions_addopen(&actions, STDOUT_FILENO, "/dev/null", O_WRONLY, 0);
  posix_spawn_file_actions_adddup2(&actions, write_end.get(), STDERR_FILENO);
  pid_t pid = -1;
  const int rc = posix_spawnp(&pid, mkfs_binary(), &actions, nullptr, argv.data(), environ);
  posix_spawn_file_actions_destroy(&actions);
  write_end.reset();
  if (rc != 0) {
    errno = rc;
    throw_errno("disk", image, "starting mkfs.ext4 (install e2fsprogs)");
  }
  std::string output;
  char buffer[512];
  for (ssize_t n; (n = read(read_end.get(), buffer, sizeof buffer)) != 0;) {
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) break;
    if (output.size() < 2048) output.append(buffer, static_cast<std::size_t>(n));
  }
  int status = 0;
  while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
    throw_error("disk", image, "mkfs.ext4 failed (status " + std::to_string(status) + "): " + output);
  }
}

// Reads the template's data extents and writes them at the same offsets through `device` (the holes stay holes).
void write_template_data(int template_fd, int device, const std::string& image) {
  constexpr std::size_t kBufferBytes = 256 << 10;
  const std::unique_ptr<char[]> buffer(new char[kBufferBytes]);  // not zeroed: every byte written is read first
  for (off_t data = lseek(template_fd, 0, SEEK_DATA); data >= 0; data = lseek(template_fd, data, SEEK_DATA)) {
    const off_t hole = lseek(template_fd, data, SEEK_HOLE);
    if (hole < 0) throw_errno("disk", image, "SEEK_HOLE in its template");
    while (data < hole) {
      const auto want = static_cast<std::size_t>(std::min<off_t>(hole - data, static_cast<off_t>(kBufferBytes)));
      const ssize_t got = pread(template_fd, buffer.get(), want, data);
      if (got <= 0) throw_errno("disk", image, "read its template");
      for (ssize_t done = 0; done < got;) {
        const ssize_t n = pwrite(device, buffer.get() + done, static_cast<std::size_t>(got - done), data + done);
        if (n <= 0) throw_errno("disk", image, "write the template through the loop device");
        done += n;
      }
      data += got;
    }
  }
  if (errno != ENXIO) throw_errno("disk", image, "SEEK_DATA in its template");
}

// Removes the templates made longest ago while `dir` holds more than kMaxTemplates: each distinct disk limit a
// caller asks for makes one, and they would otherwise stay until capsuled restarts. A removed one that is in use
// stays readable through the descriptors disk_template handed out; the next disk of its limits makes it again.
void remove_oldest_templates(const std::string& dir) {
  std::vector<std::pair<std::filesystem::file_time_type, std::filesystem::path>> made;
  std::error_code ec;
  for (auto it = std::filesystem::directory_iterator(dir, ec); !ec && it != std::filesystem::directory_iterator();
       it.increment(ec)) {
    const std::string name = it->path().filename().string();
    if (!name.ends_with(".img")) continue;  // a template being made (.tmp-<tid>, .tmp-<tid>.d) is its maker's
    std::error_code time_error;
    const auto time = it->last_write_time(time_error);
    if (!time_error) made.emplace_back(time, it->path());
  }
  if (made.size() <= kMaxTemplates) return;
  std::sort(made.begin(), made.end());
  for (std::size_t i = 0; i + kMaxTemplates < made.size(); ++i) std::filesystem::remove(made[i].second, ec);
}

// Attaches `image_fd` to a free loop device that detaches itself once unmounted and no longer open.
std::string attach_loop(int image_fd, const std::string& image, base::UniqueFd& held) {
  base::UniqueFd control(open("/dev/loop-control", O_RDWR | O_CLOEXEC));
  if (!control) throw_errno("disk", "/dev/loop-control", "open");
  for (int attempt = 0; attempt < 32; ++attempt) {
    const int number = ioctl(control.get(), LOOP_CTL_GET_FREE);
    if (number < 0) throw_errno("disk", "/dev/loop-control", "LOOP_CTL_GET_FREE");
    const std::string device = "/dev/loop" + std::to_string(number);
    base::UniqueFd loop(open(device.c_str(), O_RDWR | O_CLOEXEC));
    if (!loop) throw_errno("disk", device, "open");
    loop_config config{};
    config.fd = static_cast<std::uint32_t>(image_fd);
    config.info.lo_flags = LO_FLAGS_AUTOCLEAR;
    // ext4's block size: its mount then does not switch the device's block size from 1 KiB (to read the
    // superblock) to 4 KiB, each switch flushing and dropping the device's page cache (0.8 ms per mount).
    config.block_size = 4096;
    if (ioctl(loop.get(), LOOP_CONFIGURE, &config) == 0) {
      held = std::move(loop);
      return device;
    }
    if (errno != EBUSY) throw_errno("disk", device, "LOOP_CONFIGURE " + image);
    // Another thread or process took this device between GET_FREE and CONFIGURE: ask again.
  }
  throw_error("disk", image, "no free loop device after 32 attempts");
}

// The template's name: what it was made for. The dirs go in as a hash (FNV-1a) of their list.
std::string template_name(const DiskLimits& limits, std::uint32_t owner, const std::vector<std::string>& dirs) {
  std::uint64_t hash = 14695981039346656037ull;
  for (const auto& dir : dirs) {
    for (const char c : dir + '\n') hash = (hash ^ static_cast<unsigned char>(c)) * 1099511628211ull;
  }
  char hex[17];
  std::snprintf(hex, sizeof hex, "%016llx", static_cast<unsigned long long>(hash));
  return "v3-" + std::to_string(disk_image_bytes(limits)) + "-" + std::to_string(limits.inodes) + "-" +
         std::to_string(owner) + "-" + hex + ".img";
}

}  // namespace

// The image is larger than the limit by what ext4 keeps for itself (inode tables, bitmaps, descriptors), so
// the sandbox can use about `bytes`. The tables are never written (lazy init), so they cost no host disk.
std::uint64_t disk_image_bytes(const DiskLimits& limits) {
  return limits.bytes + limits.inodes * kInodeSize + limits.bytes / 64 + (4ull << 20);
}

DiskLimits with_default_inodes(DiskLimits limits) {
  if (limits.inodes == 0) {
    limits.inodes = std::clamp<std::uint64_t>(limits.bytes / kBytesPerDefaultInode, 1024, kMaxDiskInodes);
  }
  return limits;
}

// mkfs.ext4 takes ~30 ms; a formatted image holds well under 1 MiB of data in its holes. So each (limits,
// owner, dirs) is formatted once, as a template beside the sandboxes' dirs, and its data written to each disk.
base::UniqueFd disk_template(const std::string& templates_dir, const DiskLimits& limits, std::uint32_t owner,
                             const std::vector<std::string>& dirs) {
  const std::string path = templates_dir + "/" + template_name(limits, owner, dirs);
  if (base::UniqueFd made{open(path.c_str(), O_RDONLY | O_CLOEXEC)}) return made;
  if (errno != ENOENT) throw_errno("disk", path, "open template");
  if (mkdir(templates_dir.c_str(), 0700) != 0 && errno != EEXIST) throw_errno("disk", templates_dir, "mkdir");
  const std::string temporary = path + ".tmp-" + std::to_string(gettid());
  const std::string tree = dirs.empty() ? std::string() : temporary + ".d";
  base::UniqueFd image(open(temporary.c_str(), O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0600));
  if (!image) throw_errno("disk", temporary, "create template");
  std::error_code ignored;
  try {
    if (ftruncate(image.get(), static_cast<off_t>(disk_image_bytes(limits))) != 0) throw_errno("disk", temporary, "ftruncate");
    if (!tree.empty()) {
      std::filesystem::remove_all(tree, ignored);  // a crashed daemon's, of this thread id
      if (mkdir(tree.c_str(), 0755) != 0 || chown(tree.c_str(), owner, owner) != 0) throw_errno("disk", tree, "mkdir");
      for (const auto& dir : dirs) make_owned_dirs(tree, dir, owner, false);
    }
    format(temporary, limits, owner, tree);
    if (rename(temporary.c_str(), path.c_str()) != 0) throw_errno("disk", path, "rename template");
  } catch (...) {
    unlink(temporary.c_str());
    if (!tree.empty()) std::filesystem::remove_all(tree, ignored);
    throw;
  }
  if (!tree.empty()) std::filesystem::remove_all(tree, ignored);
  remove_oldest_templates(templates_dir);
  return image;  // mkfs.ext4 wrote the file this descriptor has open
}

std::string attach_disk_image(int template_fd, int image_fd, const std::string& image, base::UniqueFd& held) {
  const std::string device = attach_loop(image_fd, image, held);
  write_template_data(template_fd, held.get(), image);
  return device;
}

SandboxDisk::SandboxDisk(const std::string& dir, DiskLimits limits, std::uint32_t owner, const std::string& images_dir,
                         const std::vector<std::string>& dirs)
    : dir_(dir),
      image_(images_dir.empty() ? dir + "/disk.img" : images_dir + "/" + dir.substr(dir.rfind('/') + 1) + ".img"),
      root_(dir + "/disk") {
  if (limits.bytes < kMinDiskBytes || limits.bytes > kMaxDiskBytes) throw_error("disk", dir, "limit outside 16 MiB to 1 PiB");
  limits = with_default_inodes(limits);
  if (limits.inodes < kMinDiskInodes || limits.inodes > kMaxDiskInodes) throw_error("disk", dir, "inode limit outside 64 to 2^32-1");
  if (mkdir(root_.c_str(), 0700) != 0) throw_errno("disk", root_, "mkdir");
  base::UniqueFd image(open(image_.c_str(), O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0600));
  if (!image) throw_errno("disk", image_, "create image");
  try {
    if (ftruncate(image.get(), static_cast<off_t>(disk_image_bytes(limits))) != 0) throw_errno("disk", image_, "ftruncate");
    const std::string templates = images_dir.empty() ? dir.substr(0, dir.rfind('/')) : images_dir;
    base::UniqueFd held;  // closed at the end of this scope: the mount holds the device from then on
    const base::UniqueFd template_fd = disk_template(templates + "/.disk-templates", limits, owner, dirs);
    const std::string device = attach_disk_image(template_fd.get(), image.get(), image_, held);
    image_fd_ = std::move(image);  // for its size at release
    // The loop device holds the image open: unlinked now, its space goes back with the last mount of it,
    // even when capsuled dies without cleaning up.
    unlink(image_.c_str());
    if (mount(device.c_str(), root_.c_str(), "ext4", MS_NOSUID | MS_NODEV | MS_NOATIME,
              "noinit_itable,nobarrier,errors=remount-ro") != 0) {
      throw_errno("disk", root_, "mount " + device);
    }
    root_fd_.reset(open(root_.c_str(), O_PATH | O_DIRECTORY | O_CLOEXEC));
    if (!root_fd_) {
      umount2(root_.c_str(), MNT_DETACH);
      throw_errno("disk", root_, "open");
    }
  } catch (...) {
    unlink(image_.c_str());
    throw;
  }
}

SandboxDisk::~SandboxDisk() {
  for (auto it = binds_.rbegin(); it != binds_.rend(); ++it) umount2(it->c_str(), MNT_DETACH);
  umount2(root_.c_str(), MNT_DETACH);
  rmdir(root_.c_str());  // the mount point it made, empty once detached
  unlink(image_.c_str());
  // The last reference: closing it shuts the filesystem down and returns the image's space (20-70 ms). On a
  // thread of its own while the host filesystem has room; here when it is short, so a caller on a full disk
  // (capsuled's ledger) has the space back before its next write.
  if (!root_fd_) return;
  struct stat image {};
  struct statvfs host {};
  const std::string image_dir = image_.substr(0, image_.rfind('/'));  // the filesystem whose space comes back
  const bool measured = fstat(image_fd_.get(), &image) == 0 && statvfs(image_dir.c_str(), &host) == 0;
  const std::uint64_t in_image = measured ? static_cast<std::uint64_t>(image.st_blocks) * 512 : 0;
  const std::uint64_t free = measured ? static_cast<std::uint64_t>(host.f_bavail) * host.f_frsize : 0;
  image_fd_.reset();
  if (!measured || free < kRoomForAsyncRelease + 2 * in_image) {
    root_fd_.reset();
    return;
  }
  std::thread([fd = root_fd_.release()] { close(fd); }).detach();
}

std::string SandboxDisk::make_dir(const std::string& relative, std::uint32_t owner) const {
  return make_owned_dirs(root_, relative, owner, true);
}

void SandboxDisk::bind_to(const std::string& source, const std::string& target) {
  if (mount(source.c_str(), target.c_str(), nullptr, MS_BIND, nullptr) != 0) {
    throw_errno("disk", target, "bind " + source);
  }
  binds_.push_back(target);
}

std::vector<std::string> mount_points_below(const std::string& dir) {
  std::ifstream mountinfo("/proc/self/mountinfo");
  std::vector<std::string> found;
  for (std::string line; std::getline(mountinfo, line);) {
    std::istringstream fields(line);
    std::string id, parent, device, root, point;
    fields >> id >> parent >> device >> root >> point;
    std::string decoded;  // mountinfo escapes space, tab, newline and backslash as \ooo
    for (std::size_t i = 0; i < point.size(); ++i) {
      if (point[i] == '\\' && i + 3 < point.size()) {
        decoded.push_back(static_cast<char>(std::stoi(point.substr(i + 1, 3), nullptr, 8)));
        i += 3;
      } else {
        decoded.push_back(point[i]);
      }
    }
    if (decoded == dir || decoded.starts_with(dir + "/")) found.push_back(decoded);
  }
  return found;
}

std::size_t detach_mounts_below(const std::string& dir) {
  std::vector<std::string> found = mount_points_below(dir);
  std::sort(found.begin(), found.end(), [](const auto& a, const auto& b) { return a.size() > b.size(); });
  std::size_t detached = 0;
  for (const auto& point : found) detached += umount2(point.c_str(), MNT_DETACH) == 0 ? 1 : 0;
  return detached;
}

std::vector<std::string> loop_devices_below(const std::string& dir) {
  std::vector<std::string> found;
  std::error_code ec;
  for (auto it = std::filesystem::directory_iterator("/sys/block", ec);
       !ec && it != std::filesystem::directory_iterator(); it.increment(ec)) {
    const std::string name = it->path().filename().string();
    if (!name.starts_with("loop")) continue;
    std::ifstream file(it->path() / "loop" / "backing_file");  // absent while the device is unattached
    std::string backing;
    if (!std::getline(file, backing)) continue;
    if (backing == dir || backing.starts_with(dir + "/")) found.push_back("/dev/" + name);
  }
  return found;
}

std::size_t release_loop_devices_below(const std::string& dir) {
  std::size_t released = 0;
  for (const std::string& device : loop_devices_below(dir)) {
    const base::UniqueFd loop(open(device.c_str(), O_RDONLY | O_CLOEXEC));
    if (loop && ioctl(loop.get(), LOOP_CLR_FD, 0) == 0) ++released;
  }
  return released;
}

}  // namespace capsule::sandbox
