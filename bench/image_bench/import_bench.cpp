// image_bench's import part (see import_bench.h): each method writes into an emptied directory with sync()
// before it, in an order rotated per round; MB/s are reported both with and without the following sync.
#include "image_bench/import_bench.h"

#include <unistd.h>

#include <cstdio>
#include <functional>
#include <string>
#include <vector>

#include "image_bench/content.h"
#include "image_bench/layout_writer.h"
#include "image_bench/summary.h"
#include "image_bench/test_layers.h"
#include "images/image_store.h"
#include "images/layer_unpack.h"
#include "store/blob_store.h"
#include "support/files.h"
#include "support/spawn.h"
#include "support/stats.h"

namespace capsule::bench::image_bench {

namespace fs = std::filesystem;
using nlohmann::json;

namespace {
constexpr double kMB = 1e6;
}  // namespace

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
  const std::vector<std::string> environment = current_environment();
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
                         Spawner({tar, "-xzf", blob.string(), "-C", dir.string()}, environment).run();
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

}  // namespace capsule::bench::image_bench
