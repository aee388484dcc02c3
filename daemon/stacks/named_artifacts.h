// The artifacts a service's command names, for telling "missing_artifact" from any other early exit: its
// program when given as a path, and every word that is a Java archive (*.jar, *.war, *.ear).
#pragma once

#include <string>
#include <vector>

namespace capsule::daemon {

// Words of argv (and of the script of `sh -c SCRIPT`, split at blanks, quotes and shell operators; a
// classpath's ':' parts too), in order, without repeats; at most 32. Relative ones are as written.
std::vector<std::string> named_artifacts(const std::vector<std::string>& argv);

}  // namespace capsule::daemon
