// ImageUser: the run's user in an image — its User config field resolved against the image's own /etc/passwd
// and /etc/group the way Docker (runc) does it — with the home directory HOME defaults to.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace capsule::images {

struct ImageUser {
  std::uint32_t uid = 0;
  std::uint32_t gid = 0;
  std::string home = "/";  // the passwd entry's home; "/" when the user has no entry (as runc does, root too)
};

// `user`: "", "name", "uid", each optionally with ":group" or ":gid" (empty means uid 0). `layers`: unpacked
// layer dirs, topmost first; the topmost layer holding etc/passwd (etc/group) decides, and a whiteout there
// hides the file. A user found in passwd gets its uid, primary gid and home; a number not found is used as
// is with gid 0 and home "/". Names not found, and ids outside 0..2^31-1, throw ImageError{step "user"}.
ImageUser resolve_image_user(const std::string& user, const std::vector<std::string>& layers);

}  // namespace capsule::images
