// ImageStore: imports stage every blob and layer in a private directory under tmp/, verify them all, then
// move them into blobs/ and layers/ and point the ref; refs, inspect, save, remove and gc read what is there.
#include "images/image_store.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <ctime>
#include <functional>
#include <optional>
#include <set>

#include "images/error.h"
#include "base/file_util.h"
#include "images/image_ref.h"
#include "images/image_stack.h"
#include "images/oci_layout.h"
#include "images/ref_table.h"
#include "images/store_lock.h"
#include "images/tar_pack.h"

namespace capsule::images {
namespace fs = std::filesystem;
namespace {

constexpr int kMaxIndexDepth = 4;

// A name:tag ref for imports (a digest cannot be pointed anywhere).
std::string tag_ref(const std::string& text) {
  const ImageRef ref = ImageRef::parse(text);
  if (ref.by_digest()) throw_image_error("import", text, "needs a name[:tag] reference, not a digest");
  return ref.str();
}

std::string rfc3339(std::int64_t epoch) {
  const std::time_t seconds = static_cast<std::time_t>(epoch);
  struct tm utc {};
  if (gmtime_r(&seconds, &utc) == nullptr) throw_image_error("import", std::to_string(epoch), "invalid epoch");
  char text[64];
  std::strftime(text, sizeof text, "%Y-%m-%dT%H:%M:%SZ", &utc);
  return text;
}

bool is_dir_path(const fs::path& path) {
  struct stat st;
  return stat(path.c_str(), &st) == 0 && S_ISDIR(st.st_mode);
}

void check_layers_match(const ImageManifest& manifest, const ImageConfig& config, const std::string& shown) {
  if (manifest.layers.size() != config.diff_ids.size()) {
    throw_image_error("import", shown,
                      "manifest has " + std::to_string(manifest.layers.size()) + " layers but the config lists " +
                          std::to_string(config.diff_ids.size()) + " diff_ids");
  }
}

// Names in a directory, read before any of them is moved or removed.
std::vector<fs::path> entries_of(const fs::path& dir, const std::string& step) {
  std::vector<fs::path> entries;
  std::error_code error;
  for (fs::directory_iterator it(dir, error), end; !error && it != end; it.increment(error)) entries.push_back(it->path());
  if (error) throw ImageError(step, dir.string(), "list", error.value());
  std::sort(entries.begin(), entries.end());
  return entries;
}

fs::path created(const fs::path& root) {
  base::make_dir(root, 0700, "store");
  return root;
}

// Moves a finished directory into place; one already there (same content, by name) wins.
void move_dir_into_place(const fs::path& from, const fs::path& to) {
  if (rename(from.c_str(), to.c_str()) == 0) return;
  if (errno == ENOTEMPTY || errno == EEXIST) return;
  throw_image_errno("import", to.string(), "move unpacked layer into place");
}

}  // namespace

// One import's private area, <root>/tmp/import-XXXXXX: a blob store and unpacked layers; removed on exit.
class ImageStore::Staging {
 public:
  explicit Staging(const fs::path& tmp) : dir(base::make_temp_dir(tmp, "import-", "import")), blobs(dir) {
    base::make_dir(dir / "layers", 0700, "import");
  }
  ~Staging() {
    std::error_code ignored;
    fs::remove_all(dir, ignored);
  }
  Staging(const Staging&) = delete;
  Staging& operator=(const Staging&) = delete;

  fs::path layer(const store::Digest& diff_id) const { return dir / "layers" / diff_id.hex(); }

  const fs::path dir;  // declared before blobs: it is created first
  store::BlobStore blobs;
};

ImageStore::ImageStore(fs::path root, UnpackLimits limits)
    : root_(std::move(root)), limits_(limits), blobs_(created(root_)) {
  base::make_dir(root_ / "layers", 0700, "store");
  remove_abandoned_staging();
}

// Imports hold the store lock shared for as long as their staging area exists, so with it held exclusively
// every import-* directory is a leftover of a killed import (in this process or another).
void ImageStore::remove_abandoned_staging() {
  StoreLock lock(root_ / "lock", StoreLock::Mode::kExclusive);
  std::error_code ec;
  for (const auto& entry : fs::directory_iterator(root_ / "tmp", ec)) {
    if (entry.path().filename().string().rfind("import-", 0) != 0) continue;
    std::error_code ignored;
    fs::remove_all(entry.path(), ignored);
  }
}

fs::path ImageStore::layer_dir(const store::Digest& diff_id) const { return root_ / "layers" / diff_id.hex(); }

// ---- imports ----

namespace {

// Refuses (step "ref_owner") pointing `ref` when it is someone else's and `write` may not replace it. Imports
// ask before the work and again under the refs lock, where the answer counts.
void require_ref_writable(const RefTable& refs, const std::string& ref, const RefWrite& write) {
  const auto it = refs.find(ref);
  if (it == refs.end() || write.replaces_others || it->second.access.owner == write.access.owner) return;
  throw_image_error("ref_owner", ref, "belongs to uid " + std::to_string(it->second.access.owner) +
                                          "; only its owner or root may point it elsewhere");
}

}  // namespace

store::Digest ImageStore::import_layout(const fs::path& dir, const std::string& ref, const RefWrite& write) {
  const std::string name = tag_ref(ref);
  require_ref_writable(load_refs(root_ / "refs.json"), name, write);
  StoreLock lock(root_ / "lock", StoreLock::Mode::kShared);
  return import_layout_locked(dir, name, write);
}

store::Digest ImageStore::import_layout_locked(const fs::path& dir, const std::string& ref, const RefWrite& write) {
  const OciLayoutReader layout(dir);
  Staging staging(root_ / "tmp");

  // A blob from the layout, verified into staging unless the store already has it; returns where it is.
  auto stage = [&](const Descriptor& descriptor) -> fs::path {
    if (blobs_.has(descriptor.digest)) {
      if (blobs_.size(descriptor.digest) != descriptor.size) {
        throw_image_error("import", descriptor.digest.str(), "stored blob size differs from the descriptor's");
      }
      return blobs_.path(descriptor.digest);
    }
    if (!staging.blobs.has(descriptor.digest)) {
      base::UniqueFd fd = layout.open_blob(descriptor.digest);
      staging.blobs.put_fd(fd.get(), descriptor.digest, descriptor.size);
    }
    return staging.blobs.path(descriptor.digest);
  };
  auto document = [&](const Descriptor& descriptor) {
    if (descriptor.size > kMaxImageDocument) throw_image_error("import", descriptor.digest.str(), "document too large");
    stage(descriptor);
    const store::BlobStore& holder = blobs_.has(descriptor.digest) ? blobs_ : staging.blobs;
    return holder.read(descriptor.digest, kMaxImageDocument);
  };

  // The host platform's manifest: platform-tagged entries must match; untagged ones are checked by config.
  const Platform host = host_platform();
  std::vector<std::string> seen;
  std::function<std::optional<Descriptor>(const std::vector<Descriptor>&, int)> select =
      [&](const std::vector<Descriptor>& candidates, int depth) -> std::optional<Descriptor> {
    for (const auto& candidate : candidates) {
      if (candidate.platform) {
        seen.push_back(candidate.platform->os + "/" + candidate.platform->architecture);
        if (candidate.platform->os != host.os || candidate.platform->architecture != host.architecture) continue;
      }
      if (is_index_media_type(candidate.media_type)) {
        if (depth >= kMaxIndexDepth) throw_image_error("import", dir.string(), "image indexes nested too deep");
        const ImageIndex nested = parse_index(document(candidate), candidate.digest.str());
        if (auto found = select(nested.manifests, depth + 1)) return found;
      } else if (is_manifest_media_type(candidate.media_type)) {
        if (candidate.platform) return candidate;
        const ImageManifest manifest = parse_manifest(document(candidate), candidate.digest.str());
        const ImageConfig config = parse_config(document(manifest.config), manifest.config.digest.str());
        if (config.os.empty() || (config.os == host.os && config.architecture == host.architecture)) return candidate;
        seen.push_back(config.os + "/" + config.architecture);
      }
      // Anything else (attestations, artifacts) is not an image to run.
    }
    return std::nullopt;
  };
  const auto chosen = select(layout.index().manifests, 0);
  if (!chosen) {
    std::string found;
    for (const auto& platform : seen) found += (found.empty() ? "" : ", ") + platform;
    throw_image_error("import", dir.string(),
                      "no " + host.os + "/" + host.architecture + " image manifest in index.json" +
                          (found.empty() ? std::string() : " (found " + found + ")"));
  }

  const ImageManifest manifest = parse_manifest(document(*chosen), chosen->digest.str());
  const ImageConfig config = parse_config(document(manifest.config), manifest.config.digest.str());
  check_layers_match(manifest, config, chosen->digest.str());
  for (const auto& layer : manifest.layers) stage(layer);
  return commit(staging, chosen->digest, manifest, config, ref, write);
}

store::Digest ImageStore::import_archive(const fs::path& archive, const std::string& ref, const RefWrite& write) {
  const std::string name = tag_ref(ref);
  require_ref_writable(load_refs(root_ / "refs.json"), name, write);
  StoreLock lock(root_ / "lock", StoreLock::Mode::kShared);
  Staging extracted(root_ / "tmp");
  const fs::path layout = extracted.dir / "layout";
  unpack_layer(archive, layout, limits_);
  return import_layout_locked(layout, name, write);
}

store::Digest ImageStore::import_rootfs(const fs::path& source, const std::string& ref, const RootfsOptions& options,
                                        const RefWrite& write) {
  const std::string name = tag_ref(ref);
  require_ref_writable(load_refs(root_ / "refs.json"), name, write);
  StoreLock lock(root_ / "lock", StoreLock::Mode::kShared);
  Staging staging(root_ / "tmp");
  fs::path tree = source;
  if (!is_dir_path(source)) {  // a tarball: unpacked with the layer checks, then repacked deterministically
    tree = staging.dir / "rootfs";
    unpack_layer(source, tree, limits_);
  }

  store::BlobWriter layer_writer = staging.blobs.writer();
  const PackResult packed = pack_directory(
      tree, [&](const void* data, std::size_t size) { layer_writer.write(data, size); },
      PackOptions{options.epoch, options.gzip, false});
  const store::Digest layer = layer_writer.commit();

  const Platform host = host_platform();
  ImageConfig config{host.os, host.architecture, options.env, options.working_dir, options.user,
                     options.labels, {packed.diff_id}};
  const std::string config_text = config_json(config, rfc3339(options.epoch));
  config = parse_config(config_text, "rootfs config");  // the one validation point (e.g. Env entries)
  const store::Digest config_digest = staging.blobs.put_bytes(config_text);

  ImageManifest manifest;
  manifest.media_type = std::string(media_type::kOciManifest);
  manifest.config = Descriptor{std::string(media_type::kOciConfig), config_digest, config_text.size(), {}, {}};
  manifest.layers.push_back(Descriptor{std::string(options.gzip ? media_type::kOciLayerGzip : media_type::kOciLayerTar),
                                       layer, staging.blobs.size(layer), {}, {}});
  const std::string manifest_text = manifest_json(manifest);
  const store::Digest manifest_digest = staging.blobs.put_bytes(manifest_text);
  return commit(staging, manifest_digest, manifest, config, name, write);
}

store::Digest ImageStore::commit_layer(const std::vector<store::Digest>& bases, const store::BlobStore& from,
                                       const store::Digest& layer, const std::map<std::string, std::string>& labels,
                                       const std::string& ref, std::int64_t epoch, const RefWrite& write) {
  const std::string name = tag_ref(ref);
  require_ref_writable(load_refs(root_ / "refs.json"), name, write);
  if (bases.empty()) throw_image_error("commit", name, "a committed layer needs at least one image below it");
  StoreLock lock(root_ / "lock", StoreLock::Mode::kShared);
  Staging staging(root_ / "tmp");
  ImageManifest manifest;
  manifest.media_type = std::string(media_type::kOciManifest);
  ImageConfig config;
  for (std::size_t i = 0; i < bases.size(); ++i) {
    const ImageManifest below = parse_manifest(blobs_.read(bases[i], kMaxImageDocument), bases[i].str());
    const ImageConfig below_config = parse_config(blobs_.read(below.config.digest, kMaxImageDocument), below.config.digest.str());
    check_layers_match(below, below_config, bases[i].str());
    config = i == 0 ? below_config : merge_configs(config, below_config);
    manifest.layers.insert(manifest.layers.end(), below.layers.begin(), below.layers.end());
  }
  if (!blobs_.has(layer)) staging.blobs.put_file(from.path(layer), layer);
  const std::uint64_t layer_size = blobs_.has(layer) ? blobs_.size(layer) : staging.blobs.size(layer);
  manifest.layers.push_back(Descriptor{std::string(media_type::kOciLayerTar), layer, layer_size, {}, {}});
  config.diff_ids.push_back(layer);
  for (const auto& [key, value] : labels) config.labels[key] = value;
  if (manifest.layers.size() > kMaxStackLayers) {
    throw_image_error("commit", name, "more than " + std::to_string(kMaxStackLayers) + " layers");
  }
  const std::string config_text = config_json(config, rfc3339(epoch));
  config = parse_config(config_text, "committed config");
  const store::Digest config_digest = staging.blobs.put_bytes(config_text);
  manifest.config = Descriptor{std::string(media_type::kOciConfig), config_digest, config_text.size(), {}, {}};
  const std::string manifest_text = manifest_json(manifest);
  const store::Digest manifest_digest = staging.blobs.put_bytes(manifest_text);
  return commit(staging, manifest_digest, manifest, config, name, write);
}

// Unpacks missing layers into staging (checking diff_ids), then moves blobs, layers and finally the ref in.
store::Digest ImageStore::commit(Staging& staging, const store::Digest& manifest_digest, const ImageManifest& manifest,
                          const ImageConfig& config, const std::string& ref, const RefWrite& write) {
  auto blob_path = [&](const store::Digest& digest) {
    return blobs_.has(digest) ? blobs_.path(digest) : staging.blobs.path(digest);
  };
  std::vector<store::Digest> staged_layers;
  for (std::size_t i = 0; i < manifest.layers.size(); ++i) {
    const store::Digest& diff_id = config.diff_ids[i];
    if (is_dir_path(layer_dir(diff_id)) || is_dir_path(staging.layer(diff_id))) continue;
    unpack_layer(blob_path(manifest.layers[i].digest), staging.layer(diff_id), limits_, diff_id);
    staged_layers.push_back(diff_id);
  }

  blobs_.adopt(staging.blobs, manifest_digest);
  blobs_.adopt(staging.blobs, manifest.config.digest);
  for (const auto& layer : manifest.layers) blobs_.adopt(staging.blobs, layer.digest);
  for (const auto& diff_id : staged_layers) move_dir_into_place(staging.layer(diff_id), layer_dir(diff_id));

  StoreLock refs_lock(root_ / "refs.lock", StoreLock::Mode::kExclusive);
  RefTable refs = load_refs(root_ / "refs.json");
  require_ref_writable(refs, ref, write);
  auto it = refs.find(ref);
  if (it == refs.end() || it->second.digest != manifest_digest || it->second.access.owner != write.access.owner ||
      it->second.access.is_public != write.access.is_public || it->second.access.group != write.access.group) {
    refs[ref] = RefEntry{manifest_digest, write.access};
    save_refs(root_ / "refs.json", refs);
  }
  return manifest_digest;
}

// ---- reading ----

// A digest is as visible as the refs pointing at it: a caller who sees none of them is told what it would be
// told of a digest never imported.
store::Digest ImageStore::resolve(const std::string& text, const RefViewer& viewer) const {
  const ImageRef ref = ImageRef::parse(text);
  if (ref.by_digest()) {
    const RefTable refs = viewer.sees_all ? RefTable{} : load_refs(root_ / "refs.json");
    const bool visible = viewer.sees_all || std::any_of(refs.begin(), refs.end(), [&](const auto& row) {
                           return row.second.digest == *ref.digest && viewer.may_see(row.second.access);
                         });
    if (!visible || !blobs_.has(*ref.digest)) throw_image_error("resolve", text, "no image with this manifest digest");
    parse_manifest(blobs_.read(*ref.digest, kMaxImageDocument), ref.digest->str());  // is it a manifest at all?
    return *ref.digest;
  }
  const RefTable refs = load_refs(root_ / "refs.json");
  auto it = refs.find(ref.str());
  if (it == refs.end() || !viewer.may_see(it->second.access)) throw_image_error("resolve", text, "no such image");
  return it->second.digest;
}

ImageInfo ImageStore::describe(const store::Digest& manifest_digest, const RefViewer& viewer, const RefTable& refs) const {
  ImageInfo info;
  info.manifest_digest = manifest_digest;
  const ImageManifest manifest = parse_manifest(blobs_.read(manifest_digest, kMaxImageDocument), manifest_digest.str());
  info.config = parse_config(blobs_.read(manifest.config.digest, kMaxImageDocument), manifest.config.digest.str());
  check_layers_match(manifest, info.config, manifest_digest.str());
  info.size = blobs_.size(manifest_digest) + manifest.config.size;
  for (const auto& layer : manifest.layers) {
    info.layer_digests.push_back(layer.digest);
    info.size += layer.size;
  }
  for (auto it = info.config.diff_ids.rbegin(); it != info.config.diff_ids.rend(); ++it) {
    info.layer_dirs.push_back(layer_dir(*it).string());
  }
  for (const auto& [name, entry] : refs) {
    if (entry.digest != manifest_digest || !viewer.may_see(entry.access)) continue;
    info.refs.push_back(name);
    info.ref_access[name] = entry.access;
  }
  return info;
}

void ImageStore::ensure_layers(const ImageManifest& manifest, const ImageConfig& config) const {
  for (std::size_t i = 0; i < manifest.layers.size(); ++i) {
    const store::Digest& diff_id = config.diff_ids[i];
    if (is_dir_path(layer_dir(diff_id))) continue;
    const fs::path staging = base::make_temp_dir(root_ / "tmp", "layer-", "inspect");
    try {
      unpack_layer(blobs_.path(manifest.layers[i].digest), staging / "layer", limits_, diff_id);
      move_dir_into_place(staging / "layer", layer_dir(diff_id));
    } catch (...) {
      std::error_code ignored;
      fs::remove_all(staging, ignored);
      throw;
    }
    std::error_code ignored;
    fs::remove_all(staging, ignored);
  }
}

ImageInfo ImageStore::inspect(const std::string& ref, const RefViewer& viewer) const {
  StoreLock lock(root_ / "lock", StoreLock::Mode::kShared);
  const store::Digest digest = resolve(ref, viewer);
  ImageInfo info = describe(digest, viewer, load_refs(root_ / "refs.json"));
  const ImageManifest manifest = parse_manifest(blobs_.read(digest, kMaxImageDocument), digest.str());
  ensure_layers(manifest, info.config);
  return info;
}

std::vector<ImageInfo> ImageStore::list(const RefViewer& viewer) const {
  StoreLock lock(root_ / "lock", StoreLock::Mode::kShared);
  const RefTable refs = load_refs(root_ / "refs.json");  // once, not once per image
  std::set<store::Digest> digests;
  for (const auto& [name, entry] : refs) {
    if (viewer.may_see(entry.access)) digests.insert(entry.digest);
  }
  std::vector<ImageInfo> images;
  for (const auto& digest : digests) images.push_back(describe(digest, viewer, refs));
  std::sort(images.begin(), images.end(),
            [](const ImageInfo& a, const ImageInfo& b) { return a.refs < b.refs; });
  return images;
}

void ImageStore::save(const std::string& ref, const fs::path& out, const RefViewer& viewer) const {
  StoreLock lock(root_ / "lock", StoreLock::Mode::kShared);
  const store::Digest digest = resolve(ref, viewer);
  const ImageManifest manifest = parse_manifest(blobs_.read(digest, kMaxImageDocument), digest.str());
  const ImageConfig config = parse_config(blobs_.read(manifest.config.digest, kMaxImageDocument), manifest.config.digest.str());

  Descriptor entry{manifest.media_type.empty() ? std::string(media_type::kOciManifest) : manifest.media_type, digest,
                   blobs_.size(digest), {}, {}};
  if (!config.os.empty()) entry.platform = Platform{config.os, config.architecture, ""};
  const ImageRef parsed = ImageRef::parse(ref);
  if (!parsed.by_digest()) {
    entry.annotations["org.opencontainers.image.ref.name"] = parsed.tag;
    entry.annotations["io.containerd.image.name"] = parsed.str();
  }
  std::vector<std::pair<store::Digest, fs::path>> files = {{digest, blobs_.path(digest)},
                                                    {manifest.config.digest, blobs_.path(manifest.config.digest)}};
  for (const auto& layer : manifest.layers) files.emplace_back(layer.digest, blobs_.path(layer.digest));

  if (out.extension() == ".gz" || out.extension() == ".tgz") {
    throw_image_error("save", out.string(), "compressed archives are not written; name it .tar");
  }
  const bool archive = out.extension() == ".tar";
  const fs::path parent = out.parent_path().empty() ? fs::path(".") : out.parent_path();
  const std::string name = out.filename().string();  // a named string: "." + a temporary trips GCC 12 -O3 -Wrestrict
  const fs::path temp = base::make_temp_dir(archive ? root_ / "tmp" : parent, "." + name + ".save-", "save");
  try {
    if (chmod(temp.c_str(), 0755) != 0) throw_image_errno("save", temp.string(), "chmod");
    write_layout(temp, index_json(ImageIndex{{entry}}), files);
    if (archive) {
      std::string partial = out.string() + ".tmp-XXXXXX";
      base::UniqueFd fd(mkostemp(partial.data(), O_CLOEXEC));
      if (!fd) throw_image_errno("save", out.string(), "create");
      try {
        pack_directory(
            temp, [&](const void* data, std::size_t size) { base::write_all(fd.get(), data, size, "save", partial); },
            PackOptions{0, false, true});
        if (fchmod(fd.get(), 0644) != 0 || fsync(fd.get()) != 0) throw_image_errno("save", partial, "finish");
        if (rename(partial.c_str(), out.c_str()) != 0) throw_image_errno("save", out.string(), "rename into place");
      } catch (...) {
        unlink(partial.c_str());
        throw;
      }
      std::error_code ignored;
      fs::remove_all(temp, ignored);
    } else if (rename(temp.c_str(), out.c_str()) != 0) {
      throw_image_errno("save", out.string(), "move into place (it must not exist, or be empty)");
    }
  } catch (...) {
    std::error_code ignored;
    fs::remove_all(temp, ignored);
    throw;
  }
}

// ---- removal ----

// Refs the viewer cannot see are not there for it; one it sees but does not own is refused, and removing a
// digest removes only the viewer's own refs to it.
std::vector<std::string> ImageStore::remove(const std::string& text, const RefViewer& viewer) {
  const ImageRef ref = ImageRef::parse(text);
  StoreLock refs_lock(root_ / "refs.lock", StoreLock::Mode::kExclusive);
  RefTable refs = load_refs(root_ / "refs.json");
  std::vector<std::string> removed;
  std::optional<std::pair<std::string, uid_t>> refused;  // a ref the viewer sees but does not own
  for (auto it = refs.begin(); it != refs.end();) {
    const bool match = ref.by_digest() ? it->second.digest == *ref.digest : it->first == ref.str();
    if (match && viewer.may_change(it->second.access)) {
      removed.push_back(it->first);
      it = refs.erase(it);
      continue;
    }
    if (match && viewer.may_see(it->second.access) && !refused) refused.emplace(it->first, it->second.access.owner);
    ++it;
  }
  if (removed.empty() && refused) {
    throw_image_error("ref_owner", refused->first, "belongs to uid " + std::to_string(refused->second) +
                                                       "; only its owner or root may remove it");
  }
  if (removed.empty()) throw_image_error("remove", text, "no such image ref");
  save_refs(root_ / "refs.json", refs);
  return removed;
}

RefAccess ImageStore::share(const std::string& text, const RefAccess& access, const RefViewer& viewer) {
  const ImageRef ref = ImageRef::parse(text);
  if (ref.by_digest()) throw_image_error("ref", text, "sharing names a name:tag ref, not a digest");
  StoreLock refs_lock(root_ / "refs.lock", StoreLock::Mode::kExclusive);
  RefTable refs = load_refs(root_ / "refs.json");
  const auto it = refs.find(ref.str());
  if (it == refs.end() || !viewer.may_see(it->second.access)) throw_image_error("resolve", text, "no such image");
  if (!viewer.may_change(it->second.access)) {
    throw_image_error("ref_owner", ref.str(), "belongs to uid " + std::to_string(it->second.access.owner) +
                                                  "; only its owner or root may share it");
  }
  it->second.access.is_public = access.is_public;
  it->second.access.group = access.group;
  save_refs(root_ / "refs.json", refs);
  return it->second.access;
}

GcResult ImageStore::gc() {
  StoreLock lock(root_ / "lock", StoreLock::Mode::kExclusive);
  std::set<store::Digest> keep_blobs;
  std::set<std::string> keep_layers;
  for (const auto& [name, entry] : load_refs(root_ / "refs.json")) {
    const store::Digest& digest = entry.digest;
    // A referenced image that cannot be read stops gc: better keep garbage than delete a live layer.
    const ImageManifest manifest = parse_manifest(blobs_.read(digest, kMaxImageDocument), digest.str());
    const ImageConfig config = parse_config(blobs_.read(manifest.config.digest, kMaxImageDocument), manifest.config.digest.str());
    keep_blobs.insert(digest);
    keep_blobs.insert(manifest.config.digest);
    for (const auto& layer : manifest.layers) keep_blobs.insert(layer.digest);
    for (const auto& diff_id : config.diff_ids) keep_layers.insert(diff_id.hex());
  }

  GcResult result;
  for (const auto& digest : blobs_.list()) {
    if (keep_blobs.count(digest)) continue;
    const std::uint64_t size = blobs_.size(digest);
    if (blobs_.remove(digest)) {
      result.blobs.push_back(digest);
      result.blob_bytes += size;
    }
  }
  for (const auto& layer : entries_of(root_ / "layers", "gc")) {
    const std::string name = layer.filename().string();
    if (keep_layers.count(name)) continue;
    // Renamed out first, so a crash mid-removal never leaves a half layer under a valid name.
    const fs::path doomed = base::make_temp_dir(root_ / "tmp", "gc-", "gc");
    if (rename(layer.c_str(), (doomed / "layer").c_str()) != 0) throw_image_errno("gc", layer.string(), "move out");
    result.layers.push_back(name);
  }
  for (const auto& stale : entries_of(root_ / "tmp", "gc")) {
    std::error_code error;
    fs::remove_all(stale, error);
    if (error) throw ImageError("gc", stale.string(), "remove stale staging", error.value());
  }
  return result;
}

}  // namespace capsule::images
