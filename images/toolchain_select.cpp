// Picks the image for a toolchain request: the CPython release table (images/data/python-releases.json), the
// as_of date rule for Python, and matching org.capsule.toolchain.<name>=<version> labels of installed images.
#include "images/toolchain_select.h"

#include <algorithm>
#include <array>
#include <cstdio>
#include <fstream>
#include <functional>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>
#include <tuple>
#include <utility>

namespace capsule::images {
namespace {

using nlohmann::json;

bool is_digit(char c) { return c >= '0' && c <= '9'; }
bool is_alpha(char c) { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z'); }

// Digit strings compared as numbers of any length.
int compare_digits(std::string_view a, std::string_view b) {
  while (a.size() > 1 && a.front() == '0') a.remove_prefix(1);
  while (b.size() > 1 && b.front() == '0') b.remove_prefix(1);
  if (a.size() != b.size()) return a.size() < b.size() ? -1 : 1;
  int c = a.compare(b);
  return c < 0 ? -1 : (c > 0 ? 1 : 0);
}

// Runs of digits compare numerically, other runs as text; a shorter run sequence that is a prefix is smaller.
int compare_natural(std::string_view a, std::string_view b) {
  while (!a.empty() && !b.empty()) {
    const bool da = is_digit(a.front()), db = is_digit(b.front());
    if (da != db) return da ? 1 : -1;
    std::size_t na = 0, nb = 0;
    while (na < a.size() && is_digit(a[na]) == da) ++na;
    while (nb < b.size() && is_digit(b[nb]) == db) ++nb;
    const int c = da ? compare_digits(a.substr(0, na), b.substr(0, nb)) : a.substr(0, na).compare(b.substr(0, nb));
    if (c != 0) return c < 0 ? -1 : 1;
    a.remove_prefix(na);
    b.remove_prefix(nb);
  }
  if (a.empty() && b.empty()) return 0;
  return a.empty() ? -1 : 1;
}

// A suffix after a component's number: letters or '~' mark a pre-release (before the bare number),
// anything else ('+', '-', '_') a later build of it.
bool is_pre_release_suffix(std::string_view suffix) { return is_alpha(suffix.front()) || suffix.front() == '~'; }

int compare_component(std::string_view a, std::string_view b) {
  std::size_t na = 0, nb = 0;
  while (na < a.size() && is_digit(a[na])) ++na;
  while (nb < b.size() && is_digit(b[nb])) ++nb;
  if (na == 0 || nb == 0) {  // no number: sorts below any number
    if (na != nb) return na == 0 ? -1 : 1;
    return compare_natural(a, b);
  }
  if (int c = compare_digits(a.substr(0, na), b.substr(0, nb)); c != 0) return c;
  const std::string_view sa = a.substr(na), sb = b.substr(nb);
  if (sa.empty() && sb.empty()) return 0;
  if (sa.empty()) return is_pre_release_suffix(sb) ? 1 : -1;
  if (sb.empty()) return is_pre_release_suffix(sa) ? -1 : 1;
  return compare_natural(sa, sb);
}

std::vector<std::string_view> split_dots(std::string_view v) {
  std::vector<std::string_view> parts;
  std::size_t start = 0;
  while (true) {
    const std::size_t dot = v.find('.', start);
    parts.push_back(v.substr(start, dot == std::string_view::npos ? std::string_view::npos : dot - start));
    if (dot == std::string_view::npos) return parts;
    start = dot + 1;
  }
}

// "3.12.8" -> {3, 12, 8}; no leading zeros, exactly three numbers.
std::optional<std::array<unsigned, 3>> parse_xyz(std::string_view v) {
  const auto parts = split_dots(v);
  if (parts.size() != 3) return std::nullopt;
  std::array<unsigned, 3> out{};
  for (std::size_t i = 0; i < 3; ++i) {
    const std::string_view p = parts[i];
    if (p.empty() || p.size() > 6 || (p.size() > 1 && p.front() == '0')) return std::nullopt;
    unsigned n = 0;
    for (char c : p) {
      if (!is_digit(c)) return std::nullopt;
      n = n * 10 + static_cast<unsigned>(c - '0');
    }
    out[i] = n;
  }
  return out;
}

std::string minor_of(const std::array<unsigned, 3>& v) { return std::to_string(v[0]) + "." + std::to_string(v[1]); }

[[noreturn]] void bad_data(const std::string& origin, const std::string& what) {
  throw ToolchainError("invalid_release_data", origin + ": " + what);
}

}  // namespace

// ---------------------------------------------------------------------------------------------------------
// Dates and versions
// ---------------------------------------------------------------------------------------------------------

Date one_year_before(Date d) {
  Date r = d - std::chrono::years{1};
  if (!r.ok()) r = Date{std::chrono::year_month_day_last{r.year(), std::chrono::month_day_last{r.month()}}};
  return r;
}

int compare_versions(std::string_view a, std::string_view b) {
  const auto pa = split_dots(a), pb = split_dots(b);
  for (std::size_t i = 0; i < std::min(pa.size(), pb.size()); ++i) {
    if (int c = compare_component(pa[i], pb[i]); c != 0) return c;
  }
  if (pa.size() == pb.size()) return 0;
  return pa.size() < pb.size() ? -1 : 1;
}

bool version_matches_prefix(std::string_view version, std::string_view prefix) {
  if (prefix.empty() || !version.starts_with(prefix)) return false;
  return version.size() == prefix.size() || version[prefix.size()] == '.' || version[prefix.size()] == '+';
}

bool is_valid_version(std::string_view v) {
  if (v.empty() || v.size() > 128 || !is_digit(v.front()) || v.back() == '.') return false;
  for (std::size_t i = 0; i < v.size(); ++i) {
    const char c = v[i];
    if (!(is_digit(c) || is_alpha(c) || c == '.' || c == '+' || c == '_' || c == '~' || c == '-')) return false;
    if (c == '.' && i + 1 < v.size() && v[i + 1] == '.') return false;
  }
  return true;
}

// ---------------------------------------------------------------------------------------------------------
// The release table
// ---------------------------------------------------------------------------------------------------------

PythonReleases PythonReleases::load(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw ToolchainError("invalid_release_data", path + ": cannot open the Python release table");
  std::ostringstream text;
  text << in.rdbuf();
  if (in.bad()) throw ToolchainError("invalid_release_data", path + ": read error");
  return parse(text.str(), path);
}

PythonReleases PythonReleases::parse(std::string_view text, const std::string& origin) {
  json doc;
  try {
    doc = json::parse(text);
  } catch (const json::exception& e) {
    bad_data(origin, std::string("not valid JSON: ") + e.what());
  }
  if (!doc.is_object()) bad_data(origin, "the top level must be an object");
  static const std::set<std::string> kTopKeys = {"schema", "description", "source", "complete_through", "minors",
                                                 "releases"};
  for (const auto& [key, value] : doc.items()) {
    if (!kTopKeys.contains(key)) bad_data(origin, "unknown key \"" + key + "\"");
  }
  if (!doc.contains("schema") || doc["schema"] != 1) bad_data(origin, "\"schema\" must be 1");

  PythonReleases out;
  out.origin_ = origin;
  if (!doc.contains("source") || !doc["source"].is_string() || doc["source"].get<std::string>().empty()) {
    bad_data(origin, "\"source\" (where the dates come from) must be a non-empty string");
  }
  out.source_ = doc["source"].get<std::string>();
  const auto through = doc.contains("complete_through") && doc["complete_through"].is_string()
                           ? base::parse_date(doc["complete_through"].get<std::string>())
                           : std::nullopt;
  if (!through) bad_data(origin, "\"complete_through\" must be a YYYY-MM-DD date");
  out.complete_through_ = *through;

  std::set<std::string> minors;
  if (!doc.contains("minors") || !doc["minors"].is_object()) bad_data(origin, "\"minors\" must be an object");
  for (const auto& [minor, info] : doc["minors"].items()) {
    const auto xy0 = parse_xyz(minor + ".0");
    if (!xy0 || (*xy0)[0] != 3) bad_data(origin, "minors: \"" + minor + "\" is not 3.Y");
    if (!info.is_object() || info.size() != 1 || !info.contains("pep") || !info["pep"].is_number_unsigned()) {
      bad_data(origin, "minors." + minor + ": must be {\"pep\": <release schedule PEP number>}");
    }
    minors.insert(minor);
  }

  if (!doc.contains("releases") || !doc["releases"].is_array() || doc["releases"].empty()) {
    bad_data(origin, "\"releases\" must be a non-empty array");
  }
  std::vector<std::pair<std::array<unsigned, 3>, PythonRelease>> parsed;
  std::set<std::array<unsigned, 3>> seen;
  std::size_t index = 0;
  for (const auto& entry : doc["releases"]) {
    const std::string where = "releases[" + std::to_string(index++) + "]";
    if (!entry.is_object()) bad_data(origin, where + ": must be an object");
    for (const auto& [key, value] : entry.items()) {
      if (key != "version" && key != "date" && key != "recalled" && key != "note") {
        bad_data(origin, where + ": unknown key \"" + key + "\"");
      }
    }
    if (!entry.contains("version") || !entry["version"].is_string()) bad_data(origin, where + ": no \"version\"");
    PythonRelease r;
    r.version = entry["version"].get<std::string>();
    const std::string what = where + " (" + r.version + ")";
    const auto xyz = parse_xyz(r.version);
    if (!xyz || (*xyz)[0] != 3) bad_data(origin, what + ": version must be 3.Y.Z");
    if (!minors.contains(minor_of(*xyz))) bad_data(origin, what + ": minor " + minor_of(*xyz) + " is not in \"minors\"");
    if (!seen.insert(*xyz).second) bad_data(origin, what + ": listed twice");
    const auto date = entry.contains("date") && entry["date"].is_string() ? base::parse_date(entry["date"].get<std::string>())
                                                                          : std::nullopt;
    if (!date) bad_data(origin, what + ": \"date\" must be a YYYY-MM-DD date");
    if (*date > out.complete_through_) {
      bad_data(origin, what + ": dated after complete_through " + base::format_date(out.complete_through_));
    }
    r.date = *date;
    if (entry.contains("recalled")) {
      if (!entry["recalled"].is_boolean()) bad_data(origin, what + ": \"recalled\" must be true or false");
      r.recalled = entry["recalled"].get<bool>();
    }
    if (entry.contains("note") && !entry["note"].is_string()) bad_data(origin, what + ": \"note\" must be a string");
    parsed.emplace_back(*xyz, std::move(r));
  }
  std::sort(parsed.begin(), parsed.end(), [](const auto& a, const auto& b) { return a.first < b.first; });
  for (std::size_t i = 0; i < parsed.size(); ++i) {
    const auto& [v, r] = parsed[i];
    const bool first_of_minor = i == 0 || parsed[i - 1].first[0] != v[0] || parsed[i - 1].first[1] != v[1];
    if (first_of_minor && v[2] != 0) bad_data(origin, r.version + ": " + minor_of(v) + ".0 is missing");
    if (!first_of_minor && parsed[i - 1].first[2] + 1 != v[2]) {
      bad_data(origin, r.version + ": " + minor_of(v) + "." + std::to_string(v[2] - 1) + " is missing");
    }
    if (!first_of_minor && r.date < parsed[i - 1].second.date) {
      bad_data(origin, r.version + ": dated before " + parsed[i - 1].second.version);
    }
  }
  for (auto& [v, r] : parsed) out.releases_.push_back(std::move(r));
  return out;
}

const PythonRelease* PythonReleases::find(std::string_view version) const {
  for (const auto& r : releases_) {
    if (r.version == version) return &r;
  }
  return nullptr;
}

// ---------------------------------------------------------------------------------------------------------
// The date rule
// ---------------------------------------------------------------------------------------------------------

PythonForDate python_for_date(const PythonReleases& table, Date as_of) {
  if (as_of > table.complete_through()) {
    const std::string last = base::format_date(table.complete_through());
    throw ToolchainError("release_data_outdated",
                         "as_of " + base::format_date(as_of) + " is after " + last + ", the last day the Python release "
                         "table " + table.origin() + " covers (a newer release could be the answer); use an as_of "
                         "on or before " + last + ", or refresh the table from a clone of "
                         "https://github.com/python/peps with scripts/refresh-python-releases.py PEPS_CLONE (docs/api.md, "
                         "Toolchains) and restart capsuled");
  }
  const Date cutoff = one_year_before(as_of);
  constexpr std::array<unsigned, 3> kFloor{3, 6, 0};
  // Releases are sorted by version, so the last qualifying X.Y.0 is the newest minor.
  std::optional<std::array<unsigned, 3>> minor;
  Date minor_date{};
  const PythonRelease* floor_zero = nullptr;
  for (const auto& r : table.releases()) {
    const auto v = *parse_xyz(r.version);
    if (v < kFloor || v[2] != 0) continue;
    if (v == kFloor) floor_zero = &r;
    if (r.date <= cutoff) {
      minor = v;
      minor_date = r.date;
    }
  }
  const bool floored = !minor;
  if (floored) {
    if (!floor_zero) throw ToolchainError("invalid_release_data", "the Python release table has no 3.6.0");
    minor = kFloor;
    minor_date = floor_zero->date;
  }
  PythonForDate out;
  out.minor = minor_of(*minor);
  out.minor_released = minor_date;
  const PythonRelease* pick = nullptr;
  for (const auto& r : table.releases()) {
    const auto v = *parse_xyz(r.version);
    if (v[0] == (*minor)[0] && v[1] == (*minor)[1] && r.date <= as_of && !r.recalled) pick = &r;
  }
  const std::string d = "as_of " + base::format_date(as_of) + ": ";
  if (!pick) {  // only possible below the floor: as_of precedes 3.6.0
    out.version = floor_zero->version;
    out.released = floor_zero->date;
    out.reason = d + "precedes 3.6.0 (" + base::format_date(floor_zero->date) + "); the floor 3.6.0 is used";
    return out;
  }
  out.version = pick->version;
  out.released = pick->date;
  const std::string patch = pick->version + " (" + base::format_date(pick->date) + ") is its newest release by then";
  if (floored) {
    out.reason = d + "no minor from 3.6 on was released a year earlier (by " + base::format_date(cutoff) +
                 "), so the floor 3.6 applies; " + patch;
  } else {
    out.reason = d + out.minor + " is the newest minor released at least a year earlier (" + out.minor + ".0 on " +
                 base::format_date(minor_date) + " <= " + base::format_date(cutoff) + "); " + patch;
  }
  return out;
}

// ---------------------------------------------------------------------------------------------------------
// Matching images
// ---------------------------------------------------------------------------------------------------------

namespace {

bool is_valid_toolchain_name(std::string_view n) {
  if (n.empty() || n.size() > 64 || !(is_digit(n.front()) || (n.front() >= 'a' && n.front() <= 'z'))) return false;
  return std::all_of(n.begin(), n.end(), [](char c) {
    return is_digit(c) || (c >= 'a' && c <= 'z') || c == '.' || c == '-' || c == '_';
  });
}

// The image's version for `name`, when it declares a valid one.
std::optional<std::string> label_version(const ImageCandidate& image, const std::string& name) {
  const auto it = image.labels.find(std::string(kToolchainLabelPrefix) + name);
  if (it == image.labels.end() || !is_valid_version(it->second)) return std::nullopt;
  return it->second;
}

struct Wanted {
  std::string spec;  // prefix, or the exact version for auto
  bool exact = false;
};

bool provides(const ImageCandidate& image, const std::string& name, const Wanted& w) {
  const auto v = label_version(image, name);
  return v && (w.exact ? *v == w.spec : version_matches_prefix(*v, w.spec));
}

std::string join(const std::vector<std::string>& items, const std::string& sep) {
  std::string out;
  for (std::size_t i = 0; i < items.size(); ++i) out += (i ? sep : "") + items[i];
  return out;
}

struct VersionLess {
  bool operator()(const std::string& a, const std::string& b) const { return compare_versions(a, b) < 0; }
};

std::string short_digest(const std::string& digest) { return digest.size() > 19 ? digest.substr(0, 19) : digest; }

}  // namespace

ToolchainRequest parse_toolchain_request(const json& toolchains, std::string_view as_of) {
  ToolchainRequest req;
  if (!toolchains.is_object()) {
    throw ToolchainError("invalid_request", "toolchains must be an object such as {\"python\": \"3.11\"}");
  }
  for (const auto& [name, spec] : toolchains.items()) {
    if (!spec.is_string()) {
      throw ToolchainError("invalid_request", "toolchains." + name + " must be a string (a version or \"auto\")");
    }
    req.toolchains[name] = spec.get<std::string>();
  }
  if (!as_of.empty()) {
    req.as_of = base::parse_date(as_of);
    if (!req.as_of) throw ToolchainError("invalid_request", "as_of must be a YYYY-MM-DD date, got \"" + std::string(as_of) + "\"");
  }
  return req;
}

ToolchainChoice select_toolchain_image(const std::vector<ImageCandidate>& images, const ToolchainRequest& request,
                                       const PythonReleases* releases) {
  if (request.toolchains.empty()) throw ToolchainError("invalid_request", "no toolchain requested");
  ToolchainChoice choice;
  std::map<std::string, Wanted> wanted;
  for (const auto& [name, spec] : request.toolchains) {
    if (!is_valid_toolchain_name(name)) {
      throw ToolchainError("invalid_request", "toolchain name \"" + name + "\" is not [a-z0-9][a-z0-9._-]*");
    }
    if (spec == "auto") {
      if (name != "python") {
        throw ToolchainError("invalid_request", "\"auto\" is defined for python only (asked for " + name + ")");
      }
      if (!request.as_of) throw ToolchainError("invalid_request", "python \"auto\" needs an as_of date");
      if (!releases) throw ToolchainError("invalid_release_data", "python \"auto\" needs the Python release table");
      choice.python_auto = python_for_date(*releases, *request.as_of);
      wanted[name] = {choice.python_auto->version, true};
    } else {
      if (!is_valid_version(spec)) {
        throw ToolchainError("invalid_request", "toolchains." + name + ": \"" + spec + "\" is not a version or \"auto\"");
      }
      wanted[name] = {spec, false};
    }
    choice.wanted[name] = wanted[name].spec;
  }

  auto provides_all = [&](const ImageCandidate& image) {
    return std::all_of(wanted.begin(), wanted.end(), [&](const auto& w) { return provides(image, w.first, w.second); });
  };
  std::vector<const ImageCandidate*> matching;
  for (const auto& image : images) {
    if (image.unusable.empty() && provides_all(image)) matching.push_back(&image);
  }

  if (matching.empty()) {
    auto needed = [&](const std::string& name) {
      const Wanted& w = wanted.at(name);
      std::string s = name + " " + w.spec;
      if (w.exact && choice.python_auto) s += " (needed for as_of " + base::format_date(*request.as_of) + ")";
      return s;
    };
    auto label_hint = [&](const std::string& name) {
      const Wanted& w = wanted.at(name);
      return std::string(kToolchainLabelPrefix) + name + "=" + w.spec + (w.exact ? "" : " (or any " + w.spec + ".x version)");
    };
    // Candidates that would have matched but cannot run, e.g. a layer whose base is not installed.
    auto unusable_note = [&](const std::function<bool(const ImageCandidate&)>& would_match) {
      std::string note;
      for (const auto& image : images) {
        if (!image.unusable.empty() && would_match(image)) note += "; " + image.ref + " would, but " + image.unusable;
      }
      return note;
    };
    for (const auto& entry : wanted) {
      const std::string& name = entry.first;  // a plain reference: clang 14 cannot capture structured bindings
      const Wanted& w = entry.second;
      auto provides_it = [&](const ImageCandidate& i) { return provides(i, name, w); };
      const auto any = std::any_of(images.begin(), images.end(),
                                   [&](const ImageCandidate& i) { return i.unusable.empty() && provides_it(i); });
      if (any) continue;
      std::set<std::string, VersionLess> installed;
      for (const auto& image : images) {
        if (auto v = label_version(image, name)) installed.insert(*v);
      }
      std::string msg = "no installed image provides " + needed(name) + "; import one with " + label_hint(name);
      msg += installed.empty() ? "; no installed image declares " + name
                               : "; installed " + name + " versions: " +
                                     join(std::vector<std::string>(installed.begin(), installed.end()), ", ");
      throw ToolchainError("no_matching_image", msg + unusable_note(provides_it));
    }
    std::vector<std::string> all, hints;
    for (const auto& [name, w] : wanted) {
      all.push_back(needed(name));
      hints.push_back(label_hint(name));
    }
    throw ToolchainError("no_matching_image", "no installed image provides " + join(all, " and ") +
                                                  " together; import one with " + join(hints, " and ") +
                                                  unusable_note(provides_all));
  }

  // Newest versions first (toolchain by toolchain in name order), then a stand-alone image before a layer
  // stacked on its base (which inherits the base's labels), then the image with the fewest toolchains nobody
  // asked for (python3-base over python3 + pytest: what a run installs itself decides its test tools), then
  // newest created, then smallest ref.
  auto unasked = [&](const ImageCandidate& image) {
    std::size_t count = 0;
    for (const auto& [label, value] : image.labels) {
      if (label.rfind(kToolchainLabelPrefix, 0) != 0) continue;
      if (!wanted.count(label.substr(std::string_view(kToolchainLabelPrefix).size()))) ++count;
    }
    return count;
  };
  auto better = [&](const ImageCandidate* a, const ImageCandidate* b) {
    for (const auto& [name, w] : wanted) {
      if (int c = compare_versions(*label_version(*a, name), *label_version(*b, name)); c != 0) return c > 0;
    }
    if (a->base_digest.empty() != b->base_digest.empty()) return a->base_digest.empty();
    if (const std::size_t ua = unasked(*a), ub = unasked(*b); ua != ub) return ua < ub;
    const auto ca = base::parse_instant(a->created, false), cb = base::parse_instant(b->created, false);
    if (ca != cb) return cb < ca;  // std::nullopt (unknown) is the oldest
    return std::tie(a->ref, a->digest) < std::tie(b->ref, b->digest);
  };
  std::sort(matching.begin(), matching.end(), better);
  const ImageCandidate& best = *matching.front();
  choice.image = best;
  choice.matching_images = matching.size();
  std::vector<std::string> parts;
  for (const auto& [name, w] : wanted) {
    choice.provided[name] = *label_version(best, name);
    std::string part = name + " " + choice.provided[name] + (w.exact ? " (exactly " : " (matches ") + w.spec + ")";
    if (w.exact && choice.python_auto) part += " [" + choice.python_auto->reason + "]";
    parts.push_back(part);
  }
  choice.reason = best.ref + " (" + short_digest(best.digest) + ")";
  if (!best.base_digest.empty()) {
    choice.reason += " stacked on " + best.base_ref + " (" + short_digest(best.base_digest) + ")";
  }
  choice.reason += " provides " + join(parts, ", ");
  if (matching.size() == 1) {
    choice.reason += "; the only matching image";
  } else {
    const ImageCandidate& next = *matching[1];
    std::string why = "newer toolchain versions";
    bool same_versions = std::all_of(wanted.begin(), wanted.end(), [&](const auto& w) {
      return compare_versions(*label_version(best, w.first), *label_version(next, w.first)) == 0;
    });
    if (same_versions && best.base_digest.empty() != next.base_digest.empty()) {
      why = "same versions, without stacking a layer";
    } else if (same_versions && unasked(best) != unasked(next)) {
      why = "same versions, fewest toolchains not asked for";
    } else if (same_versions) {
      why = base::parse_instant(best.created, false) != base::parse_instant(next.created, false) ? "same versions, newest created time ("
                                                                             + best.created + ")"
                                                                       : "same versions and created time, first by name";
    }
    choice.reason += "; chosen among " + std::to_string(matching.size()) + " matching images (" + why + ")";
  }
  return choice;
}

}  // namespace capsule::images
