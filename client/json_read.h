// Lenient readers of capsuled's JSON answers for the CLI: a missing or mistyped field reads as empty or zero
// and never throws, so a command prints what it can of an answer from an older or newer daemon.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>

namespace capsule::client {

// object[key] when it is a number, else `fallback`.
inline std::int64_t number(const nlohmann::json& object, const char* key, std::int64_t fallback = 0) {
  if (!object.is_object() || !object.contains(key) || !object[key].is_number()) return fallback;
  return object[key].get<std::int64_t>();
}

// object[key] as text: a string as is, any other value as its JSON, missing or null as "".
inline std::string text(const nlohmann::json& object, const char* key) {
  if (!object.is_object() || !object.contains(key) || object[key].is_null()) return "";
  return object[key].is_string() ? object[key].get<std::string>() : object[key].dump();
}

// object[key] when it is an object, else an empty object.
inline const nlohmann::json& member(const nlohmann::json& object, const char* key) {
  static const nlohmann::json empty = nlohmann::json::object();
  return object.is_object() && object.contains(key) && object[key].is_object() ? object[key] : empty;
}

}  // namespace capsule::client
