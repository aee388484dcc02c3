// layer_files: one libarchive pass over a layer tar per question. A layer's entries are sorted with each directory
// before its contents (tar_pack.h), so a subtree is the run of entries after its directory sharing its prefix.
#include "daemon/runs/layer_files.h"

#include <archive.h>
#include <archive_entry.h>
#include <sys/stat.h>

#include <algorithm>
#include <exception>
#include <memory>

#include "base/error.h"

namespace capsule::daemon {
namespace {

constexpr const char* kOutputsStep = "outputs";
constexpr std::size_t kChunk = 64 * 1024;

struct ReadFree {
  void operator()(struct archive* a) const { archive_read_free(a); }
};
struct WriteFree {
  void operator()(struct archive* a) const { archive_write_free(a); }
};
struct EntryFree {
  void operator()(struct archive_entry* e) const { archive_entry_free(e); }
};

// An entry's name as packed: no "./" before it, no '/' after it.
std::string clean_name(const char* raw) {
  std::string name = raw == nullptr ? "" : raw;
  if (name.starts_with("./")) name.erase(0, 2);
  while (name.ends_with('/')) name.pop_back();
  return name;
}

std::string last_component(const std::string& path) {
  const auto slash = path.rfind('/');
  return slash == std::string::npos ? path : path.substr(slash + 1);
}

bool is_marker(const std::string& name) { return last_component(name).starts_with(".wh."); }

// An entry as it leaves capsule: the layer's owners (the box's view, sandbox root 0:0) and modes, less setuid and
// setgid, so a tar unpacked by root anywhere plants no privileged file (docs/api.md, "Run outputs").
std::unique_ptr<struct archive_entry, EntryFree> served_copy(struct archive_entry* entry) {
  std::unique_ptr<struct archive_entry, EntryFree> copy(archive_entry_clone(entry));
  if (!copy) base::throw_error(kOutputsStep, "", "libarchive: out of memory");
  archive_entry_set_perm(copy.get(), archive_entry_perm(entry) & ~(S_ISUID | S_ISGID));
  return copy;
}

class LayerReader {
 public:
  explicit LayerReader(const std::filesystem::path& layer) : layer_(layer.string()), archive_(archive_read_new()) {
    if (!archive_) base::throw_error(kOutputsStep, layer_, "libarchive: out of memory");
    archive_read_support_format_tar(archive_.get());
    if (archive_read_open_filename(archive_.get(), layer_.c_str(), kChunk) != ARCHIVE_OK) fail("open");
  }

  // The next entry, or null at the end.
  struct archive_entry* next() {
    struct archive_entry* entry = nullptr;
    const int status = archive_read_next_header(archive_.get(), &entry);
    if (status == ARCHIVE_EOF) return nullptr;
    if (status < ARCHIVE_WARN) fail("read");
    return entry;
  }

  void copy_data(const LayerSink& sink) {
    std::string buffer(kChunk, '\0');
    for (;;) {
      const la_ssize_t got = archive_read_data(archive_.get(), buffer.data(), buffer.size());
      if (got < 0) fail("read data");
      if (got == 0) return;
      sink(std::string_view(buffer.data(), static_cast<std::size_t>(got)));
    }
  }

  [[noreturn]] void fail(const std::string& what) {
    const char* text = archive_error_string(archive_.get());
    base::throw_error(kOutputsStep, layer_, what + ": " + (text ? text : "libarchive error"));
  }

 private:
  std::string layer_;
  std::unique_ptr<struct archive, ReadFree> archive_;
};

// A pax tar written to a sink; exceptions from the sink are kept across libarchive's C frames and rethrown.
class TarOut {
 public:
  explicit TarOut(const LayerSink& sink) : sink_(sink), archive_(archive_write_new()) {
    if (!archive_) base::throw_error(kOutputsStep, "", "libarchive: out of memory");
    archive_write_set_format_pax_restricted(archive_.get());
    archive_write_set_bytes_per_block(archive_.get(), 10240);
    check(archive_write_open(archive_.get(), this, nullptr, &TarOut::bytes, nullptr), "open");
  }

  void header(struct archive_entry* entry) { check(archive_write_header(archive_.get(), entry), "header"); }
  LayerSink data_sink() {
    return [this](std::string_view chunk) {
      if (archive_write_data(archive_.get(), chunk.data(), chunk.size()) < 0) check(-1, "data");
    };
  }
  void close() { check(archive_write_close(archive_.get()), "finish"); }

 private:
  static la_ssize_t bytes(struct archive*, void* self, const void* data, std::size_t size) {
    auto* out = static_cast<TarOut*>(self);
    try {
      out->sink_(std::string_view(static_cast<const char*>(data), size));
      return static_cast<la_ssize_t>(size);
    } catch (...) {
      out->error_ = std::current_exception();
      return -1;
    }
  }
  void check(int status, const std::string& what) {
    if (status >= ARCHIVE_WARN) return;
    if (error_) std::rethrow_exception(error_);
    const char* text = archive_error_string(archive_.get());
    base::throw_error(kOutputsStep, "", "tar " + what + ": " + (text ? text : "libarchive error"));
  }

  const LayerSink& sink_;
  std::unique_ptr<struct archive, WriteFree> archive_;
  std::exception_ptr error_;
};

void write_file(const std::filesystem::path& layer, const std::string& path, const LayerSink& sink) {
  std::string wanted = path;
  for (int hops = 0; hops < 2; ++hops) {  // a hard link names the entry holding the data, which has none itself
    LayerReader reader(layer);
    while (struct archive_entry* entry = reader.next()) {
      if (clean_name(archive_entry_pathname(entry)) != wanted) continue;
      if (const char* link = archive_entry_hardlink(entry)) {
        wanted = clean_name(link);
        break;
      }
      reader.copy_data(sink);
      return;
    }
  }
  base::throw_error(kOutputsStep, path, "hard link target missing from the layer");
}

void write_directory(const std::filesystem::path& layer, const std::string& path, const LayerSink& sink) {
  const std::string prefix = path.empty() ? "" : path + "/";
  TarOut out(sink);
  LayerReader reader(layer);
  bool inside = path.empty();
  while (struct archive_entry* entry = reader.next()) {
    const std::string name = clean_name(archive_entry_pathname(entry));
    if (!path.empty() && name == path) {
      inside = true;
      continue;
    }
    if (!inside) continue;
    if (!name.starts_with(prefix)) break;  // past the subtree
    if (is_marker(name)) continue;
    std::unique_ptr<struct archive_entry, EntryFree> copy = served_copy(entry);
    archive_entry_set_pathname(copy.get(), name.substr(prefix.size()).c_str());
    if (const char* link = archive_entry_hardlink(entry)) {
      const std::string target = clean_name(link);
      if (!target.starts_with(prefix)) continue;
      archive_entry_set_hardlink(copy.get(), target.substr(prefix.size()).c_str());
    }
    out.header(copy.get());
    if (archive_entry_filetype(entry) == AE_IFREG && archive_entry_hardlink(entry) == nullptr) {
      reader.copy_data(out.data_sink());
    }
  }
  out.close();
}

void write_symlink(const std::filesystem::path& layer, const std::string& path, const LayerSink& sink) {
  LayerReader reader(layer);
  while (struct archive_entry* entry = reader.next()) {
    if (clean_name(archive_entry_pathname(entry)) != path) continue;
    TarOut out(sink);
    std::unique_ptr<struct archive_entry, EntryFree> copy = served_copy(entry);
    archive_entry_set_pathname(copy.get(), last_component(path).c_str());
    out.header(copy.get());
    out.close();
    return;
  }
  base::throw_error(kOutputsStep, path, "vanished from the layer");
}

std::uint64_t entry_size(struct archive_entry* entry) {
  return static_cast<std::uint64_t>(std::max<la_int64_t>(0, archive_entry_size(entry)));
}

// The size of the regular file (not a link) named `path`; 0 when there is none.
std::uint64_t regular_size(const std::filesystem::path& layer, const std::string& path) {
  LayerReader reader(layer);
  while (struct archive_entry* entry = reader.next()) {
    if (clean_name(archive_entry_pathname(entry)) != path) continue;
    if (archive_entry_hardlink(entry) == nullptr && archive_entry_filetype(entry) == AE_IFREG) return entry_size(entry);
  }
  return 0;
}

}  // namespace

std::optional<LayerEntry> find_in_layer(const std::filesystem::path& layer, const std::string& path) {
  if (path.empty()) return LayerEntry{LayerEntryKind::kDirectory, 0};
  if (is_marker(path)) return std::nullopt;
  LayerReader reader(layer);
  while (struct archive_entry* entry = reader.next()) {
    if (clean_name(archive_entry_pathname(entry)) != path) continue;
    if (const char* link = archive_entry_hardlink(entry)) {  // the entry it names holds the data (and the size)
      const std::string target = clean_name(link);
      return LayerEntry{LayerEntryKind::kFile, regular_size(layer, target)};
    }
    switch (archive_entry_filetype(entry)) {
      case AE_IFDIR: return LayerEntry{LayerEntryKind::kDirectory, 0};
      case AE_IFLNK: return LayerEntry{LayerEntryKind::kSymlink, 0};
      case AE_IFREG:
        return LayerEntry{LayerEntryKind::kFile, entry_size(entry)};
      default: return std::nullopt;
    }
  }
  return std::nullopt;
}

void write_from_layer(const std::filesystem::path& layer, const std::string& path, const LayerEntry& entry,
                      const LayerSink& sink) {
  switch (entry.kind) {
    case LayerEntryKind::kFile: return write_file(layer, path, sink);
    case LayerEntryKind::kDirectory: return write_directory(layer, path, sink);
    case LayerEntryKind::kSymlink: return write_symlink(layer, path, sink);
  }
}

}  // namespace capsule::daemon
