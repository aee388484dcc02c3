// The one map from an error's code to its HTTP status, used at every API edge (capsuled and the package
// proxy), so a code means the same status everywhere. Unknown codes are 500.
#pragma once

#include <string_view>

namespace capsule::http {

unsigned status_for(std::string_view code);

}  // namespace capsule::http
