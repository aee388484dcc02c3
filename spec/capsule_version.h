// The version of capsule (daemon and CLI): the API's /v1/version answers it and every run pins the one that
// ran it (spec/pinned.h), so both include it from here.
#pragma once

namespace capsule::spec {

inline constexpr const char* kCapsuleVersion = "0.1.0";

}  // namespace capsule::spec
