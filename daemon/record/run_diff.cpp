// diff_runs: two run objects compared section by section; every list is sorted (by name, url or path) and
// bounded, so the answer stays small whatever the records hold.
#include "daemon/record/run_diff.h"

#include <map>
#include <set>
#include <string>

#include "daemon/record/run_verdict.h"
#include "daemon/record/test_loss.h"

namespace capsule::daemon {
namespace {

using nlohmann::json;

json pair_of(const json& a, const json& b) { return {{"a", a}, {"b", b}}; }

// Appends `entry` unless `list` is full, which sets `truncated`.
void add_bounded(json& list, json entry, std::size_t max_listed, bool& truncated) {
  if (list.size() < max_listed) list.push_back(std::move(entry));
  else truncated = true;
}

json test_counts(const json& run) {
  const auto tests = run.find("tests");
  if (tests == run.end() || !tests->is_object()) return nullptr;
  json counts = json::object();
  for (const char* key : {"total", "failed", "errors", "skipped"}) counts[key] = tests->value(key, json(0));
  return counts;
}

json diff_tests(const json& a, const json& b, const TestLoss& loss, std::size_t max_listed) {
  json out = {{"a", test_counts(a)}, {"b", test_counts(b)}, {"changed", json::array()},
              {"added", json::array()}, {"removed", json::array()}, {"newly_skipped", loss.newly_skipped_cases},
              {"removed_count", loss.removed}, {"newly_skipped_count", loss.newly_skipped}};
  bool truncated = loss.truncated;  // a record's case list was cut, or a loss list is full
  const std::map<std::string, std::string> in_a = case_outcomes(a), in_b = case_outcomes(b);
  for (const auto& [name, outcome] : in_a) {
    const auto other = in_b.find(name);
    if (other == in_b.end()) {
      add_bounded(out["removed"], {{"name", name}, {"outcome", outcome}}, max_listed, truncated);
    } else if (other->second != outcome) {
      add_bounded(out["changed"], {{"name", name}, {"a", outcome}, {"b", other->second}}, max_listed, truncated);
    }
  }
  for (const auto& [name, outcome] : in_b) {
    if (!in_a.count(name)) add_bounded(out["added"], {{"name", name}, {"outcome", outcome}}, max_listed, truncated);
  }
  out["truncated"] = truncated;
  return out;
}

json diff_stream(const json& a, const json& b, const char* stream) {
  const auto sha256 = [stream](const json& run) {
    const json part = field_of(run, "result", stream);
    const json digest = part.is_object() ? part.value("sha256", json()) : json();
    return digest.is_string() ? digest : json();
  };
  const json in_a = sha256(a), in_b = sha256(b);
  return {{"same", in_a.is_null() || in_b.is_null() ? json() : json(in_a == in_b)}, {"a", in_a}, {"b", in_b}};
}

// url -> sha256 of what a run's proxy served: pinned.dependencies when the run has them, else proxy.served.
std::map<std::string, std::string> dependencies_of(const json& run) {
  json list = field_of(run, "pinned", "dependencies");
  if (!list.is_array()) list = field_of(run, "proxy", "served");
  std::map<std::string, std::string> out;
  if (!list.is_array()) return out;
  for (const json& object : list) {
    if (!object.is_object() || !object.contains("url") || !object["url"].is_string()) continue;
    const json sha256 = object.value("sha256", json());
    out[object["url"].get<std::string>()] = sha256.is_string() ? sha256.get<std::string>() : "";
  }
  return out;
}

json diff_dependencies(const json& a, const json& b, std::size_t max_listed) {
  json out = {{"added", json::array()}, {"removed", json::array()}, {"changed", json::array()}};
  bool truncated = false;
  const auto in_a = dependencies_of(a), in_b = dependencies_of(b);
  for (const auto& [url, sha256] : in_a) {
    const auto other = in_b.find(url);
    if (other == in_b.end()) add_bounded(out["removed"], url, max_listed, truncated);
    else if (other->second != sha256) {
      add_bounded(out["changed"], {{"url", url}, {"a", sha256}, {"b", other->second}}, max_listed, truncated);
    }
  }
  for (const auto& [url, sha256] : in_b) {
    if (!in_a.count(url)) add_bounded(out["added"], url, max_listed, truncated);
  }
  out["truncated"] = truncated;
  return out;
}

struct FileChange {
  std::string change;  // added, modified, deleted
  json size, sha256;   // as the diff lists them (null when absent)
};

std::map<std::string, FileChange> file_changes(const json& diff) {
  std::map<std::string, FileChange> out;
  for (const char* change : {"added", "modified", "deleted"}) {
    const auto list = diff.find(change);
    if (list == diff.end() || !list->is_array()) continue;
    for (const json& entry : *list) {
      if (!entry.is_object() || !entry.contains("path") || !entry["path"].is_string()) continue;
      out[entry["path"].get<std::string>()] = {change, entry.value("size", json()), entry.value("sha256", json())};
    }
  }
  return out;
}

// Differs when one run lacks the change, the change differs, or both give a size (or a sha256) that differ.
bool files_differ(const FileChange* a, const FileChange* b) {
  if (!a || !b) return true;
  if (a->change != b->change) return true;
  const auto both_differ = [](const json& x, const json& y) { return !x.is_null() && !y.is_null() && x != y; };
  return both_differ(a->size, b->size) || both_differ(a->sha256, b->sha256);
}

json diff_files(const json& a, const json& b, std::size_t max_listed) {
  const auto diff_a = a.find("diff"), diff_b = b.find("diff");
  if (diff_a == a.end() || diff_b == b.end() || !diff_a->is_object() || !diff_b->is_object()) return nullptr;
  bool truncated = diff_a->value("truncated", json()) == true || diff_b->value("truncated", json()) == true;
  const auto in_a = file_changes(*diff_a), in_b = file_changes(*diff_b);
  std::set<std::string> paths;
  for (const auto& entry : in_a) paths.insert(entry.first);
  for (const auto& entry : in_b) paths.insert(entry.first);
  json changed = json::array();
  for (const std::string& path : paths) {
    const auto found_a = in_a.find(path), found_b = in_b.find(path);
    const FileChange* change_a = found_a == in_a.end() ? nullptr : &found_a->second;
    const FileChange* change_b = found_b == in_b.end() ? nullptr : &found_b->second;
    if (!files_differ(change_a, change_b)) continue;
    json entry = {{"path", path}, {"a", change_a ? json(change_a->change) : json()},
                  {"b", change_b ? json(change_b->change) : json()}};
    add_bounded(changed, std::move(entry), max_listed, truncated);
  }
  return {{"changed", std::move(changed)}, {"truncated", truncated}};
}

json diff_pinned(const json& a, const json& b) {
  const json pinned_a = a.value("pinned", json::object()), pinned_b = b.value("pinned", json::object());
  json out = json::object();
  if (!pinned_a.is_object() || !pinned_b.is_object()) return out;
  std::set<std::string> fields;
  for (const auto& item : pinned_a.items()) fields.insert(item.key());
  for (const auto& item : pinned_b.items()) fields.insert(item.key());
  fields.erase("dependencies");  // compared as the dependency set
  for (const std::string& field : fields) {
    const json value_a = pinned_a.value(field, json()), value_b = pinned_b.value(field, json());
    if (value_a != value_b) out[field] = pair_of(value_a, value_b);
  }
  return out;
}

json diff_timings(const json& a, const json& b) {
  const json wall_a = field_of(a, "result", "wall_ms"), wall_b = field_of(b, "result", "wall_ms");
  json ratio;
  if (wall_a.is_number() && wall_b.is_number() && wall_a.get<double>() > 0) {
    ratio = wall_b.get<double>() / wall_a.get<double>();
  }
  return {{"wall_ms", pair_of(wall_a, wall_b)}, {"ratio", ratio}};
}

json verdict_name(const json& run) { return run_passed(run) ? "passed" : "failed"; }

// loss_check's answer, with "regressed" before "different" (verdicts that differ) before "same".
json diff_check(const json& a, const json& b, const TestLoss& loss, bool allow_removed) {
  json check = loss_check(loss, allow_removed);
  const bool verdicts_differ = run_passed(a) != run_passed(b);
  if (verdicts_differ) check["reasons"].push_back("verdict_differs");
  check["verdict"] = check["verdict"] == "regressed" ? "regressed" : verdicts_differ ? "different" : "same";
  return check;
}

}  // namespace

json diff_runs(const json& a, const json& b, const RunDiffLimits& limits) {
  const json empty = json::object();
  const json& run_a = a.is_object() ? a : empty;
  const json& run_b = b.is_object() ? b : empty;
  const TestLoss loss = lost_tests(run_a, run_b, limits.max_listed);
  return {{"a", run_a.value("id", json())},
          {"b", run_b.value("id", json())},
          {"same_verdict", run_passed(run_a) == run_passed(run_b)},
          {"verdict", pair_of(verdict_name(run_a), verdict_name(run_b))},
          {"check", diff_check(run_a, run_b, loss, limits.allow_removed)},
          {"status", pair_of(run_a.value("state", json()), run_b.value("state", json()))},
          {"exit_code", pair_of(field_of(run_a, "result", "exit_code"), field_of(run_b, "result", "exit_code"))},
          {"signal", pair_of(field_of(run_a, "result", "signal"), field_of(run_b, "result", "signal"))},
          {"tests", diff_tests(run_a, run_b, loss, limits.max_listed)},
          {"stdout", diff_stream(run_a, run_b, "stdout")},
          {"stderr", diff_stream(run_a, run_b, "stderr")},
          {"dependencies", diff_dependencies(run_a, run_b, limits.max_listed)},
          {"files", diff_files(run_a, run_b, limits.max_listed)},
          {"pinned", diff_pinned(run_a, run_b)},
          {"timings", diff_timings(run_a, run_b)}};
}

}  // namespace capsule::daemon
