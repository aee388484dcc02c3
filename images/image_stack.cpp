// Composition of images at run time: merged configs (Env with PATH joined, Labels, WorkingDir, User), the
// layer dirs of a stack, and toolchain candidates for layer images labelled with their base.
#include "images/image_stack.h"

#include <algorithm>
#include <set>
#include <string>

#include "images/error.h"
#include "images/image_ref.h"

namespace capsule::images {
namespace {

std::string env_name(const std::string& entry) { return entry.substr(0, entry.find('=')); }
std::string env_value(const std::string& entry) {
  const std::size_t eq = entry.find('=');
  return eq == std::string::npos ? std::string() : entry.substr(eq + 1);
}

// `first`'s entries, then `second`'s not yet listed; empty entries (the current directory) are dropped.
std::string join_paths(const std::string& first, const std::string& second) {
  std::string out;
  std::set<std::string> seen;
  for (const std::string* list : {&first, &second}) {
    std::size_t start = 0;
    while (start <= list->size()) {
      const std::size_t colon = std::min(list->find(':', start), list->size());
      const std::string entry = list->substr(start, colon - start);
      if (!entry.empty() && seen.insert(entry).second) out += (out.empty() ? "" : ":") + entry;
      start = colon + 1;
    }
  }
  return out;
}

const ImageInfo* find_image(const std::vector<ImageInfo>& installed, const ImageRef& ref) {
  for (const ImageInfo& image : installed) {
    const bool match = ref.by_digest() ? image.manifest_digest == *ref.digest
                                       : std::find(image.refs.begin(), image.refs.end(), ref.str()) != image.refs.end();
    if (match) return &image;
  }
  return nullptr;
}

// "org.capsule.committed.from_run=<id>" when `image` was committed from a run's or session's changes, else empty.
std::string committed_from(const ImageInfo& image) {
  const auto it = image.config.labels.lower_bound(std::string(kCommittedLabelPrefix));
  if (it == image.config.labels.end() || it->first.rfind(kCommittedLabelPrefix, 0) != 0) return "";
  return it->first + "=" + it->second;
}

}  // namespace

ImageConfig merge_configs(const ImageConfig& below, const ImageConfig& top) {
  ImageConfig out = below;
  for (const std::string& entry : top.env) {
    const std::string name = env_name(entry);
    auto it = std::find_if(out.env.begin(), out.env.end(), [&](const std::string& e) { return env_name(e) == name; });
    if (it == out.env.end()) {
      out.env.push_back(entry);
    } else if (name == "PATH") {
      *it = "PATH=" + join_paths(env_value(entry), env_value(*it));
    } else {
      *it = entry;
    }
  }
  for (const auto& [key, value] : top.labels) out.labels[key] = value;
  if (!top.working_dir.empty()) out.working_dir = top.working_dir;
  if (!top.user.empty()) out.user = top.user;
  out.diff_ids.insert(out.diff_ids.end(), top.diff_ids.begin(), top.diff_ids.end());
  return out;
}

ImageStack stack_images(const std::vector<ImageInfo>& images) {
  if (images.empty()) throw_image_error("stack", "", "no image to stack");
  ImageStack stack;
  stack.config = images.front().config;
  for (std::size_t i = 0; i < images.size(); ++i) {
    stack.digests.push_back(images[i].manifest_digest);
    if (i > 0) stack.config = merge_configs(stack.config, images[i].config);
  }
  // Topmost first. A layer shared by two images appears once, at its upper place: the lower copy is shadowed
  // by identical content, and overlayfs refuses the same lower dir twice.
  std::set<std::string> seen;
  for (auto image = images.rbegin(); image != images.rend(); ++image) {
    for (const std::string& dir : image->layer_dirs) {
      if (seen.insert(dir).second) stack.layer_dirs.push_back(dir);
    }
  }
  if (stack.layer_dirs.size() > kMaxStackLayers) {
    throw_image_error("stack", images.back().manifest_digest.str(),
                      std::to_string(stack.layer_dirs.size()) + " layers; at most " +
                          std::to_string(kMaxStackLayers) + " can be stacked");
  }
  return stack;
}

std::vector<ImageCandidate> toolchain_candidates(const std::vector<ImageInfo>& installed) {
  std::vector<ImageCandidate> out;
  for (const ImageInfo& image : installed) {
    ImageCandidate candidate;
    candidate.ref = image.refs.empty() ? image.manifest_digest.str() : image.refs.front();
    candidate.digest = image.manifest_digest.str();
    candidate.labels = image.config.labels;
    if (const std::string committed = committed_from(image); !committed.empty()) {
      candidate.unusable = "it holds a run's committed outputs (" + committed + "): chosen only by its ref";
      out.push_back(std::move(candidate));
      continue;
    }
    const auto base_label = image.config.labels.find(std::string(kLayerBaseLabel));
    if (base_label != image.config.labels.end()) {
      candidate.base_ref = base_label->second;
      const ImageInfo* base = nullptr;
      try {
        base = find_image(installed, ImageRef::parse(base_label->second));
        if (base == nullptr) candidate.unusable = "its base " + base_label->second + " is not installed";
      } catch (const base::Error& e) {
        candidate.unusable = std::string(kLayerBaseLabel) + " is not an image ref (" + e.what() + ")";
      }
      if (base != nullptr && base->config.labels.count(std::string(kLayerBaseLabel)) != 0) {
        candidate.unusable = "its base " + base_label->second + " is itself a toolchain layer";
      } else if (base != nullptr && !committed_from(*base).empty()) {
        candidate.unusable = "its base " + base_label->second + " holds a run's committed outputs";
      } else if (base != nullptr) {
        candidate.base_digest = base->manifest_digest.str();
        candidate.labels = merge_configs(base->config, image.config).labels;
      }
    }
    out.push_back(std::move(candidate));
  }
  return out;
}

}  // namespace capsule::images
