// The field table of the limits: each limit's JSON name, kind and place in sandbox::Limits, written once and
// used to parse, print, overlay and clamp, so requests, stored specs and the config share one vocabulary.
#include "spec/limits.h"

#include <array>
#include <variant>

#include "sandbox/quota.h"
#include "spec/json_fields.h"

namespace capsule::spec {
namespace {

using nlohmann::json;
using Duration = std::chrono::milliseconds Limits::*;
using Bytes = std::uint64_t Limits::*;
using Cores = double Limits::*;

struct Field {
  const char* name;
  std::variant<Duration, Bytes, Cores> member;
  bool is_size;            // a byte count that accepts "4g" (else a plain count)
  std::uint64_t minimum;   // when given and not 0; the launcher's floors, said here rather than at setup
  const char* minimum_text;
};

const std::array<Field, LimitValues::kFields>& fields() {
  static const std::array<Field, LimitValues::kFields> kFields = {{
      {"wall_time", &Limits::wall_time, false, 0, ""},
      {"cpu_time", &Limits::cpu_time, false, 0, ""},
      {"kill_grace", &Limits::kill_grace, false, 0, ""},
      {"memory", &Limits::memory_bytes, true, 4u << 20, "must be at least 4 MiB"},
      {"pids", &Limits::pids, false, 1, "must be a positive integer"},
      {"cpus", &Limits::cpus, false, 0, ""},
      {"tmp_size", &Limits::tmp_size_bytes, true, 4096, "must be at least 4 KiB"},
      {"output_cap", &Limits::output_cap_bytes, true, 0, ""},
      {"disk", &Limits::disk_bytes, true, sandbox::kMinDiskBytes, "must be at least 16 MiB"},
      {"inodes", &Limits::disk_inodes, true, sandbox::kMinDiskInodes, "must be at least 64"},
  }};
  return kFields;
}

template <typename T>
T clamp_to(T requested, T fallback, T maximum) {
  T value = requested != T{} ? requested : fallback;
  if (maximum != T{} && (value == T{} || value > maximum)) value = maximum;
  return value;
}

}  // namespace

Limits unlimited_limits() {
  Limits limits;
  for (const Field& field : fields()) {
    std::visit([&](auto member) { limits.*member = {}; }, field.member);
  }
  return limits;
}

LimitPolicy default_limit_policy() {
  LimitPolicy policy{unlimited_limits(), unlimited_limits()};
  policy.defaults.wall_time = std::chrono::minutes(15);
  policy.defaults.kill_grace = std::chrono::seconds(5);
  policy.defaults.pids = 4096;
  // Untrusted code gets bounded memory and disk unless the request or the daemon's config says otherwise.
  policy.defaults.memory_bytes = 4ull << 30;
  policy.defaults.tmp_size_bytes = 256ull << 20;  // /tmp and /dev/shm each, charged to the memory limit
  policy.defaults.output_cap_bytes = 1ull << 20;
  policy.defaults.disk_bytes = 10ull << 30;
  policy.defaults.disk_inodes = 1ull << 20;
  policy.maxima.wall_time = std::chrono::hours(6);
  policy.maxima.kill_grace = std::chrono::seconds(60);
  policy.maxima.pids = 65536;
  policy.maxima.tmp_size_bytes = 16ull << 30;
  policy.maxima.output_cap_bytes = 64ull << 20;
  policy.maxima.disk_bytes = 100ull << 30;
  policy.maxima.disk_inodes = 16ull << 20;
  return policy;
}

LimitValues parse_limit_values(const json& object, const std::string& where) {
  if (!object.is_object()) invalid(where, "must be an object");
  std::set<std::string> known;
  for (const Field& field : fields()) known.insert(field.name);
  reject_unknown(object, where, known);
  LimitValues out{unlimited_limits(), {}};
  for (std::size_t i = 0; i < fields().size(); ++i) {
    const Field& field = fields()[i];
    if (!object.contains(field.name)) continue;
    const json& value = object[field.name];
    const std::string name = where + "." + field.name;
    std::uint64_t checked = 0;
    if (const auto* duration = std::get_if<Duration>(&field.member)) {
      out.values.**duration = duration_field(value, name);
    } else if (const auto* bytes = std::get_if<Bytes>(&field.member)) {
      if (field.is_size) {
        checked = size_field(value, name);
      } else {
        if (!is_count(value)) invalid(name, field.minimum_text[0] ? field.minimum_text : "must be a non-negative integer");
        checked = value.get<std::uint64_t>();
      }
      if (field.minimum != 0 && checked < field.minimum && (checked != 0 || field.minimum == 1)) {
        invalid(name, field.minimum_text);
      }
      out.values.**bytes = checked;
    } else {
      if (!value.is_number() || value.get<double>() < 0 || value.get<double>() > 1024) {
        invalid(name, "must be a number of cores, 0 (no limit) up to 1024");
      }
      out.values.*std::get<Cores>(field.member) = value.get<double>();
    }
    out.given.set(i);
  }
  return out;
}

void overlay(Limits& limits, const LimitValues& values) {
  for (std::size_t i = 0; i < fields().size(); ++i) {
    if (!values.given.test(i)) continue;
    std::visit([&](auto member) { limits.*member = values.values.*member; }, fields()[i].member);
  }
}

Limits apply_policy(const LimitValues& requested, const LimitPolicy& policy) {
  Limits out = policy.defaults;
  for (const Field& field : fields()) {
    std::visit([&](auto member) { out.*member = clamp_to(requested.values.*member, policy.defaults.*member, policy.maxima.*member); },
               field.member);
  }
  return out;
}

json limits_to_json(const Limits& limits) {
  json out = json::object();
  for (const Field& field : fields()) {
    std::visit(
        [&](auto member) {
          if constexpr (std::is_same_v<decltype(member), Duration>) out[field.name] = (limits.*member).count();
          else out[field.name] = limits.*member;
        },
        field.member);
  }
  return out;
}

}  // namespace capsule::spec
