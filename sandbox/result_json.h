// JSON form of a sandbox Result, as it appears in run records and `capsule-launch` output.
// The one mapping of Result fields to names.
#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <string_view>

#include "sandbox/result.h"

namespace capsule::sandbox {

nlohmann::json result_to_json(const Result& result);

// Output bytes as JSON-safe text: invalid UTF-8 sequences become U+FFFD, nothing is dropped.
std::string to_valid_utf8(std::string_view bytes);

}  // namespace capsule::sandbox
