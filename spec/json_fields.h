// Typed reads of request JSON for spec/: each refuses a wrong type with 400 invalid_spec naming the field
// ("limits.memory: must be ..."), so every parser here reports problems the same way.
#pragma once

#include <chrono>
#include <cstdint>
#include <map>
#include <nlohmann/json.hpp>
#include <set>
#include <string>
#include <vector>

namespace capsule::spec {

// Throws http::ApiError("invalid_spec", "<field>: <problem>").
[[noreturn]] void invalid(const std::string& field, const std::string& problem);
// Refuses any key of `object` not in `known` ("where.key: unknown field").
void reject_unknown(const nlohmann::json& object, const std::string& where, const std::set<std::string>& known);
// execve takes C strings: a NUL byte would silently cut an argument or a variable short.
void reject_nul(const std::string& text, const std::string& field);

std::string string_field(const nlohmann::json& value, const std::string& field);
std::map<std::string, std::string> string_map(const nlohmann::json& value, const std::string& field);
std::vector<std::string> string_list(const nlohmann::json& value, const std::string& field);
// A non-negative JSON integer (clients write signed ones).
bool is_count(const nlohmann::json& value);
// Milliseconds as an integer or a duration such as "10m"; at most 100 years.
std::chrono::milliseconds duration_field(const nlohmann::json& value, const std::string& field);
// Bytes as an integer or a size such as "4g".
std::uint64_t size_field(const nlohmann::json& value, const std::string& field);
// Who a process runs as inside a box, as an image config's User says it: "name", "uid", each optionally with
// ":group" or ":gid" (resolved against the image's /etc/passwd and /etc/group by images/image_user.h).
std::string user_field(const nlohmann::json& value, const std::string& field);
// An absolute path without "..".
bool is_absolute_clean(const std::string& path);

}  // namespace capsule::spec
