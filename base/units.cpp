// Size and duration parsing for command-line flags.
// Overflow and junk are rejected rather than wrapped or ignored.
#include "base/units.h"

#include <cctype>
#include <cmath>
#include <stdexcept>

namespace capsule::base {
namespace {

// Splits "12.5m" into 12.5 and "m"; rejects empty numbers and negative values.
double split_number(const std::string& text, std::string* suffix) {
  std::size_t end = 0;
  while (end < text.size() && (std::isdigit(static_cast<unsigned char>(text[end])) || text[end] == '.')) ++end;
  if (end == 0) throw std::invalid_argument("'" + text + "' does not start with a number");
  double value = std::stod(text.substr(0, end));
  *suffix = text.substr(end);
  for (auto& c : *suffix) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return value;
}

}  // namespace

std::uint64_t parse_size(const std::string& text) {
  std::string suffix;
  double value = split_number(text, &suffix);
  if (suffix.ends_with("ib")) suffix.resize(suffix.size() - 2);
  else if (suffix.ends_with("b")) suffix.resize(suffix.size() - 1);
  double scale = 1;
  if (suffix == "k") scale = 1024.0;
  else if (suffix == "m") scale = 1024.0 * 1024;
  else if (suffix == "g") scale = 1024.0 * 1024 * 1024;
  else if (suffix == "t") scale = 1024.0 * 1024 * 1024 * 1024;
  else if (!suffix.empty()) throw std::invalid_argument("'" + text + "': unknown size suffix '" + suffix + "'");
  double bytes = std::floor(value * scale);
  if (bytes > 1.8e19) throw std::invalid_argument("'" + text + "' is too large");
  return static_cast<std::uint64_t>(bytes);
}

std::chrono::milliseconds parse_duration(const std::string& text) {
  std::string suffix;
  double value = split_number(text, &suffix);
  double ms;
  if (suffix == "ms") ms = value;
  else if (suffix.empty() || suffix == "s") ms = value * 1000;
  else if (suffix == "m") ms = value * 60000;
  else if (suffix == "h") ms = value * 3600000;
  else throw std::invalid_argument("'" + text + "': unknown duration suffix '" + suffix + "'");
  if (ms > 1e15) throw std::invalid_argument("'" + text + "' is too long");
  return std::chrono::milliseconds(static_cast<std::int64_t>(ms));
}

}  // namespace capsule::base
