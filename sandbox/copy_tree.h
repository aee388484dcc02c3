// copy_tree_contents: a directory's contents copied as they are (cp -a: every file type, overlayfs whiteouts,
// xattrs, owners, modes, hard links; symlinks copied, never followed). Seeds an overlay's upper from a checkpoint.
#pragma once

#include <string>

namespace capsule::sandbox {

// SOURCE/. into DEST (created if missing). Throws SandboxError (step "copy") when cp cannot run or fails; with
// errno ENOSPC (EDQUOT) when cp said its destination was full, and what cp said last in the detail.
void copy_tree_contents(const std::string& source, const std::string& dest);

}  // namespace capsule::sandbox
