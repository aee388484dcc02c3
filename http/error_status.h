// The one map from an error's code to its HTTP status, used at every API edge (capsuled and the package
// proxy), so a code means the same status everywhere. Unknown codes are 500.
#pragma once

#include <exception>
#include <string>
#include <string_view>

namespace capsule::http {

unsigned status_for(std::string_view code);

// The code an API edge answers for an exception escaping a handler: a base::Error's own code, except that a
// failure of capsule's own ("internal_error") caused by a full filesystem (base::is_out_of_space: its cause's
// errno, or a std::system_error's) is "insufficient_storage" (507); any other exception is "internal_error".
std::string error_code_of(const std::exception& error);

}  // namespace capsule::http
