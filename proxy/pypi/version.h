// Versions on a PyPI project page: the version a distribution filename carries, and the PEP 440 canonical form
// that decides whether two spellings ("1.0.0RC1", "v1.0-rc.1") name the same release.
#pragma once

#include <string>
#include <string_view>

namespace capsule::proxy::pypi {

// The version in a distribution filename, as written there ("1.0", "2.0rc1", "1.0_rc1" for wheels, which
// escape '-'), or "" when the name is not one we recognize:
// - wheels (PEP 427) "name-version(-build)?-python-abi-platform.whl";
// - sdists "name-version" + .tar.gz/.tgz/.tar.bz2/.tar.xz/.tar/.zip, where the name part is matched
//   case- and separator-insensitively against `project` (project names contain '-'); when it does not match,
//   the version starts after the first '-' that is followed by a digit;
// - eggs "name-version(-pyX.Y(-platform)?)?.egg" (both parts escaped, like wheels);
// - bdist_wininst/bdist_msi "name-version.win32(-pyX.Y)?.exe/.msi".
std::string version_from_filename(std::string_view filename, std::string_view project);

// PEP 440 canonical form, as packaging's canonicalize_version: lowercase, no leading 'v', zero epoch dropped,
// leading zeros and trailing ".0" release components dropped, pre/post/dev spellings normalized
// ("1.0.0-ALPHA.1" -> "1a1", "1.0-r" -> "1.post0", "1.0+Ubuntu-1" -> "1+ubuntu.1"). Text that is not PEP 440 is
// only lowercased and trimmed.
std::string canonical_version(std::string_view version);

}  // namespace capsule::proxy::pypi
