// The runs diff subcommand: one GET /v1/runs/diff, printed as a few lines per section (the API's JSON with
// --json); its exit status tells whether the verdicts match.
#include "client/cli_runs_diff.h"

#include <cstdio>
#include <iostream>
#include <sstream>

#include "http/unix_client.h"

namespace capsule::client {
namespace {

using nlohmann::json;

const char* const kNone = "(none)";

const json& at(const json& object, const char* key) {
  static const json null;
  if (!object.is_object()) return null;
  const auto it = object.find(key);
  return it == object.end() ? null : *it;
}

// A value as a short word: strings bare, null as "(none)", the rest as JSON.
std::string word(const json& value) {
  if (value.is_string()) return value.get<std::string>();
  if (value.is_null()) return kNone;
  return value.dump();
}

std::string a_to_b(const json& pair) { return word(at(pair, "a")) + " -> " + word(at(pair, "b")); }

std::string counts(const json& tests) {
  if (!tests.is_object()) return "no tests collected";
  return word(at(tests, "total")) + " total, " + word(at(tests, "failed")) + " failed, " + word(at(tests, "errors")) +
         " errors, " + word(at(tests, "skipped")) + " skipped";
}

void print_tests(std::ostream& out, const json& tests) {
  out << "tests: a: " << counts(at(tests, "a")) << "; b: " << counts(at(tests, "b")) << "\n";
  for (const json& c : at(tests, "changed")) out << "  changed  " << word(at(c, "name")) << ": " << a_to_b(c) << "\n";
  for (const auto& [list, label] : {std::pair{"added", "  only b   "}, std::pair{"removed", "  only a   "}}) {
    for (const json& c : at(tests, list)) out << label << word(at(c, "name")) << ": " << word(at(c, "outcome")) << "\n";
  }
  for (const json& c : at(tests, "newly_skipped")) {
    out << "  skipped  " << word(at(c, "name")) << ": " << word(at(c, "a")) << " -> skipped\n";
  }
  if (at(tests, "truncated") == true) out << "  (case lists cut: a record's cases or this list were truncated)\n";
}

void print_stream(std::ostream& out, const char* name, const json& stream) {
  const json& same = at(stream, "same");
  out << name << ": "
      << (same.is_null() ? "unknown (a record has no digest)" : same == true ? "same" : "different") << " (a "
      << word(at(stream, "a")) << ", b " << word(at(stream, "b")) << ")\n";
}

void print_dependencies(std::ostream& out, const json& dependencies) {
  const json& added = at(dependencies, "added");
  const json& removed = at(dependencies, "removed");
  const json& changed = at(dependencies, "changed");
  if (added.empty() && removed.empty() && changed.empty()) {
    out << "dependencies: same\n";
    return;
  }
  out << "dependencies:\n";
  for (const json& url : added) out << "  only b   " << word(url) << "\n";
  for (const json& url : removed) out << "  only a   " << word(url) << "\n";
  for (const json& c : changed) out << "  changed  " << word(at(c, "url")) << ": " << a_to_b(c) << "\n";
  if (at(dependencies, "truncated") == true) out << "  (list cut)\n";
}

void print_files(std::ostream& out, const json& files) {
  if (!files.is_object()) {
    out << "files: not compared (a run has no workspace diff)\n";
    return;
  }
  const json& changed = at(files, "changed");
  if (changed.empty()) {
    out << "files: same changes\n";
    return;
  }
  out << "files:\n";
  for (const json& c : changed) out << "  " << word(at(c, "path")) << ": " << a_to_b(c) << "\n";
  if (at(files, "truncated") == true) out << "  (list cut)\n";
}

std::string milliseconds(const json& value) {
  return value.is_number() ? std::to_string(value.get<std::int64_t>()) + " ms" : kNone;
}

}  // namespace

const char* const kRunsDiffExitHelp =
    "Exit status (like diff(1)): 0 when both runs have the same verdict (passed: succeeded, exit code 0, no failed\n"
    "or errored test) and b lost no test case of a; 1 when the verdicts differ or b regressed: it lacks cases a\n"
    "had (removed, or fewer in total) or skips cases that ran in a (--allow-removed lists them without failing);\n"
    "2 on errors (unknown or unfinished runs, usage, the daemon).";

namespace {

std::string joined(const json& list) {
  std::string out;
  for (const json& item : list) {
    if (!out.empty()) out += ", ";
    out += word(item);
  }
  return out;
}

// The check's verdict and why, with the count of what was lost (said even when allowed).
void print_check(std::ostream& out, const json& diff) {
  const json& check = at(diff, "check");
  const json& verdict = at(diff, "verdict");
  const std::string losses = word(at(at(check, "removed"), "count")) + " removed, " +
                             word(at(at(check, "newly_skipped"), "count")) + " newly skipped";
  if (at(check, "verdict") == "regressed") {
    out << "verdict: REGRESSED (" << joined(at(check, "reasons")) << "): " << losses << "; " << a_to_b(verdict) << "\n";
  } else if (at(diff, "same_verdict") == true) {
    out << "verdict: same (" << word(at(verdict, "a")) << ")";
    if (!at(check, "allowed").empty()) out << "; allowed: " << joined(at(check, "allowed")) << ": " << losses;
    out << "\n";
  } else {
    out << "verdict: DIFFERENT: " << a_to_b(verdict) << "\n";
  }
}

}  // namespace

std::string format_run_diff(const json& diff) {
  std::ostringstream out;
  out << "runs: a " << word(at(diff, "a")) << ", b " << word(at(diff, "b")) << "\n";
  print_check(out, diff);
  out << "status: " << a_to_b(at(diff, "status")) << "; exit code: " << a_to_b(at(diff, "exit_code"))
      << "; signal: " << a_to_b(at(diff, "signal")) << "\n";
  print_tests(out, at(diff, "tests"));
  print_stream(out, "stdout", at(diff, "stdout"));
  print_stream(out, "stderr", at(diff, "stderr"));
  print_dependencies(out, at(diff, "dependencies"));
  print_files(out, at(diff, "files"));
  const json& pinned = at(diff, "pinned");
  if (pinned.is_object() && !pinned.empty()) {
    out << "pinned:\n";
    for (const auto& item : pinned.items()) out << "  " << item.key() << ": " << a_to_b(item.value()) << "\n";
  } else {
    out << "pinned: same\n";
  }
  const json& timings = at(diff, "timings");
  const json& wall = at(timings, "wall_ms");
  out << "wall time: " << milliseconds(at(wall, "a")) << " -> " << milliseconds(at(wall, "b"));
  if (at(timings, "ratio").is_number()) {
    char ratio[32];
    std::snprintf(ratio, sizeof ratio, " (x%.2f)", at(timings, "ratio").get<double>());
    out << ratio;
  }
  out << "\n";
  return out.str();
}

int run_diff_exit_status(const json& diff) {
  const json& check = at(at(diff, "check"), "verdict");
  if (check.is_string()) return check == "same" ? 0 : kExitVerdictsDiffer;
  return at(diff, "same_verdict") == true ? 0 : kExitVerdictsDiffer;
}

int cmd_runs_diff(const std::string& socket, const std::string& a, const std::string& b, bool json_output,
                  bool allow_removed) {
  std::string path = "/v1/runs/diff?a=" + http::url_encode(a) + "&b=" + http::url_encode(b);
  if (allow_removed) path += "&allow_removed=true";
  const json diff = http::request_json(http::HttpClient(socket), "GET", path);
  std::cout << (json_output ? diff.dump(2) + "\n" : format_run_diff(diff));
  return run_diff_exit_status(diff);
}

}  // namespace capsule::client
