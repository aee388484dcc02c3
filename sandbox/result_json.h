// JSON form of a sandbox Result, as it appears in run records and `capsule-launch` output.
// The one mapping of Result fields to names.
#pragma once

#include <nlohmann/json.hpp>

#include "sandbox/result.h"

namespace capsule::sandbox {

nlohmann::json result_to_json(const Result& result);

}  // namespace capsule::sandbox
