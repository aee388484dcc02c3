// Standard base64 (RFC 4648, with padding): how ndjson run events carry output bytes exactly
// ("data_b64"), encoded by capsuled and decoded by the CLI.
#pragma once

#include <optional>
#include <string>
#include <string_view>

namespace capsule::base {

std::string base64_encode(std::string_view bytes);
// nullopt when `text` is not canonical padded base64 (wrong length or a character outside the alphabet).
std::optional<std::string> base64_decode(std::string_view text);

}  // namespace capsule::base
