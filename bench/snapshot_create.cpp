// snapshot_create: making a snapshot of a 50k-file tree (capsuled's path: tar as the caller, then the store's
// check, unpack, canonical pack into a blob and unpack of the overlay lower) vs. `tar -c` of the same tree.
#include <fcntl.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <string>
#include <vector>

#include "daemon/snapshots/snapshot_sources.h"
#include "daemon/snapshots/snapshot_store.h"
#include "support/fail.h"
#include "support/files.h"
#include "support/spawn.h"
#include "support/stats.h"

namespace fs = std::filesystem;
using namespace capsule::bench;
using capsule::daemon::SnapshotStore;

namespace {

struct Options {
  std::size_t files = 50000;
  int rounds = 3;
  std::string dir = "/tmp";  // where the tree, the baseline tar and the store go (one filesystem)
};

Options parse_options(int argc, char** argv) {
  Options options;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    if (arg == "--files" && i + 1 < argc) options.files = std::stoul(argv[++i]);
    else if (arg == "--rounds" && i + 1 < argc) options.rounds = std::stoi(argv[++i]);
    else if (arg == "--dir" && i + 1 < argc) options.dir = argv[++i];
    else die("usage: snapshot_create [--files N] [--rounds N] [--dir DIR (default /tmp)]");
  }
  return options;
}

// `files` files of 100 to 4000 bytes, 100 to a directory, a symlink and an executable in each directory.
void make_tree(const fs::path& root, std::size_t files) {
  std::uint64_t state = 88172645463325252ull;
  std::string buffer;
  for (std::size_t i = 0; i < files; ++i) {
    const fs::path dir = root / ("d" + std::to_string(i / 100));
    if (i % 100 == 0) {
      fs::create_directories(dir);
      fs::create_symlink("f0", dir / "link");
    }
    state ^= state << 13;
    state ^= state >> 7;
    state ^= state << 17;
    buffer.assign(100 + state % 3900, static_cast<char>('a' + state % 26));
    const fs::path file = dir / ("f" + std::to_string(i % 100));
    const int fd = open(file.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, i % 100 == 1 ? 0755 : 0644);
    if (fd < 0 || write(fd, buffer.data(), buffer.size()) != static_cast<ssize_t>(buffer.size())) die("writing " + file.string());
    close(fd);
  }
}

}  // namespace

int main(int argc, char** argv) {
  set_program_name("snapshot_create");
  const Options options = parse_options(argc, argv);
  std::string pattern = options.dir + "/capsule-snapshot-bench-XXXXXX";
  if (mkdtemp(pattern.data()) == nullptr) die("mkdtemp in " + options.dir + " failed");
  const fs::path tmp = pattern;
  set_cleanup([tmp] { remove_tree(tmp); });
  const fs::path tree = tmp / "tree";
  make_tree(tree, options.files);
  std::printf("snapshot_create: %zu files in %s, %d rounds, load %s\n", options.files, options.dir.c_str(), options.rounds,
              load_average().c_str());

  const Spawner tar({find_program("tar"), "-cf", (tmp / "baseline.tar").string(), "-C", tree.string(), "."},
                    current_environment());
  std::vector<double> tar_ms, snapshot_ms;
  std::string digest;
  for (int round = 0; round < options.rounds; ++round) {
    tar_ms.push_back(time_ms([&] { tar.run(); }));
    fs::remove(tmp / "baseline.tar");
    remove_tree(tmp / "store");
    try {
      SnapshotStore store(tmp / "store");
      snapshot_ms.push_back(time_ms([&] {
        const fs::path staging = store.make_staging();
        const capsule::daemon::SnapshotSourceRequest request{capsule::daemon::SnapshotSourceRequest::Kind::kDir,
                                                             tree.string(), ""};
        const auto prepared =
            capsule::daemon::prepare_snapshot_source(request, capsule::daemon::root_caller(), staging, store.limits());
        const std::string made = store.create(prepared.tar, prepared.description, 0).digest;
        if (!digest.empty() && made != digest) die("the digest changed between rounds: " + digest + " / " + made);
        digest = made;
        remove_tree(staging);
      }));
    } catch (const std::exception& e) {
      die(std::string("snapshot failed: ") + e.what());
    }
  }
  const double tar_median = median(tar_ms);
  const double snapshot_median = median(snapshot_ms);
  std::printf("  tar -c (baseline)    median %8.1f ms\n", tar_median);
  std::printf("  snapshot create      median %8.1f ms   %s\n", snapshot_median, digest.c_str());
  std::printf("  ratio snapshot / tar: %.2fx\n", snapshot_median / tar_median);
  remove_tree(tmp);
  return 0;
}
