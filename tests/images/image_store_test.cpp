// ImageStore behaviour: OCI layout / oci-archive / rootfs imports, verification failures leaving nothing,
// idempotence, deterministic packing, save round trips, refs, gc and concurrent importers.
#include <gtest/gtest.h>

#include <sys/stat.h>
#include <sys/wait.h>
#include <sys/xattr.h>
#include <unistd.h>

#include <atomic>
#include <thread>

#include "images/error.h"
#include "images/image_store.h"
#include "tests/images/fixtures.h"

namespace capsule::images {
namespace {

namespace fs = std::filesystem;
using testing::count_entries;
using testing::LayoutBuilder;
using testing::TarEntry;
using testing::TempDir;

void expect_store_empty(const fs::path& root) {
  EXPECT_EQ(count_entries(root / "blobs/sha256"), 0u) << "blobs left behind";
  EXPECT_EQ(count_entries(root / "layers"), 0u) << "layers left behind";
  EXPECT_EQ(count_entries(root / "tmp"), 0u) << "staging left behind";
  if (fs::exists(root / "refs.json")) {
    EXPECT_EQ(testing::read_file(root / "refs.json").find("sha256:"), std::string::npos) << "a ref was written";
  }
}

struct stat lstat_of(const fs::path& path) {
  struct stat st {};
  EXPECT_EQ(lstat(path.c_str(), &st), 0) << path;
  return st;
}

TEST(ImageStore, ImportsAMultiLayerLayout) {
  TempDir tmp;
  LayoutBuilder layout(tmp / "layout");
  ImageConfig config;
  config.env = {"PATH=/usr/bin:/bin", "JAVA_HOME=/usr/lib/jvm/java-17"};
  config.working_dir = "/workspace";
  config.user = "1000";
  config.labels = {{"capsule.toolchain.jdk", "17"}};
  const Descriptor manifest = layout.add_image(testing::three_layers(), config);
  layout.write_index({manifest});

  ImageStore store(tmp / "store");
  const store::Digest digest = store.import_layout(layout.dir(), "toolchains/jdk:17");
  EXPECT_EQ(digest, manifest.digest);

  const ImageInfo info = store.inspect("toolchains/jdk:17");
  EXPECT_EQ(info.manifest_digest, digest);
  EXPECT_EQ(info.refs, std::vector<std::string>{"toolchains/jdk:17"});
  EXPECT_EQ(info.config.env, config.env);
  EXPECT_EQ(info.config.working_dir, "/workspace");
  EXPECT_EQ(info.config.user, "1000");
  EXPECT_EQ(info.config.labels.at("capsule.toolchain.jdk"), "17");
  ASSERT_EQ(info.layer_digests.size(), 3u);
  ASSERT_EQ(info.layer_dirs.size(), 3u);
  EXPECT_GT(info.size, 0u);
  for (std::size_t i = 0; i < 3; ++i) {
    EXPECT_EQ(info.layer_dirs[i], (tmp / "store/layers" / info.config.diff_ids[2 - i].hex()).string());
  }
  const fs::path top = info.layer_dirs[0], middle = info.layer_dirs[1], base = info.layer_dirs[2];
  EXPECT_TRUE(fs::exists(top / "data/added"));
  EXPECT_EQ(testing::read_file(base / "data/kept"), "base");
  EXPECT_TRUE(S_ISCHR(lstat_of(middle / "data/gone").st_mode));  // the whiteout
  char value[8] = {};
  EXPECT_EQ(getxattr((middle / "data/dir").c_str(), "trusted.overlay.opaque", value, sizeof value), 1);
  EXPECT_EQ(value[0], 'y');
  // Ownership is kept numerically.
  EXPECT_EQ(lstat_of(base / "data/root-owned").st_uid, 0u);
  EXPECT_EQ(lstat_of(base / "data/user-owned").st_uid, 1000u);
  EXPECT_EQ(lstat_of(base / "data/user-owned").st_gid, 1000u);
  // By digest and by name@digest.
  EXPECT_EQ(store.resolve(digest.str()), digest);
  EXPECT_EQ(store.resolve("whatever@" + digest.str()), digest);
  EXPECT_EQ(store.inspect(digest.str()).layer_dirs, info.layer_dirs);
  EXPECT_THROW(store.resolve("toolchains/jdk:18"), ImageError);
  EXPECT_THROW(store.resolve(info.layer_digests[0].str()), ImageError);  // a blob, but not a manifest
}

TEST(ImageStore, TamperedBlobFailsAndLeavesNothing) {
  TempDir tmp;
  LayoutBuilder layout(tmp / "layout");
  const Descriptor manifest = layout.add_image(testing::three_layers());
  layout.write_index({manifest});
  ImageStore store(tmp / "store");

  // Flip one byte of the middle layer blob.
  const ImageManifest parsed = parse_manifest(testing::read_file(layout.blob_path(manifest.digest)), "m");
  const fs::path victim = layout.blob_path(parsed.layers[1].digest);
  std::string bytes = testing::read_file(victim);
  bytes[bytes.size() / 2] ^= 0x55;
  testing::write_file(victim, bytes);
  try {
    store.import_layout(layout.dir(), "tampered:1");
    FAIL() << "tampered blob accepted";
  } catch (const base::Error& e) {
    EXPECT_NE(std::string(e.what()).find("tampered or corrupt"), std::string::npos) << e.what();
  }
  expect_store_empty(store.root());
  EXPECT_THROW(store.resolve("tampered:1"), ImageError);
}

TEST(ImageStore, LayerNotMatchingItsDiffIdFailsAndLeavesNothing) {
  TempDir tmp;
  LayoutBuilder layout(tmp / "layout");
  // A config claiming another layer's diff_id: would poison layers/<diff_id> shared with other images.
  ImageManifest manifest;
  manifest.layers.push_back(layout.add_blob(testing::make_tar({{.path = "evil", .data = "x"}}),
                                            std::string(media_type::kOciLayerGzip)));
  ImageConfig config;
  config.diff_ids = {store::sha256_of("the diff_id of some popular base layer")};
  manifest.config = layout.add_blob(config_json(config, "2024-01-01T00:00:00Z"), std::string(media_type::kOciConfig));
  layout.write_index({layout.add_blob(manifest_json(manifest), std::string(media_type::kOciManifest))});
  ImageStore store(tmp / "store");
  EXPECT_THROW(store.import_layout(layout.dir(), "liar:1"), ImageError);
  expect_store_empty(store.root());
}

TEST(ImageStore, HostileLayerFailsAndLeavesNothing) {
  TempDir tmp;
  LayoutBuilder layout(tmp / "layout");
  layout.write_index({layout.add_image({{{.path = "ok", .data = "x"}},
                                        {{.path = "link", .type = 'l', .link = "/etc"}, {.path = "link/cron.d/job", .data = "x"}}})});
  ImageStore store(tmp / "store");
  EXPECT_THROW(store.import_layout(layout.dir(), "hostile:1"), ImageError);
  expect_store_empty(store.root());
  EXPECT_FALSE(fs::exists("/etc/cron.d/job"));
}

TEST(ImageStore, ReimportIsANoOpAndLayersAreShared) {
  TempDir tmp;
  LayoutBuilder layout(tmp / "layout");
  const auto layers = testing::three_layers();
  const Descriptor first = layout.add_image(layers);
  const Descriptor second = layout.add_image({layers[0], {{.path = "other", .data = "other"}}});
  layout.write_index({first});
  ImageStore store(tmp / "store");
  const store::Digest digest = store.import_layout(layout.dir(), "img:1");
  const ImageInfo info = store.inspect("img:1");
  const ino_t layer_inode = lstat_of(info.layer_dirs[0]).st_ino;
  const std::size_t blobs = count_entries(store.root() / "blobs/sha256");
  EXPECT_EQ(store.import_layout(layout.dir(), "img:1"), digest);
  EXPECT_EQ(lstat_of(info.layer_dirs[0]).st_ino, layer_inode);  // not unpacked again
  EXPECT_EQ(count_entries(store.root() / "blobs/sha256"), blobs);
  EXPECT_EQ(count_entries(store.root() / "layers"), 3u);
  EXPECT_EQ(count_entries(store.root() / "tmp"), 0u);

  layout.write_index({second});
  store.import_layout(layout.dir(), "img:2");
  EXPECT_EQ(count_entries(store.root() / "layers"), 4u);  // the base layer is shared
  EXPECT_EQ(store.inspect("img:2").layer_dirs.back(), info.layer_dirs.back());
}

TEST(ImageStore, ImportsDockerV2MediaTypes) {
  TempDir tmp;
  LayoutBuilder layout(tmp / "layout");
  ImageManifest manifest;
  const std::string layer = testing::make_tar({{.path = "docker", .data = "v2"}});
  manifest.layers.push_back(layout.add_blob(layer, std::string(media_type::kDockerLayerGzip)));
  ImageConfig config;
  config.os = "linux";
  config.architecture = host_platform().architecture;
  config.diff_ids = {store::sha256_of(testing::gunzip_or_same(layer))};
  manifest.config = layout.add_blob(config_json(config, "2024-01-01T00:00:00Z"), std::string(media_type::kDockerConfig));
  std::string text = manifest_json(manifest);
  text.replace(text.find(media_type::kOciManifest), media_type::kOciManifest.size(), media_type::kDockerManifest);
  const Descriptor descriptor = layout.add_blob(text, std::string(media_type::kDockerManifest));
  layout.write_index({descriptor});
  ImageStore store(tmp / "store");
  EXPECT_EQ(store.import_layout(layout.dir(), "docker:v2"), descriptor.digest);
  EXPECT_EQ(testing::read_file(fs::path(store.inspect("docker:v2").layer_dirs.at(0)) / "docker"), "v2");
  // Saved with its own (Docker) manifest media type and the same digest.
  store.save("docker:v2", tmp / "out");
  const ImageIndex index = parse_index(testing::read_file(tmp / "out/index.json"), "index.json");
  EXPECT_EQ(index.manifests.at(0).media_type, media_type::kDockerManifest);
  EXPECT_EQ(index.manifests.at(0).digest, descriptor.digest);
}

TEST(ImageStore, RepeatedLayersInOneImage) {
  TempDir tmp;
  LayoutBuilder layout(tmp / "layout");
  const std::vector<TarEntry> empty = {};
  layout.write_index({layout.add_image({{{.path = "base", .data = "b"}}, empty, empty})});
  ImageStore store(tmp / "store");
  store.import_layout(layout.dir(), "repeated:1");
  const ImageInfo info = store.inspect("repeated:1");
  ASSERT_EQ(info.layer_dirs.size(), 3u);
  EXPECT_EQ(info.layer_dirs[0], info.layer_dirs[1]);
  EXPECT_EQ(count_entries(store.root() / "layers"), 2u);
}

TEST(ImageStore, PicksTheHostPlatformFromAnIndex) {
  TempDir tmp;
  LayoutBuilder layout(tmp / "layout");
  ImageConfig arm;
  arm.architecture = "arm64";
  Descriptor arm_manifest = layout.add_image({{{.path = "arch", .data = "arm64"}}}, arm);
  arm_manifest.platform = Platform{"linux", "arm64", "v8"};
  Descriptor host_manifest = layout.add_image({{{.path = "arch", .data = "host"}}});
  host_manifest.platform = host_platform();
  // The host image sits in a nested index, as buildx writes it.
  const Descriptor nested =
      layout.add_blob(index_json(ImageIndex{{arm_manifest, host_manifest}}), std::string(media_type::kOciIndex));
  layout.write_index({nested});
  ImageStore store(tmp / "store");
  EXPECT_EQ(store.import_layout(layout.dir(), "multi:1"), host_manifest.digest);
  EXPECT_EQ(testing::read_file(fs::path(store.inspect("multi:1").layer_dirs[0]) / "arch"), "host");
  // Only blobs of the chosen image were kept.
  EXPECT_EQ(count_entries(store.root() / "blobs/sha256"), 3u);

  layout.write_index({arm_manifest});
  try {
    store.import_layout(layout.dir(), "arm:1");
    FAIL() << "arm64-only index accepted";
  } catch (const base::Error& e) {
    EXPECT_NE(std::string(e.what()).find("linux/arm64"), std::string::npos) << e.what();
  }
}

TEST(ImageStore, RefusesLayoutsThatPointOutside) {
  TempDir tmp;
  LayoutBuilder layout(tmp / "layout");
  const Descriptor manifest = layout.add_image({{{.path = "a", .data = "x"}}});
  layout.write_index({manifest});
  // The manifest blob replaced by a symlink to a file with the same bytes elsewhere.
  const fs::path blob = layout.blob_path(manifest.digest);
  fs::copy_file(blob, tmp / "elsewhere");
  fs::remove(blob);
  fs::create_symlink(tmp / "elsewhere", blob);
  ImageStore store(tmp / "store");
  EXPECT_THROW(store.import_layout(layout.dir(), "sneaky:1"), base::Error);
  expect_store_empty(store.root());
  EXPECT_THROW(store.import_layout(tmp / "no-such-layout", "x:1"), base::Error);
  EXPECT_THROW(store.import_layout(layout.dir(), "sha256:" + std::string(64, 'a')), ImageError);
}

TEST(ImageStore, RootfsPackingIsDeterministic) {
  TempDir tmp;
  const fs::path tree = tmp / "tree";
  testing::make_rootfs_tree(tree);
  RootfsOptions options;
  options.labels = {{"capsule.toolchain.python", "3.11"}};
  options.working_dir = "/workspace";

  ImageStore store(tmp / "store");
  const store::Digest first = store.import_rootfs(tree, "rootfs:1", options);
  EXPECT_EQ(store.import_rootfs(tree, "rootfs:1", options), first);  // idempotent
  testing::touch_all(tree, 1234567890);                                // different mtimes ...
  EXPECT_EQ(store.import_rootfs(tree, "rootfs:2", options), first);  // ... same digest
  ImageStore other(tmp / "other-store");
  EXPECT_EQ(other.import_rootfs(tree, "rootfs:1", options), first);  // and in another store

  const ImageInfo info = store.inspect("rootfs:1");
  EXPECT_EQ(info.refs, (std::vector<std::string>{"rootfs:1", "rootfs:2"}));
  EXPECT_EQ(info.config.labels.at("capsule.toolchain.python"), "3.11");
  EXPECT_EQ(info.config.working_dir, "/workspace");
  EXPECT_EQ(info.config.os, "linux");
  ASSERT_EQ(info.layer_dirs.size(), 1u);
  const fs::path layer = info.layer_dirs[0];
  EXPECT_EQ(testing::read_file(layer / "etc/hostname"), "capsule\n");
  EXPECT_EQ(lstat_of(layer / "home/user/notes").st_uid, 1000u);
  EXPECT_EQ(lstat_of(layer / "usr/bin/tool").st_mode & 07777, 04755u);
  EXPECT_EQ(lstat_of(layer / "usr/bin/tool-link").st_ino, lstat_of(layer / "usr/bin/tool").st_ino);
  EXPECT_EQ(fs::read_symlink(layer / "bin"), "usr/bin");
  EXPECT_EQ(lstat_of(layer / "etc/hostname").st_mtim.tv_sec, 0);  // clamped to the epoch
  EXPECT_FALSE(fs::exists(layer / "run/fifo"));                       // fifos are not packed
  const std::string blob = testing::read_file(store.root() / "blobs/sha256" / info.layer_digests[0].hex());
  EXPECT_EQ(blob.substr(0, 4), std::string("\x1f\x8b\x08\x00", 4));  // gzip, no file name
  EXPECT_EQ(blob.substr(4, 4), std::string(4, '\0'));                 // and no timestamp

  // Labels must be writable as JSON; nothing is left behind when they are not.
  RootfsOptions bad = options;
  bad.labels["broken"] = "\xff\xfe";
  EXPECT_THROW(store.import_rootfs(tree, "bad:1", bad), ImageError);
  bad = options;
  bad.env = {"NOT-KEY-VALUE"};
  EXPECT_THROW(store.import_rootfs(tree, "bad:1", bad), ImageError);
  EXPECT_EQ(count_entries(store.root() / "tmp"), 0u);

  // Content changes change the digest.
  testing::write_file(tree / "etc/hostname", "other\n");
  EXPECT_NE(store.import_rootfs(tree, "rootfs:3", options), first);
  // Another epoch is a different (but again reproducible) image.
  options.epoch = 1700000000;
  const store::Digest later = store.import_rootfs(tree, "rootfs:4", options);
  EXPECT_EQ(store.import_rootfs(tree, "rootfs:4", options), later);
}

TEST(ImageStore, RootfsFromATarball) {
  TempDir tmp;
  const std::string tarball = testing::make_tar({{.path = "etc/", .type = 'd', .mode = 0755},
                                                 {.path = "etc/os-release", .data = "ID=test\n"},
                                                 {.path = "home/u/f", .data = "u", .uid = 1000, .gid = 1000}});
  testing::write_file(tmp / "rootfs.tar.gz", tarball);
  ImageStore store(tmp / "store");
  const store::Digest digest = store.import_rootfs(tmp / "rootfs.tar.gz", "fromtar:1");
  EXPECT_EQ(store.import_rootfs(tmp / "rootfs.tar.gz", "fromtar:1"), digest);
  const fs::path layer = store.inspect("fromtar:1").layer_dirs.at(0);
  EXPECT_EQ(testing::read_file(layer / "etc/os-release"), "ID=test\n");
  EXPECT_EQ(lstat_of(layer / "home/u/f").st_uid, 1000u);
  // The same tree as a directory gives the same image.
  unpack_layer(tmp / "rootfs.tar.gz", tmp / "tree");
  EXPECT_EQ(store.import_rootfs(tmp / "tree", "fromdir:1"), digest);
  // A hostile tarball is refused like a hostile layer.
  testing::write_file(tmp / "evil.tar", testing::make_tar({{.path = "../evil", .data = "x"}}));
  EXPECT_THROW(store.import_rootfs(tmp / "evil.tar", "evil:1"), ImageError);
  EXPECT_EQ(count_entries(store.root() / "tmp"), 0u);
}

TEST(ImageStore, SaveThenReimportKeepsTheDigest) {
  TempDir tmp;
  LayoutBuilder layout(tmp / "layout");
  const Descriptor manifest = layout.add_image(testing::three_layers());
  layout.write_index({manifest});
  ImageStore store(tmp / "store");
  const store::Digest digest = store.import_layout(layout.dir(), "img:1");

  store.save("img:1", tmp / "exported");
  EXPECT_TRUE(fs::exists(tmp / "exported/oci-layout"));
  const ImageIndex index = parse_index(testing::read_file(tmp / "exported/index.json"), "index.json");
  ASSERT_EQ(index.manifests.size(), 1u);
  EXPECT_EQ(index.manifests[0].annotations.at("org.opencontainers.image.ref.name"), "1");
  EXPECT_EQ(index.manifests[0].annotations.at("io.containerd.image.name"), "img:1");
  EXPECT_THROW(store.save("img:1", tmp / "exported"), ImageError);  // not over a non-empty directory
  EXPECT_THROW(store.save("img:1", tmp / "exported.tar.gz"), ImageError);
  EXPECT_THROW(store.save("nope:1", tmp / "nope"), ImageError);
  EXPECT_FALSE(fs::exists(tmp / "nope"));

  store.save("img:1", tmp / "a.tar");
  store.save(digest.str(), tmp / "b.tar");
  store.save("img:1", tmp / "c.tar");
  EXPECT_EQ(testing::read_file(tmp / "a.tar"), testing::read_file(tmp / "c.tar"));  // deterministic
  EXPECT_EQ(count_entries(store.root() / "tmp"), 0u);

  ImageStore second(tmp / "second");
  EXPECT_EQ(second.import_layout(tmp / "exported", "copy:1"), digest);
  ImageStore third(tmp / "third");
  EXPECT_EQ(third.import_archive(tmp / "a.tar", "copy:1"), digest);
  EXPECT_EQ(third.import_archive(tmp / "b.tar", "copy:2"), digest);
  EXPECT_EQ(third.inspect("copy:2").refs, (std::vector<std::string>{"copy:1", "copy:2"}));
  EXPECT_EQ(count_entries(third.root() / "tmp"), 0u);
}

TEST(ImageStore, RemoveAndGcKeepOnlyWhatRefsReach) {
  TempDir tmp;
  LayoutBuilder layout(tmp / "layout");
  const std::vector<TarEntry> shared = {{.path = "shared", .data = "base"}};
  const Descriptor a = layout.add_image({shared, {{.path = "a", .data = "a"}}});
  const Descriptor b = layout.add_image({shared, {{.path = "b", .data = "b"}}});
  ImageStore store(tmp / "store");
  layout.write_index({a});
  store.import_layout(layout.dir(), "a:1");
  store.import_layout(layout.dir(), "a:2");
  layout.write_index({b});
  store.import_layout(layout.dir(), "b:1");
  EXPECT_EQ(store.list().size(), 2u);
  EXPECT_EQ(count_entries(store.root() / "blobs/sha256"), 7u);  // 2 manifests, 2 configs, 3 layers
  EXPECT_EQ(count_entries(store.root() / "layers"), 3u);

  EXPECT_TRUE(store.gc().blobs.empty());  // everything is referenced
  EXPECT_EQ(store.remove("b:1"), std::vector<std::string>{"b:1"});
  EXPECT_THROW(store.remove("b:1"), ImageError);
  EXPECT_EQ(count_entries(store.root() / "layers"), 3u);  // remove keeps blobs and layers until gc
  EXPECT_EQ(store.list().size(), 1u);

  const GcResult collected = store.gc();
  EXPECT_EQ(collected.blobs.size(), 3u);  // b's manifest, config and own layer
  EXPECT_EQ(collected.layers.size(), 1u);
  EXPECT_GT(collected.blob_bytes, 0u);
  EXPECT_EQ(count_entries(store.root() / "layers"), 2u);
  const ImageInfo info = store.inspect("a:1");
  for (const auto& dir : info.layer_dirs) EXPECT_TRUE(fs::is_directory(dir)) << dir;
  EXPECT_EQ(testing::read_file(fs::path(info.layer_dirs.back()) / "shared"), "base");

  // Removing by digest drops every ref to it.
  EXPECT_EQ(store.remove(info.manifest_digest.str()), (std::vector<std::string>{"a:1", "a:2"}));
  EXPECT_TRUE(store.list().empty());
  store.gc();
  expect_store_empty(store.root());
}

TEST(ImageStore, InspectRestoresAMissingLayerDir) {
  TempDir tmp;
  LayoutBuilder layout(tmp / "layout");
  layout.write_index({layout.add_image(testing::three_layers())});
  ImageStore store(tmp / "store");
  store.import_layout(layout.dir(), "img:1");
  const ImageInfo info = store.inspect("img:1");
  fs::remove_all(info.layer_dirs[1]);
  EXPECT_EQ(store.inspect("img:1").layer_dirs, info.layer_dirs);
  EXPECT_TRUE(S_ISCHR(lstat_of(fs::path(info.layer_dirs[1]) / "data/gone").st_mode));
}

TEST(ImageStore, ConcurrentImportersInThreadsAndProcesses) {
  TempDir tmp;
  LayoutBuilder layout(tmp / "layout");
  const Descriptor manifest = layout.add_image(testing::three_layers());
  layout.write_index({manifest});
  const fs::path root = tmp / "store";
  ImageStore(root).import_rootfs(tmp / "layout", "garbage:1");  // something for gc to collect meanwhile
  ImageStore(root).remove("garbage:1");

  std::vector<pid_t> children;
  for (int i = 0; i < 3; ++i) {
    pid_t pid = fork();
    ASSERT_GE(pid, 0);
    if (pid == 0) {
      int status = 0;
      try {
        ImageStore store(root);
        for (int round = 0; round < 3; ++round) {
          if (store.import_layout(layout.dir(), "proc" + std::to_string(i) + ":" + std::to_string(round)) !=
              manifest.digest) {
            status = 1;
          }
        }
      } catch (...) {
        status = 2;
      }
      _exit(status);
    }
    children.push_back(pid);
  }
  std::vector<std::thread> threads;
  std::atomic<int> failures{0};
  for (int i = 0; i < 3; ++i) {
    threads.emplace_back([&, i] {
      try {
        ImageStore store(root);
        for (int round = 0; round < 3; ++round) {
          if (store.import_layout(layout.dir(), "thread" + std::to_string(i) + ":" + std::to_string(round)) !=
              manifest.digest) {
            ++failures;
          }
          store.gc();
        }
      } catch (const std::exception& e) {
        ADD_FAILURE() << e.what();
        ++failures;
      }
    });
  }
  for (auto& thread : threads) thread.join();
  for (pid_t pid : children) {
    int status = 0;
    ASSERT_EQ(waitpid(pid, &status, 0), pid);
    EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << "child status " << status;
  }
  EXPECT_EQ(failures.load(), 0);

  ImageStore store(root);
  const std::vector<ImageInfo> images = store.list();
  ASSERT_EQ(images.size(), 1u);
  EXPECT_EQ(images[0].refs.size(), 18u);
  for (const auto& dir : store.inspect("proc0:0").layer_dirs) EXPECT_TRUE(fs::is_directory(dir));
  store.gc();
  EXPECT_EQ(count_entries(root / "layers"), 3u);
  EXPECT_EQ(count_entries(root / "blobs/sha256"), 5u);
  EXPECT_EQ(count_entries(root / "tmp"), 0u);
}

}  // namespace
}  // namespace capsule::images
