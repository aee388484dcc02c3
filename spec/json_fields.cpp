// Typed reads of request JSON shared by the limits, the run spec and the pins, with one error shape:
// 400 invalid_spec "<field>: <problem>".
#include "spec/json_fields.h"

#include <regex>

#include "base/units.h"
#include "http/response.h"

namespace capsule::spec {

using nlohmann::json;

void invalid(const std::string& field, const std::string& problem) {
  throw http::ApiError("invalid_spec", field + ": " + problem);
}

void reject_unknown(const json& object, const std::string& where, const std::set<std::string>& known) {
  for (const auto& [key, value] : object.items()) {
    if (!known.count(key)) invalid(where.empty() ? key : where + "." + key, "unknown field");
  }
}

void reject_nul(const std::string& text, const std::string& field) {
  if (text.find('\0') != std::string::npos) invalid(field, "must not contain a NUL byte");
}

std::string string_field(const json& value, const std::string& field) {
  if (!value.is_string()) invalid(field, "must be a string");
  return value.get<std::string>();
}

std::map<std::string, std::string> string_map(const json& value, const std::string& field) {
  if (!value.is_object()) invalid(field, "must be an object of strings");
  std::map<std::string, std::string> out;
  for (const auto& [key, item] : value.items()) out[key] = string_field(item, field + "." + key);
  return out;
}

std::vector<std::string> string_list(const json& value, const std::string& field) {
  if (!value.is_array()) invalid(field, "must be an array of strings");
  std::vector<std::string> out;
  for (std::size_t i = 0; i < value.size(); ++i) out.push_back(string_field(value[i], field + "[" + std::to_string(i) + "]"));
  return out;
}

bool is_count(const json& value) {
  return value.is_number_unsigned() || (value.is_number_integer() && value.get<std::int64_t>() >= 0);
}

// The launcher adds durations to clock readings as int64 nanoseconds; this keeps them far from overflowing (and
// a JSON integer above INT64_MAX from wrapping into a negative duration).
constexpr std::chrono::milliseconds kMaxDuration = std::chrono::hours(24 * 365 * 100);

std::chrono::milliseconds duration_field(const json& value, const std::string& field) {
  std::chrono::milliseconds duration{0};
  if (is_count(value)) {
    if (value.get<std::uint64_t>() > static_cast<std::uint64_t>(kMaxDuration.count())) invalid(field, "must be at most 100 years");
    return std::chrono::milliseconds(value.get<std::uint64_t>());
  }
  if (!value.is_string()) invalid(field, "must be milliseconds or a duration such as \"10m\"");
  try {
    duration = base::parse_duration(value.get<std::string>());
  } catch (const std::exception& e) {
    invalid(field, e.what());
  }
  if (duration > kMaxDuration) invalid(field, "must be at most 100 years");
  return duration;
}

std::uint64_t size_field(const json& value, const std::string& field) {
  if (is_count(value)) return value.get<std::uint64_t>();
  if (!value.is_string()) invalid(field, "must be bytes or a size such as \"4g\"");
  try {
    return base::parse_size(value.get<std::string>());
  } catch (const std::exception& e) {
    invalid(field, e.what());
  }
}

bool is_absolute_clean(const std::string& path) {
  if (path.empty() || path[0] != '/') return false;
  return path.find("/../") == std::string::npos && !path.ends_with("/..") && path.find('\0') == std::string::npos;
}

std::string user_field(const nlohmann::json& value, const std::string& field) {
  const std::string user = string_field(value, field);
  static const std::regex pattern("[A-Za-z0-9_][A-Za-z0-9_.-]{0,31}(:[A-Za-z0-9_][A-Za-z0-9_.-]{0,31})?");
  if (!std::regex_match(user, pattern)) invalid(field, "must be \"USER\" or \"USER:GROUP\" (names or numbers)");
  return user;
}

}  // namespace capsule::spec
