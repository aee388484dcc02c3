// Image benchmark: sandbox start-up on a 5-layer OCI image from the store vs. the built-in host image, and
// ImageStore::import_layout throughput vs. `tar -xzf` of the same layers. Prints a table and one JSON line.
#include <archive.h>
#include <archive_entry.h>
#include <fcntl.h>
#include <spawn.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <iterator>
#include <memory>
#include <nlohmann/json.hpp>
#include <numeric>
#include <set>
#include <sstream>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "store/blob_store.h"
#include "images/host_image.h"
#include "images/image_store.h"
#include "images/layer_unpack.h"
#include "images/oci_image.h"
#include "sandbox/launcher.h"

#ifndef CAPSULE_DEFAULT_POLICY
#define CAPSULE_DEFAULT_POLICY "policies/default.json"
#endif

extern char** environ;

namespace {

namespace fs = std::filesystem;
namespace images = capsule::images;
namespace sandbox = capsule::sandbox;
namespace store = capsule::store;
namespace base = capsule::base;
using nlohmann::json;
using Clock = std::chrono::steady_clock;

constexpr const char* kCgroupParent = "capsule-ibench";
constexpr double kMB = 1e6;

struct Options {
  int rounds = 200;
  int warmup = 10;
  int cold_rounds = 5;        // fresh store: import + first run
  int import_rounds = 5;      // throughput rounds per method
  int import_layers = 5;
  int layer_mb = 40;          // file bytes per throughput layer (MB, uncompressed)
  std::string policy = CAPSULE_DEFAULT_POLICY;
  std::string tmp_parent = "/tmp";
  bool keep_tmp = false;
  bool skip_startup = false;
  bool skip_import = false;
};

std::function<void()> g_cleanup;  // removes the temp dir and the cgroup parent; also on die()

[[noreturn]] void die(const std::string& message) {
  std::fprintf(stderr, "image_bench: %s\n", message.c_str());
  if (auto cleanup = std::exchange(g_cleanup, nullptr)) cleanup();
  std::exit(1);
}

double time_ms(const std::function<void()>& fn) {
  const auto start = Clock::now();
  fn();
  return std::chrono::duration<double, std::milli>(Clock::now() - start).count();
}

std::string read_file(const fs::path& path) {
  std::ifstream file(path, std::ios::binary);
  if (!file) die("cannot read " + path.string());
  std::stringstream text;
  text << file.rdbuf();
  return text.str();
}

void write_file(const fs::path& path, const std::string& bytes) {
  std::ofstream file(path, std::ios::binary | std::ios::trunc);
  file << bytes;
  if (!file) die("cannot write " + path.string());
}

std::string load_average() {
  std::ifstream file("/proc/loadavg");
  std::string one, five, fifteen;
  file >> one >> five >> fifteen;
  return one + " " + five + " " + fifteen;
}

// ---- statistics ----

double percentile(std::vector<double> values, double p) {  // nearest rank
  if (values.empty()) return 0;
  std::sort(values.begin(), values.end());
  const auto rank = static_cast<std::size_t>(std::ceil(p / 100.0 * static_cast<double>(values.size())));
  return values[std::clamp<std::size_t>(rank, 1, values.size()) - 1];
}

double mean(const std::vector<double>& values) {
  return values.empty() ? 0 : std::accumulate(values.begin(), values.end(), 0.0) / static_cast<double>(values.size());
}

json summary(const std::vector<double>& values) {
  return {{"p50", percentile(values, 50)}, {"p90", percentile(values, 90)}, {"p99", percentile(values, 99)},
          {"mean", mean(values)}, {"min", values.empty() ? 0 : *std::min_element(values.begin(), values.end())},
          {"n", values.size()}};
}

// ---- writing OCI layers and layouts ----

// Deterministic content: xorshift64* bytes (incompressible) or words from a small vocabulary (like source text).
class Content {
 public:
  std::uint64_t next() {
    state_ ^= state_ >> 12;
    state_ ^= state_ << 25;
    state_ ^= state_ >> 27;
    return state_ * 0x2545F4914F6CDD1Dull;
  }
  std::uint64_t below(std::uint64_t n) { return next() % n; }
  std::string random_bytes(std::size_t size) {
    std::string out(size, '\0');
    for (std::size_t i = 0; i < size; i += 8) {
      const std::uint64_t word = next();
      std::memcpy(out.data() + i, &word, std::min<std::size_t>(8, size - i));
    }
    return out;
  }
  std::string text(std::size_t size) {  // 64 words: gzip gets about 4:1
    static const std::vector<std::string> kWords = [] {
      std::istringstream in(
          "def return self import class if else for while int const auto void static public value result error "
          "config path string vector map std:: 0 1 = == ( ) { } [ ] ; : -> name data size index count buffer layer "
          "image digest blob tar None True False throw try catch new delete assert test java python maven pip "
          "lambda yield");
      return std::vector<std::string>(std::istream_iterator<std::string>(in), std::istream_iterator<std::string>());
    }();
    std::string out;
    out.reserve(size + 16);
    while (out.size() < size) out += kWords[below(kWords.size())] + (below(10) == 0 ? '\n' : ' ');
    out.resize(size);
    return out;
  }

 private:
  std::uint64_t state_ = 0x9E3779B97F4A7C15ull;
};

struct LayerBlob {
  images::Descriptor descriptor;  // the gzip'd blob
  store::Digest diff_id;         // sha256 of the uncompressed tar
  std::uint64_t tar_bytes = 0;
};

// A tar+gzip layer written straight into a layout's blob dir through libarchive, hashed on the way out.
class LayerFile {
 public:
  explicit LayerFile(fs::path temp) : temp_(std::move(temp)) {
    fd_ = open(temp_.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (fd_ < 0) die("create " + temp_.string() + ": " + std::strerror(errno));
    archive_ = archive_write_new();
    check(archive_write_set_format_pax_restricted(archive_), "format");
    check(archive_write_add_filter_gzip(archive_), "gzip");
    check(archive_write_set_bytes_in_last_block(archive_, 1), "block");
    check(archive_write_open(archive_, this, nullptr, &LayerFile::on_write, nullptr), "open");
  }
  ~LayerFile() {
    if (archive_ != nullptr) archive_write_free(archive_);
    if (fd_ >= 0) close(fd_);
  }
  LayerFile(const LayerFile&) = delete;
  LayerFile& operator=(const LayerFile&) = delete;

  void dir(const std::string& path, unsigned mode = 0755) { add(path, AE_IFDIR, mode, "", ""); }
  void file(const std::string& path, const std::string& data, unsigned mode = 0644) {
    add(path, AE_IFREG, mode, data, "");
  }
  void symlink(const std::string& path, const std::string& target) { add(path, AE_IFLNK, 0777, "", target); }
  void whiteout(const std::string& path) { add(path, AE_IFREG, 0644, "", ""); }  // ".wh.NAME", ".wh..wh..opq"

  // Closes the archive and moves the blob to <blobs>/<hex>.
  LayerBlob finish(const fs::path& blobs_dir) {
    check(archive_write_close(archive_), "close");
    archive_write_free(archive_);
    archive_ = nullptr;
    if (fsync(fd_) != 0 || close(fd_) != 0) die("finish " + temp_.string());
    fd_ = -1;
    LayerBlob blob;
    blob.descriptor.media_type = std::string(images::media_type::kOciLayerGzip);
    blob.descriptor.digest = hash_.finish();
    blob.descriptor.size = bytes_;
    const fs::path target = blobs_dir / blob.descriptor.digest.hex();
    fs::rename(temp_, target);
    std::tie(blob.diff_id, blob.tar_bytes) = uncompressed_digest(target);
    return blob;
  }

 private:
  static la_ssize_t on_write(struct archive*, void* self, const void* data, size_t size) {
    auto* layer = static_cast<LayerFile*>(self);
    const char* bytes = static_cast<const char*>(data);
    for (size_t done = 0; done < size;) {
      const ssize_t n = write(layer->fd_, bytes + done, size - done);
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) return -1;
      done += static_cast<size_t>(n);
    }
    layer->hash_.update(data, size);
    layer->bytes_ += size;
    return static_cast<la_ssize_t>(size);
  }

  void check(int status, const char* what) {
    if (status < ARCHIVE_WARN) die(temp_.string() + ": " + what + ": " + archive_error_string(archive_));
  }

  // Parent directories not added yet get an entry (0755) first, as image builders write them.
  void add(const std::string& path, unsigned type, unsigned mode, const std::string& data, const std::string& link) {
    for (auto slash = path.find('/'); slash != std::string::npos; slash = path.find('/', slash + 1)) {
      if (!dirs_.count(path.substr(0, slash))) add(path.substr(0, slash), AE_IFDIR, 0755, "", "");
    }
    if (type == AE_IFDIR && !dirs_.insert(path).second) return;
    struct archive_entry* entry = archive_entry_new();
    archive_entry_set_pathname(entry, path.c_str());
    archive_entry_set_filetype(entry, type);
    archive_entry_set_perm(entry, mode);
    archive_entry_set_uid(entry, 0);
    archive_entry_set_gid(entry, 0);
    archive_entry_set_mtime(entry, 1700000000, 0);
    if (type == AE_IFREG) archive_entry_set_size(entry, static_cast<la_int64_t>(data.size()));
    if (type == AE_IFLNK) archive_entry_set_symlink(entry, link.c_str());
    check(archive_write_header(archive_, entry), "header");
    if (!data.empty() && archive_write_data(archive_, data.data(), data.size()) < 0) check(ARCHIVE_FATAL, "data");
    archive_entry_free(entry);
  }

  static std::pair<store::Digest, std::uint64_t> uncompressed_digest(const fs::path& blob) {
    struct archive* a = archive_read_new();
    archive_read_support_filter_gzip(a);
    archive_read_support_format_raw(a);
    struct archive_entry* entry = nullptr;
    if (archive_read_open_filename(a, blob.c_str(), 1 << 20) != ARCHIVE_OK ||
        archive_read_next_header(a, &entry) != ARCHIVE_OK) {
      die("read back " + blob.string() + ": " + archive_error_string(a));
    }
    store::Sha256 hash;
    std::uint64_t total = 0;
    std::vector<char> buffer(1 << 20);
    for (la_ssize_t n; (n = archive_read_data(a, buffer.data(), buffer.size())) != 0;) {
      if (n < 0) die("read back " + blob.string() + ": " + archive_error_string(a));
      hash.update(buffer.data(), static_cast<std::size_t>(n));
      total += static_cast<std::uint64_t>(n);
    }
    archive_read_free(a);
    return {hash.finish(), total};
  }

  fs::path temp_;
  int fd_ = -1;
  struct archive* archive_ = nullptr;
  store::Sha256 hash_;
  std::uint64_t bytes_ = 0;
  std::set<std::string> dirs_;
};

// Writes an OCI layout at `dir`: one image of `count` layers, each filled by fill(layer, index).
std::vector<LayerBlob> write_layout(const fs::path& dir, int count, const std::function<void(LayerFile&, int)>& fill) {
  const fs::path blobs = dir / "blobs" / "sha256";
  fs::create_directories(blobs);
  write_file(dir / "oci-layout", "{\"imageLayoutVersion\": \"1.0.0\"}");
  auto add_blob = [&](const std::string& bytes, std::string_view media_type) {
    images::Descriptor descriptor;
    descriptor.media_type = std::string(media_type);
    descriptor.digest = store::sha256_of(bytes);
    descriptor.size = bytes.size();
    write_file(blobs / descriptor.digest.hex(), bytes);
    return descriptor;
  };
  std::vector<LayerBlob> layers;
  images::ImageManifest manifest;
  images::ImageConfig config;
  config.os = "linux";
  config.architecture = images::host_platform().architecture;
  config.env = {"PATH=/usr/local/bin:/usr/bin:/bin"};
  for (int i = 0; i < count; ++i) {
    LayerFile layer(blobs / (".layer-" + std::to_string(i) + ".tmp"));
    fill(layer, i);
    layers.push_back(layer.finish(blobs));
    manifest.layers.push_back(layers.back().descriptor);
    config.diff_ids.push_back(layers.back().diff_id);
  }
  manifest.config = add_blob(images::config_json(config, "2024-01-01T00:00:00Z"), images::media_type::kOciConfig);
  const images::Descriptor top = add_blob(images::manifest_json(manifest), images::media_type::kOciManifest);
  write_file(dir / "index.json", images::index_json(images::ImageIndex{{top}}));
  return layers;
}

// ---- the 5-layer image: /bin/sh and its libraries from the host, then four small layers ----

// Host paths the shell needs: the binaries and what `ldd` lists for them.
std::vector<std::string> shell_closure() {
  std::vector<std::string> paths = {"/bin/sh", "/bin/true"};
  FILE* pipe = popen("ldd /bin/sh /bin/true 2>/dev/null", "r");
  if (pipe == nullptr) die("cannot run ldd");
  char line[4096];
  while (std::fgets(line, sizeof line, pipe) != nullptr) {
    std::string text(line);
    const auto arrow = text.find("=> ");
    const auto start = arrow != std::string::npos ? arrow + 3 : text.find_first_not_of(" \t");
    const auto end = text.find(" (", start);
    if (start == std::string::npos || end == std::string::npos || text[start] != '/') continue;
    paths.push_back(text.substr(start, end - start));
  }
  if (pclose(pipe) != 0 || paths.size() < 3) die("ldd /bin/sh /bin/true failed");
  return paths;
}

// Adds a host path to the layer the way it is on the host: each symlink on the way becomes a symlink entry
// and is followed, so no entry's parent goes through a symlink (the unpacker refuses those).
void add_host_path(LayerFile& layer, std::set<std::string>& added, const fs::path& path, int depth = 0) {
  if (depth > 16) die("too many symlinks resolving " + path.string());
  const fs::path normal = path.lexically_normal();
  std::vector<std::string> parts;
  for (const auto& part : normal.relative_path()) parts.push_back(part.string());
  std::string current;
  for (std::size_t i = 0; i < parts.size(); ++i) {
    current += (current.empty() ? "" : "/") + parts[i];
    const std::string host = "/" + current;
    struct stat st;
    if (lstat(host.c_str(), &st) != 0) die("lstat " + host + ": " + std::strerror(errno));
    if (S_ISLNK(st.st_mode)) {
      const fs::path target = fs::read_symlink(host);
      if (added.insert(current).second) layer.symlink(current, target.string());
      fs::path resolved = target.is_absolute() ? target : fs::path(host).parent_path() / target;
      for (std::size_t j = i + 1; j < parts.size(); ++j) resolved /= parts[j];
      add_host_path(layer, added, resolved, depth + 1);
      return;
    }
    if (S_ISDIR(st.st_mode)) {
      if (added.insert(current).second) layer.dir(current, st.st_mode & 07777);
    } else if (S_ISREG(st.st_mode) && i + 1 == parts.size()) {
      if (added.insert(current).second) layer.file(current, read_file(host), st.st_mode & 07777);
    } else {
      die("unexpected file type at " + host);
    }
  }
}

void fill_small_image(LayerFile& layer, int index, Content& content) {
  switch (index) {
    case 0: {  // base: a root skeleton plus the shell closure copied from the host
      std::set<std::string> added;
      for (const char* dir : {"etc", "proc", "sys", "dev", "run", "home", "opt", "var", "usr"}) {
        layer.dir(dir);
        added.insert(dir);
      }
      layer.dir("tmp", 01777);
      layer.dir("root", 0700);
      for (const auto& path : shell_closure()) add_host_path(layer, added, path);
      layer.file("etc/passwd", "root:x:0:0:root:/root:/bin/sh\n");
      layer.file("etc/group", "root:x:0:\n");
      layer.file("etc/hostname", "capsule\n");
      break;
    }
    case 1:  // configuration and an app tree
      layer.file("etc/os-release", "ID=capsule-bench\nVERSION_ID=1\n");
      layer.file("opt/app/old.txt", content.text(8 << 10));
      for (const char* name : {"a", "b", "c"}) {
        layer.file(std::string("opt/app/data/") + name + ".json", content.text(4096));
      }
      layer.file("opt/app/version", "1\n");
      break;
    case 2:  // libraries of the app, an overridden /etc/passwd
      for (int i = 0; i < 6; ++i) layer.file("opt/app/lib/mod" + std::to_string(i) + ".sh", content.text(16 << 10));
      layer.file("opt/app/lib/blob.bin", content.random_bytes(64 << 10));
      layer.file("etc/passwd", "root:x:0:0:root:/root:/bin/sh\napp:x:1000:1000:app:/home/app:/bin/sh\n");
      layer.file("opt/app/version", "2\n");
      break;
    case 3:  // whiteouts: a removed file and an opaque directory
      layer.file("opt/app/.wh.old.txt", "");
      layer.whiteout("opt/app/data/.wh..wh..opq");
      layer.file("opt/app/data/d.json", content.text(4 << 10));
      layer.file("opt/app/lib/mod0.sh", content.text(16 << 10));
      break;
    default:  // top: a script and the final version
      layer.file("usr/local/bin/hello", "#!/bin/sh\necho hello\n", 0755);
      layer.file("etc/motd", "capsule image bench\n");
      layer.file("opt/app/version", "3\n");
      break;
  }
}

// ---- the throughput layer set: mixed small/medium/large files, half random bytes, half text ----

void fill_big_layer(LayerFile& layer, int index, std::uint64_t target_bytes, Content& content) {
  const std::string top = "data" + std::to_string(index);
  layer.dir(top);
  for (int d = 0; d < 16; ++d) layer.dir(top + "/d" + std::to_string(d));
  std::uint64_t random_total = 0, text_total = 0;
  for (int n = 0; random_total + text_total < target_bytes; ++n) {
    const std::uint64_t pick = content.below(100);
    std::size_t size = pick < 85   ? 256 + content.below(16 << 10)                   // small: 256 B - 16 KiB
                       : pick < 97 ? (16 << 10) + content.below(496 << 10)           // medium: 16 - 512 KiB
                                   : (1 << 20) + content.below(3 << 20);             // large: 1 - 4 MiB
    size = static_cast<std::size_t>(std::min<std::uint64_t>(size, target_bytes - random_total - text_total));
    const bool random = random_total < text_total;
    const std::string name = "/d" + std::to_string(n % 16) + "/f" + std::to_string(n) + (random ? ".bin" : ".txt");
    layer.file(top + name, random ? content.random_bytes(size) : content.text(size));
    (random ? random_total : text_total) += size;
  }
}

// ---- processes ----

std::string find_program(const std::string& name) {
  for (const char* dir : {"/usr/bin", "/bin", "/usr/local/bin"}) {
    const std::string candidate = std::string(dir) + "/" + name;
    if (access(candidate.c_str(), X_OK) == 0) return candidate;
  }
  die(name + " not found");
}

void run_program(const std::vector<std::string>& argv) {
  std::vector<char*> args;
  for (const auto& arg : argv) args.push_back(const_cast<char*>(arg.c_str()));
  args.push_back(nullptr);
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_addopen(&actions, 0, "/dev/null", O_RDONLY, 0);
  posix_spawn_file_actions_addopen(&actions, 1, "/dev/null", O_WRONLY, 0);
  pid_t pid = -1;
  const int rc = posix_spawn(&pid, args[0], &actions, nullptr, args.data(), environ);
  posix_spawn_file_actions_destroy(&actions);
  if (rc != 0) die(argv[0] + ": posix_spawn: " + std::strerror(rc));
  int status = 0;
  while (waitpid(pid, &status, 0) < 0) {
    if (errno != EINTR) die(argv[0] + ": waitpid: " + std::strerror(errno));
  }
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) die(argv[0] + " " + argv[1] + " " + argv[2] + " failed");
}

void remove_tree(const fs::path& path) {
  std::error_code ignored;
  fs::remove_all(path, ignored);
}

// ---- part 1: start-up on the 5-layer image vs. the host image ----

void print_row(const char* name, const std::vector<double>& v) {
  std::printf("%-16s %9.3f %9.3f %9.3f %9.3f %9.3f\n", name, percentile(v, 50), percentile(v, 90), percentile(v, 99),
              mean(v), *std::min_element(v.begin(), v.end()));
}

json startup_bench(const Options& options, const fs::path& tmp, const std::string& profile,
                   sandbox::Launcher& launcher) {
  Content content;
  const fs::path layout = tmp / "layout-5";
  std::vector<LayerBlob> blobs;
  const double build_ms = time_ms([&] {
    blobs = write_layout(layout, 5, [&](LayerFile& layer, int i) { fill_small_image(layer, i, content); });
  });
  std::uint64_t compressed = 0, uncompressed = 0;
  for (const auto& blob : blobs) {
    compressed += blob.descriptor.size;
    uncompressed += blob.tar_bytes;
  }

  images::ImageStore store(tmp / "store");
  const double import_ms = time_ms([&] { store.import_layout(layout, "bench/five:1"); });
  const images::ImageInfo info = store.inspect("bench/five:1");
  const images::HostImage host = images::prepare_host_image((tmp / "host-image").string());

  sandbox::SandboxSpec layered;
  layered.argv = {"/bin/sh", "-c", "true"};
  layered.env = info.config.env;
  layered.rootfs_layers = info.layer_dirs;
  layered.seccomp_profile = profile;
  layered.limits.wall_time = std::chrono::seconds(30);
  layered.limits.memory_bytes = 256ull << 20;
  layered.limits.pids = 64;
  sandbox::SandboxSpec host_spec = layered;
  host_spec.env = host.env;
  host_spec.rootfs_layers = host.layers;
  host_spec.mounts = host.mounts;

  sandbox::Result last;
  auto run = [&](const sandbox::SandboxSpec& spec, const char* what) {
    last = launcher.run(spec);
    if (last.status != sandbox::Status::kSucceeded || last.exit_code != 0) {
      die(std::string(what) + " run failed: " + sandbox::status_name(last.status) + ": " + last.reason + " " +
          last.stderr_capture.head);
    }
  };
  // Once, untimed: the layers stack as intended (whiteout, opaque dir, topmost version wins).
  sandbox::SandboxSpec check = layered;
  check.argv = {"/bin/sh", "-c",
                "test ! -e /opt/app/old.txt && test ! -e /opt/app/data/a.json && test -e /opt/app/data/d.json && "
                "read v < /opt/app/version && test \"$v\" = 3"};
  run(check, "5-layer stacking check");

  std::printf("5-layer image: %zu layers, %.1f KB compressed, %.1f KB uncompressed, built in %.0f ms; "
              "import_layout %.1f ms\n", blobs.size(), static_cast<double>(compressed) / 1e3,
              static_cast<double>(uncompressed) / 1e3, build_ms, import_ms);

  // Import into a fresh store, then its first and second sandbox; the page cache is not dropped.
  std::vector<double> cold_import, cold_first, cold_second;
  for (int k = 0; k < options.cold_rounds; ++k) {
    const fs::path root = tmp / "cold-store";
    images::ImageStore fresh(root);
    sync();
    cold_import.push_back(time_ms([&] { fresh.import_layout(layout, "bench/five:1"); }));
    sandbox::SandboxSpec spec = layered;
    spec.rootfs_layers = fresh.inspect("bench/five:1").layer_dirs;
    cold_first.push_back(time_ms([&] { run(spec, "first 5-layer"); }));
    cold_second.push_back(time_ms([&] { run(spec, "second 5-layer"); }));
    remove_tree(root);
  }

  // The third variant isolates the layer count: the same sandbox on the base layer alone (it has /bin/sh).
  sandbox::SandboxSpec base_only = layered;
  base_only.rootfs_layers = {info.layer_dirs.back()};
  struct Variant {
    const char* name;
    const sandbox::SandboxSpec* spec;
    std::vector<double> wall, after_exec, teardown;  // measured; Result.wall_ms - setup; measured - Result.wall_ms
    std::vector<sandbox::SetupTimings> setups;
  };
  Variant variants[] = {{"5-layer (store)", &layered, {}, {}, {}, {}},
                        {"host (built-in)", &host_spec, {}, {}, {}, {}},
                        {"base layer only", &base_only, {}, {}, {}, {}}};
  const int count = static_cast<int>(std::size(variants));
  std::printf("start-up: /bin/sh -c true, %d rounds + %d warm-up, round-robin, order rotated per round\n",
              options.rounds, options.warmup);
  std::printf("load average before: %s\n", load_average().c_str());
  std::fflush(stdout);
  for (int round = 0; round < options.warmup + options.rounds; ++round) {
    for (int k = 0; k < count; ++k) {
      Variant& v = variants[(round + k) % count];
      const double ms = time_ms([&] { run(*v.spec, v.name); });
      if (round < options.warmup) continue;
      v.wall.push_back(ms);
      v.setups.push_back(last.setup);
      v.after_exec.push_back(last.wall_ms - last.setup.total_ms);
      v.teardown.push_back(ms - last.wall_ms);
    }
  }
  std::printf("load average after:  %s\n\n", load_average().c_str());

  std::printf("%-16s %9s %9s %9s %9s %9s   (wall ms per launch, spawn to reaped)\n", "image", "p50", "p90", "p99",
              "mean", "min");
  for (const Variant& v : variants) print_row(v.name, v.wall);
  const double ratio50 = percentile(variants[0].wall, 50) / percentile(variants[1].wall, 50);
  const double ratio99 = percentile(variants[0].wall, 99) / percentile(variants[1].wall, 99);
  const double layers50 = percentile(variants[0].wall, 50) / percentile(variants[2].wall, 50);
  std::printf("ratio 5-layer/host: p50 %.3f, p99 %.3f; 5-layer/base layer only: p50 %.3f\n", ratio50, ratio99,
              layers50);

  json variants_json;
  std::printf("\nbreakdown (p50 ms):  prepare   clone    maps  mounts seccomp    exec   setup  to-reaped  teardown\n");
  for (const Variant& v : variants) {
    auto step = [&](double sandbox::SetupTimings::*member) {
      std::vector<double> values;
      for (const auto& setup : v.setups) values.push_back(setup.*member);
      return percentile(values, 50);
    };
    using T = sandbox::SetupTimings;
    std::printf("  %-16s %8.3f %7.3f %7.3f %7.3f %7.3f %7.3f %7.3f %10.3f %9.3f\n", v.name, step(&T::prepare_ms),
                step(&T::clone_ms), step(&T::maps_ms), step(&T::mounts_ms), step(&T::seccomp_ms), step(&T::exec_ms),
                step(&T::total_ms), percentile(v.after_exec, 50), percentile(v.teardown, 50));
    variants_json[v.name] = {
        {"wall_ms", summary(v.wall)},
        {"p50_ms", {{"prepare", step(&T::prepare_ms)}, {"clone", step(&T::clone_ms)}, {"maps", step(&T::maps_ms)},
                    {"mounts", step(&T::mounts_ms)}, {"seccomp", step(&T::seccomp_ms)}, {"exec", step(&T::exec_ms)},
                    {"setup", step(&T::total_ms)}, {"exec_to_reaped", percentile(v.after_exec, 50)},
                    {"teardown", percentile(v.teardown, 50)}}}};
  }
  std::printf("\nfresh store, %d rounds (p50 ms): import_layout %.2f, first run %.2f, second run %.2f, "
              "import + first run %.2f\n\n", options.cold_rounds, percentile(cold_import, 50),
              percentile(cold_first, 50), percentile(cold_second, 50),
              percentile(cold_import, 50) + percentile(cold_first, 50));
  return {{"layers", blobs.size()}, {"compressed_bytes", compressed}, {"uncompressed_bytes", uncompressed},
          {"variants", variants_json}, {"ratio_p50", ratio50}, {"ratio_p99", ratio99},
          {"ratio_p50_vs_base_layer_only", layers50},
          {"fresh_store", {{"import_ms", summary(cold_import)}, {"first_run_ms", summary(cold_first)},
                           {"second_run_ms", summary(cold_second)}}}};
}

// ---- part 2: import throughput vs. tar -xzf ----

json import_bench(const Options& options, const fs::path& tmp) {
  Content content;
  const fs::path layout = tmp / "layout-big";
  const std::uint64_t target = static_cast<std::uint64_t>(options.layer_mb) * 1'000'000ull;
  std::vector<LayerBlob> blobs;
  const double build_ms = time_ms([&] {
    blobs = write_layout(layout, options.import_layers,
                         [&](LayerFile& layer, int i) { fill_big_layer(layer, i, target, content); });
  });
  std::uint64_t compressed = 0, uncompressed = 0;
  for (const auto& blob : blobs) {
    compressed += blob.descriptor.size;
    uncompressed += blob.tar_bytes;
  }
  std::printf("import: %zu gzip layers, %.1f MB compressed, %.1f MB uncompressed tar (file data ~50%% random, "
              "~50%% text), generated in %.1f s\n", blobs.size(), static_cast<double>(compressed) / kMB,
              static_cast<double>(uncompressed) / kMB, build_ms / 1e3);

  const std::string tar = find_program("tar");
  const fs::path out = tmp / "import-out";
  struct Method {
    const char* name;
    std::function<void()> once;  // writes below `out`
    std::vector<double> ms, sync_ms;
  };
  std::vector<Method> methods;
  methods.push_back({"import_layout", [&] { images::ImageStore(out).import_layout(layout, "bench/big:1"); }, {}, {}});
  methods.push_back({"unpack_layer", [&] {
                       fs::create_directories(out);
                       for (std::size_t i = 0; i < blobs.size(); ++i) {
                         images::unpack_layer(layout / "blobs/sha256" / blobs[i].descriptor.digest.hex(),
                                              out / std::to_string(i), {}, blobs[i].diff_id);
                       }
                     }, {}, {}});
  methods.push_back({"tar -xzf", [&] {
                       for (std::size_t i = 0; i < blobs.size(); ++i) {
                         const fs::path dir = out / std::to_string(i);
                         fs::create_directories(dir);
                         const fs::path blob = layout / "blobs/sha256" / blobs[i].descriptor.digest.hex();
                         run_program({tar, "-xzf", blob.string(), "-C", dir.string()});
                       }
                     }, {}, {}});
  // The other half of import_layout: blobs copied into a BlobStore, hashed and verified, fdatasync'd.
  methods.push_back({"blobs only", [&] {
                       store::BlobStore store(out);
                       for (const auto& blob : blobs) {
                         store.put_file(layout / "blobs/sha256" / blob.descriptor.digest.hex(),
                                        blob.descriptor.digest, blob.descriptor.size);
                       }
                     }, {}, {}});
  std::printf("%d rounds per method, order rotated per round; sync() before each, timed sync() after\n",
              options.import_rounds);
  std::printf("load average before: %s\n", load_average().c_str());
  std::fflush(stdout);
  for (int round = 0; round < options.import_rounds; ++round) {
    for (std::size_t k = 0; k < methods.size(); ++k) {
      Method& method = methods[(static_cast<std::size_t>(round) + k) % methods.size()];
      remove_tree(out);
      sync();
      method.ms.push_back(time_ms(method.once));
      method.sync_ms.push_back(time_ms([] { sync(); }));
      remove_tree(out);
    }
  }
  std::printf("load average after:  %s\n\n", load_average().c_str());

  const double mb = static_cast<double>(uncompressed) / kMB, gz_mb = static_cast<double>(compressed) / kMB;
  std::printf("%-14s %8s %11s %8s %10s %15s %8s   (p50 of %d; tar: uncompressed, gz: blob bytes)\n", "method", "s",
              "sync after", "+sync s", "tar MB/s", "tar MB/s +sync", "gz MB/s", options.import_rounds);
  json methods_json;
  for (const Method& m : methods) {
    std::vector<double> with_sync;
    for (std::size_t i = 0; i < m.ms.size(); ++i) with_sync.push_back(m.ms[i] + m.sync_ms[i]);
    const double s = percentile(m.ms, 50) / 1e3, synced = percentile(with_sync, 50) / 1e3;
    std::printf("%-14s %8.2f %10.2fs %8.2f %10.1f %15.1f %8.1f\n", m.name, s, percentile(m.sync_ms, 50) / 1e3, synced,
                mb / s, mb / synced, gz_mb / s);
    methods_json[m.name] = {{"ms", summary(m.ms)}, {"sync_after_ms", summary(m.sync_ms)}, {"mb_per_s", mb / s},
                            {"mb_per_s_with_sync", mb / synced}, {"gz_mb_per_s", gz_mb / s}};
  }
  auto p50 = [&](std::size_t i) { return percentile(methods[i].ms, 50); };
  auto p50_synced = [&](std::size_t i) { return percentile(methods[i].ms, 50) + percentile(methods[i].sync_ms, 50); };
  const double ratio = p50(2) / p50(0), ratio_synced = p50_synced(2) / p50_synced(0);
  std::printf("throughput ratio import_layout / tar -xzf: %.3f (with the following sync counted: %.3f); "
              "unpack_layer / tar -xzf: %.3f\n\n", ratio, ratio_synced, p50(2) / p50(1));
  return {{"layers", blobs.size()}, {"compressed_bytes", compressed}, {"uncompressed_bytes", uncompressed},
          {"methods", methods_json}, {"throughput_ratio_import_vs_tar", ratio},
          {"throughput_ratio_import_vs_tar_with_sync", ratio_synced},
          {"throughput_ratio_unpack_vs_tar", p50(2) / p50(1)}};
}

}  // namespace

int main(int argc, char** argv) {
  Options options;
  CLI::App app{"image_bench: sandbox start-up on a 5-layer store image vs. the host image, and image import "
               "throughput vs. tar -xzf"};
  app.add_option("--rounds", options.rounds, "measured start-up rounds (each runs every variant)")
      ->check(CLI::PositiveNumber);
  app.add_option("--warmup", options.warmup, "unmeasured start-up rounds first")->check(CLI::NonNegativeNumber);
  app.add_option("--cold-rounds", options.cold_rounds, "imports into a fresh store followed by a first run")
      ->check(CLI::PositiveNumber);
  app.add_option("--import-rounds", options.import_rounds, "throughput rounds per method")->check(CLI::PositiveNumber);
  app.add_option("--import-layers", options.import_layers, "layers in the throughput image")
      ->check(CLI::PositiveNumber);
  app.add_option("--layer-mb", options.layer_mb, "file data per throughput layer, MB")->check(CLI::PositiveNumber);
  app.add_option("--policy", options.policy, "seccomp profile")->check(CLI::ExistingFile);
  app.add_option("--tmp-parent", options.tmp_parent, "where the temp dir goes (its file system matters)")
      ->check(CLI::ExistingDirectory);
  app.add_flag("--keep-tmp", options.keep_tmp, "keep the temp dir");
  app.add_flag("--skip-startup", options.skip_startup, "only the import throughput part");
  app.add_flag("--skip-import", options.skip_import, "only the start-up part");
  CLI11_PARSE(app, argc, argv);

  std::string pattern = (fs::path(options.tmp_parent) / "capsule-ibench-XXXXXX").string();
  if (mkdtemp(pattern.data()) == nullptr) die("mkdtemp in " + options.tmp_parent + ": " + std::strerror(errno));
  const fs::path tmp = pattern;
  chmod(tmp.c_str(), 0755);  // the sandbox's root id must reach the scratch dir below it
  std::unique_ptr<sandbox::Launcher> launcher;
  g_cleanup = [&] {
    if (launcher) {
      try {
        launcher->remove_cgroup_parent();
      } catch (const std::exception& e) {
        std::fprintf(stderr, "image_bench: removing cgroup parent: %s\n", e.what());
      }
    }
    if (!options.keep_tmp) remove_tree(tmp);
  };

  json result = {{"bench", "image_bench"}};
  try {
    std::printf("image_bench: temp dir %s, seccomp profile %s\n", tmp.c_str(), options.policy.c_str());
    if (!options.skip_startup) {
      const std::string profile = read_file(options.policy);
      sandbox::LauncherOptions launcher_options;
      launcher_options.scratch_dir = (tmp / "scratch").string();
      launcher_options.cgroup.parent = kCgroupParent;
      launcher = std::make_unique<sandbox::Launcher>(std::move(launcher_options));
      std::printf("launcher: cgroup v%d parent %s, memory 256 MiB, pids 64, wall 30 s\n\n", launcher->cgroup_version(),
                  kCgroupParent);
      result["startup"] = startup_bench(options, tmp, profile, *launcher);
    }
    if (!options.skip_import) result["import"] = import_bench(options, tmp);
  } catch (const std::exception& e) {
    die(std::string("failed: ") + e.what());
  }
  std::printf("%s\n", result.dump().c_str());
  if (auto cleanup = std::exchange(g_cleanup, nullptr)) cleanup();
  return 0;
}
