// The contents of image_bench's test images (see test_layers.h). The base layer copies /bin/sh and what ldd
// lists for it from the host, keeping symlinks as symlinks so the unpacker sees the layout a real image has.
#include "image_bench/test_layers.h"

#include <sys/stat.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <set>
#include <string>
#include <vector>

#include "support/fail.h"
#include "support/files.h"

namespace capsule::bench::image_bench {

namespace fs = std::filesystem;

namespace {

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

}  // namespace

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

}  // namespace capsule::bench::image_bench
