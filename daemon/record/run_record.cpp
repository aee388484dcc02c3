// Building the record of a finished run (off the supervision loop, on a finisher thread) and holding it
// under its size ceiling: lists are shortened first, output parts next, then a minimal record.
#include "daemon/record/run_record.h"

#include <filesystem>

#include "daemon/record/classfiles.h"
#include "daemon/record/coverage.h"
#include "daemon/record/exception_tail.h"
#include "daemon/record/junit.h"
#include "daemon/record/protect_diff.h"
#include "daemon/record/test_config.h"
#include "daemon/record/test_loss.h"
#include "daemon/record/tests_state.h"
#include "daemon/record/workspace_diff.h"
#include "sandbox/result_json.h"

namespace capsule::daemon {
namespace {

using nlohmann::json;

// Bytes that one character (starting with byte c) takes in JSON text, for the ASCII cases that grow.
std::size_t escaped_size(unsigned char c) {
  if (c == '"' || c == '\\' || c == '\n' || c == '\r' || c == '\t' || c == '\b' || c == '\f') return 2;
  return c < 0x20 ? 6 : 1;
}

bool is_continuation(unsigned char c) { return (c & 0xC0) == 0x80; }

// The longest prefix of valid UTF-8 `text` whose JSON text is at most `budget` bytes.
std::string head_within(const std::string& text, std::size_t budget) {
  std::size_t used = 0, i = 0;
  for (; i < text.size(); ++i) {
    used += escaped_size(static_cast<unsigned char>(text[i]));
    if (used > budget) break;
  }
  while (i > 0 && i < text.size() && is_continuation(static_cast<unsigned char>(text[i]))) --i;
  return text.substr(0, i);
}

// The longest suffix of valid UTF-8 `text` whose JSON text is at most `budget` bytes.
std::string tail_within(const std::string& text, std::size_t budget) {
  std::size_t used = 0, start = text.size();
  while (start > 0) {
    const std::size_t cost = escaped_size(static_cast<unsigned char>(text[start - 1]));
    if (used + cost > budget) break;
    used += cost;
    --start;
  }
  while (start < text.size() && is_continuation(static_cast<unsigned char>(text[start]))) ++start;
  return text.substr(start);
}

bool bound_part(json& stream, const char* key, std::size_t budget, bool keep_start) {
  if (!stream.contains(key) || !stream[key].is_string()) return false;
  const std::string& text = stream[key].get_ref<const std::string&>();
  if (json_size(stream[key]) <= budget + 2) return false;
  std::string cut = keep_start ? head_within(text, budget) : tail_within(text, budget);
  stream[key] = std::move(cut);
  return true;
}

// Halves the arrays at record[section][key] (keeping their start) until the record fits or they are empty,
// setting record[section][flag] to true. True when the record fits.
bool shorten_lists(json& record, const char* section, std::initializer_list<const char*> keys, std::size_t max_bytes,
                   const char* flag = "truncated") {
  if (!record.contains(section) || !record[section].is_object()) return json_size(record) <= max_bytes;
  json& part = record[section];
  for (;;) {
    if (json_size(record) <= max_bytes) return true;
    bool shortened = false;
    for (const char* key : keys) {
      if (!part.contains(key) || !part[key].is_array() || part[key].empty()) continue;
      json& list = part[key];
      const std::size_t keep = list.size() / 2;
      list.erase(list.begin() + static_cast<std::ptrdiff_t>(keep), list.end());
      shortened = true;
    }
    if (!shortened) return false;
    part[flag] = true;
  }
}

// What fails a run's verdict besides its result (run_verdict.h) survives the last-resort summary, without lists.
void keep_verdict_evidence(const json& record, json& kept) {
  if (record.contains("baseline") && record["baseline"].is_object()) {
    json baseline = record["baseline"];
    for (const char* list : {"removed", "newly_skipped"}) {
      if (baseline.contains(list) && baseline[list].is_object()) baseline[list].erase("cases");
    }
    kept["baseline"] = std::move(baseline);
  }
  if (record.contains("protect_violations") && record["protect_violations"].is_array()) {
    const json& violations = record["protect_violations"];
    if (!violations.empty()) {
      kept["protect_violations"] = json::array({{{"path", ""}, {"reason", std::to_string(violations.size()) +
                                                                           " violations; the list was not kept"}}});
    }
  }
}

// Whether stdout or stderr, as the record keeps them, shows a compilation failure.
bool output_shows_compile_error(const sandbox::Result& result) {
  for (const sandbox::StreamCapture* stream : {&result.stdout_capture, &result.stderr_capture}) {
    if (shows_compile_error(stream->head) || shows_compile_error(stream->tail)) return true;
  }
  return false;
}

}  // namespace

std::size_t json_size(const json& value) { return value.dump(-1, ' ', false, json::error_handler_t::replace).size(); }

void bound_stream_parts(json& result, std::size_t max_part_bytes) {
  for (const char* name : {"stdout", "stderr"}) {
    if (!result.contains(name) || !result[name].is_object()) continue;
    json& stream = result[name];
    const bool head_cut = bound_part(stream, "head", max_part_bytes, true);
    const bool tail_cut = bound_part(stream, "tail", max_part_bytes, false);
    if (head_cut || tail_cut) stream["truncated"] = true;
    if (stream.contains("tail_lines") && stream["tail_lines"].is_array()) {
      json& lines = stream["tail_lines"];
      // "[" + lines joined by "," + "]": drop the oldest lines until the newest ones fit.
      std::size_t size = 2 + (lines.empty() ? 0 : lines.size() - 1);
      std::vector<std::size_t> sizes;
      sizes.reserve(lines.size());
      for (const json& line : lines) size += sizes.emplace_back(json_size(line));
      std::size_t drop = 0;
      for (; drop < sizes.size() && size > max_part_bytes; ++drop) {
        size -= sizes[drop] + (drop + 1 < sizes.size() ? 1 : 0);  // the line and its comma, if one is left
      }
      lines.erase(lines.begin(), lines.begin() + static_cast<std::ptrdiff_t>(drop));
    }
  }
}

json bound_record(json record, std::size_t max_bytes) {
  const std::size_t original = json_size(record);
  if (original <= max_bytes) return record;
  if (shorten_lists(record, "diff", {"added", "modified", "deleted", "errors"}, max_bytes)) return record;
  if (shorten_lists(record, "tests", {"cases"}, max_bytes, "cases_truncated")) return record;
  if (shorten_lists(record, "tests", {"files", "unreadable"}, max_bytes)) return record;
  if (shorten_lists(record, "classfiles", {"odd", "unreadable"}, max_bytes)) return record;
  if (shorten_lists(record, "coverage", {"reports", "unreadable"}, max_bytes)) return record;
  json& result = record["result"];
  if (!result.is_object()) result = json::object();
  for (const char* name : {"stdout", "stderr"}) {
    if (!result.contains(name) || !result[name].is_object()) continue;
    result[name]["head"] = "";
    result[name]["tail"] = "";
    result[name]["tail_lines"] = json::array();
    result[name]["truncated"] = true;
  }
  if (json_size(record) <= max_bytes) return record;
  json summary = json::object();
  for (const char* key : {"exit_code", "signal", "wall_ms", "cpu_user_ms", "cpu_sys_ms", "peak_memory_bytes",
                          "oom_kills"}) {
    if (result.contains(key) && !result[key].is_object()) summary[key] = result[key];
  }
  if (result.contains("termination")) summary["termination"] = result["termination"];  // a few bytes: why it ended
  std::string reason = result.value("reason", std::string());
  if (reason.size() > 4096) reason.resize(4096);
  summary["reason"] = reason;
  json kept = {{"result", summary},
               {"record_error", "the record of " + std::to_string(original) + " bytes exceeded the " +
                                    std::to_string(max_bytes) + "-byte ceiling; only this summary was kept"}};
  keep_verdict_evidence(record, kept);
  // The objects the proxy served are what a replay may fetch (pinned.dependencies): kept whenever they fit.
  if (record.contains("proxy") && json_size(kept) + json_size(record["proxy"]) + 16 <= max_bytes) {
    kept["proxy"] = record["proxy"];
    kept["record_error"] = kept["record_error"].get<std::string>() + " (and the proxy's objects)";
  } else if (record.contains("proxy")) {
    kept["record_error"] = kept["record_error"].get<std::string>() +
                           "; the list of objects the proxy served did not fit, so this run cannot be replayed";
  }
  return kept;
}

json failure_record(const std::string& reason, const sandbox::Result& result) {
  std::string text = reason;
  if (text.size() > 4096) text.resize(4096);
  return {{"result", {{"reason", text}, {"exit_code", result.exit_code}, {"signal", result.signal}, {"wall_ms", result.wall_ms}}}};
}

json build_record(const spec::RunSpec& spec, const sandbox::Result& result, const RecordSources& sources) {
  json summary = sandbox::result_to_json(result, spec.tail_lines);
  summary.erase("status");  // the run's state
  for (const auto& [name, digest] :
       {std::pair{"stdout", &sources.stdout_digest}, std::pair{"stderr", &sources.stderr_digest}}) {
    if (!*digest || !summary[name].is_object()) continue;
    summary[name]["sha256"] = (*digest)->sha256;
    summary[name]["bytes"] = (*digest)->bytes;
  }
  bound_stream_parts(summary);
  if (const auto exception = exception_ending(result.stderr_capture.tail)) summary["exception"] = exception->to_json();
  json record = {{"result", std::move(summary)}};
  if (sources.proxy) record["proxy"] = *sources.proxy;
  std::string collect_error;
  // Each part of the record is collected on its own: one that fails is named in collect_error, the rest stay.
  const auto collect = [&](const char* what, const auto& body) {
    try {
      body();
    } catch (const std::exception& e) {
      collect_error += (collect_error.empty() ? "" : "; ") + std::string(what) + ": " + e.what();
    }
  };
  const bool cow = spec.cow_workspace();
  std::error_code ec;
  const bool have_upper = cow && !sources.upper_dir.empty() && std::filesystem::exists(sources.upper_dir, ec);
  // Violations of protect_test_config and of the protect globs, each checked (or failing closed) on its own.
  const bool checks_protect = cow && !spec.protect.empty();
  json violations = json::array();
  bool test_config_checked = false, protect_checked = false;
  if (have_upper) {
    const std::string& lower = sources.lower_dir.empty() ? spec.workspace->path : sources.lower_dir;
    collect("diff", [&] {
      const WorkspaceDiff diff = diff_upper(sources.upper_dir, lower);
      record["diff"] = diff.to_json();
      collect("test_config", [&] {
        const TestConfigScan scan = scan_test_config(sources.upper_dir, lower, diff);
        record["test_config_changes"] = scan.changes_json();
        if (spec.protect_test_config) {
          for (const json& violation : scan.violations_json()) violations.push_back(violation);
        }
        test_config_checked = true;
      });
      if (!checks_protect) return;
      collect("protect", [&] {
        // The record's diff stops listing at its limits; the check walks again, further, before failing closed.
        const json found = diff_complete(diff)
                               ? protect_diff_violations(spec.protect, diff)
                               : protect_diff_violations(spec.protect, diff_upper(sources.upper_dir, lower,
                                                                                  protect_walk_limits()));
        for (const json& violation : found) violations.push_back(violation);
        protect_checked = true;
      });
    });
  }
  if (spec.protect_test_config && cow && !test_config_checked) {  // fails closed
    violations.push_back({{"path", ""}, {"reason", "protect_test_config: the workspace diff could not be read "
                                                   "(collect_error)"}});
  }
  if (checks_protect && !protect_checked) {  // fails closed
    violations.push_back({{"path", ""}, {"reason", "protect: the workspace diff could not be read, so files created "
                                                   "under the protected globs could not be checked"}});
  }
  if ((spec.protect_test_config || checks_protect) && cow) record["protect_violations"] = std::move(violations);
  // Collectors look at what the run wrote: a cow workspace's upper layer, else the workspace itself.
  const bool have_root = spec.workspace && (!cow || have_upper);
  const std::string root = !have_root ? "" : cow ? sources.upper_dir : spec.workspace->path;
  const auto collectors_deadline = std::chrono::steady_clock::now() + sources.collect_time;
  if (!spec.junit_globs.empty() && have_root) {
    collect("junit", [&] {
      JunitLimits limits;
      limits.deadline = collectors_deadline;
      const TestCounts counts = collect_junit(root, spec.junit_globs, limits);
      json tests = counts.to_json();
      tests["state"] = tests_state(counts, result.status == sandbox::Status::kSucceeded);
      tests["compile_error"] = output_shows_compile_error(result);
      record["tests"] = std::move(tests);
    });
  }
  if (!spec.classfile_globs.empty() && have_root) {
    collect("classfiles", [&] {
      ClassfileLimits limits;
      limits.deadline = collectors_deadline;
      record["classfiles"] = collect_classfiles(root, spec.classfile_globs, limits).to_json();
    });
  }
  if (!spec.coverage_globs.empty() && have_root) {
    collect("coverage", [&] {
      CoverageLimits limits;
      limits.deadline = collectors_deadline;
      record["coverage"] = collect_coverage(root, spec.coverage_globs, limits).to_json();
    });
  }
  if (spec.baseline) {
    record["baseline"] = baseline_check(spec.baseline->run, sources.baseline_run.get(), record,
                                        spec.baseline->allow_removed);
  }
  if (!collect_error.empty()) record["collect_error"] = collect_error;
  return bound_record(std::move(record));
}

}  // namespace capsule::daemon
