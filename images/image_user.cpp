// Resolution of an image's User field against its /etc/passwd and /etc/group, read from the unpacked layers
// (topmost first, whiteouts respected). The one place these two files are parsed.
#include "images/image_user.h"

#include <fcntl.h>
#include <sys/stat.h>

#include <cerrno>
#include <optional>
#include <sstream>

#include "images/error.h"
#include "base/file_util.h"

namespace capsule::images {
namespace {

constexpr std::uint32_t kMaxId = 0x7fffffff;  // what runc accepts
constexpr std::uint64_t kMaxAccountFile = 16u << 20;  // an image's passwd or group file

// A decimal id within 0..kMaxId; std::nullopt when `text` is not one (a name, or a number out of range).
std::optional<std::uint32_t> parse_id(const std::string& text) {
  if (text.empty() || text.size() > 10 || text.find_first_not_of("0123456789") != std::string::npos) return std::nullopt;
  const std::uint64_t value = std::stoull(text);
  if (value > kMaxId) return std::nullopt;
  return static_cast<std::uint32_t>(value);
}

// The id the User field gives, std::nullopt for a name; numbers out of range are refused as runc does.
std::optional<std::uint32_t> requested_id(const std::string& text, const std::string& user) {
  const std::optional<std::uint32_t> id = parse_id(text);
  if (!id && !text.empty() && text.find_first_not_of("0123456789") == std::string::npos) {
    throw_image_error("user", user, "id " + text + " is out of range (0.." + std::to_string(kMaxId) + ")");
  }
  return id;
}

// The lines of etc/<name> from the topmost layer that has it; empty when none has it or the topmost entry is
// a whiteout (or anything but a regular file).
std::vector<std::vector<std::string>> read_entries(const std::vector<std::string>& layers, const std::string& name) {
  std::vector<std::vector<std::string>> entries;
  const std::string relative = "etc/" + name;
  for (const std::string& layer : layers) {
    const std::string shown = layer + "/" + relative;
    struct stat st {};
    // The layer's own etc/<name>: no symlink on the way may lead out of the layer.
    base::UniqueFd dir = base::open_directory(layer, "user");
    if (fstatat(dir.get(), relative.c_str(), &st, AT_SYMLINK_NOFOLLOW) != 0) {
      if (errno == ENOENT || errno == ENOTDIR) continue;
      throw_image_errno("user", shown, "stat");
    }
    if (!S_ISREG(st.st_mode)) break;
    base::UniqueFd fd = base::open_beneath(dir.get(), relative, O_RDONLY, "user", shown);
    base::require_regular_file(fd.get(), "user", shown);
    std::stringstream in(base::read_fd(fd.get(), kMaxAccountFile, "user", shown));
    for (std::string line; std::getline(in, line);) {
      if (line.empty() || line.front() == '#') continue;
      std::vector<std::string> fields;
      std::stringstream parts(line);
      for (std::string field; std::getline(parts, field, ':');) fields.push_back(field);
      entries.push_back(std::move(fields));
    }
    break;
  }
  return entries;
}

std::string field(const std::vector<std::string>& fields, std::size_t index) {
  return index < fields.size() ? fields[index] : std::string();
}

}  // namespace

ImageUser resolve_image_user(const std::string& user, const std::vector<std::string>& layers) {
  const std::size_t colon = user.find(':');
  const std::string name = user.empty() ? "0" : user.substr(0, colon);
  const std::string group = colon == std::string::npos ? "" : user.substr(colon + 1);
  ImageUser out;

  const std::optional<std::uint32_t> uid = requested_id(name, user);
  bool found = false;
  // name:password:uid:gid:gecos:home:shell; a number matches the uid field, anything else the name.
  for (const auto& entry : read_entries(layers, "passwd")) {
    const auto entry_uid = parse_id(field(entry, 2));
    if (!entry_uid || (uid ? *entry_uid != *uid : field(entry, 0) != name)) continue;
    out.uid = *entry_uid;
    out.gid = parse_id(field(entry, 3)).value_or(0);
    if (!field(entry, 5).empty()) out.home = field(entry, 5);
    found = true;
    break;
  }
  if (!found) {
    if (!uid) throw_image_error("user", user, "not in the image's /etc/passwd");
    out.uid = *uid;
  }

  if (!group.empty()) {
    const std::optional<std::uint32_t> gid = requested_id(group, user);
    if (gid) {
      out.gid = *gid;  // a number need not be listed
    } else {
      found = false;
      // name:password:gid:members
      for (const auto& entry : read_entries(layers, "group")) {
        const auto entry_gid = parse_id(field(entry, 2));
        if (entry_gid && field(entry, 0) == group) {
          out.gid = *entry_gid;
          found = true;
          break;
        }
      }
      if (!found) throw_image_error("user", user, "group " + group + " is not in the image's /etc/group");
    }
  }
  return out;
}

}  // namespace capsule::images
