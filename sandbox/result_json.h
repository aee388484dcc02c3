// JSON form of a sandbox Result, as it appears in run records and `capsule-launch` output.
// The one mapping of Result fields to names.
#pragma once

#include <cstddef>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>

#include "sandbox/result.h"

namespace capsule::sandbox {

// Lines of each stream's end given as "tail_lines" unless the caller asks otherwise (a run's collect.tail_lines).
constexpr std::size_t kDefaultTailLines = 100;
// "tail_lines" are taken from at most this many bytes at the end of the tail.
constexpr std::size_t kMaxTailLinesBytes = 256u << 10;

// tail_lines: how many of each stream's last lines go into its "tail_lines" (at most kMaxTailLinesBytes of it).
nlohmann::json result_to_json(const Result& result, std::size_t tail_lines = kDefaultTailLines);

// Output bytes as JSON-safe text: invalid UTF-8 sequences become U+FFFD, nothing is dropped.
std::string to_valid_utf8(std::string_view bytes);

}  // namespace capsule::sandbox
