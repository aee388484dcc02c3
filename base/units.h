// Parsing of human-written sizes ("512m", "4g") and durations ("90s", "10m", "1500ms") for the CLI.
// The one place these formats are understood; errors name the offending text.
#pragma once

#include <chrono>
#include <cstdint>
#include <string>

namespace capsule::base {

// Bytes; suffixes k, m, g, t (powers of 1024), optional trailing "b"/"ib". Throws std::invalid_argument.
std::uint64_t parse_size(const std::string& text);
// Suffixes ms, s, m, h; a bare number is seconds. Throws std::invalid_argument.
std::chrono::milliseconds parse_duration(const std::string& text);

}  // namespace capsule::base
