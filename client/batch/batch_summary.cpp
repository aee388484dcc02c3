// Summaries of a batch's results: computed once into JSON, then drawn as text or as HTML with inline SVG bar
// charts (status by label, duration histogram), so a person can open the page without any other file.
#include "client/batch/batch_summary.h"

#include <algorithm>
#include <cmath>
#include <sstream>

#include "client/run_view.h"
#include "proxy/pypi/page_render.h"

namespace capsule::client::batch {

using nlohmann::json;

namespace {

constexpr std::size_t kMaxFailuresListed = 1000;
constexpr std::size_t kFailureTailLines = 5;        // of a failure's output, in the summary
constexpr std::size_t kFailureTailLineChars = 300;  // each cut there

// The last lines of a failed run's output, from its run object's result.stderr (else result.stdout, where Maven
// and pytest print their errors): tail_lines when the record has them, else its tail text cut into lines.
json output_tail(const json& run) {
  const json result = run.is_object() ? run.value("result", json::object()) : json::object();
  for (const char* stream : {"stderr", "stdout"}) {
    const json output = result.is_object() ? result.value(stream, json::object()) : json::object();
    if (!output.is_object()) continue;
    std::vector<std::string> lines;
    if (output.contains("tail_lines") && output["tail_lines"].is_array()) {
      for (const json& line : output["tail_lines"]) {
        if (line.is_string()) lines.push_back(line.get<std::string>());
      }
    } else if (output.contains("tail") && output["tail"].is_string()) {
      std::istringstream text(output["tail"].get<std::string>());
      for (std::string line; std::getline(text, line);) lines.push_back(line);
    }
    std::erase_if(lines, [](const std::string& line) { return line.find_first_not_of(" \t\r") == std::string::npos; });
    if (lines.empty()) continue;
    json tail = json::array();
    for (std::size_t i = lines.size() > kFailureTailLines ? lines.size() - kFailureTailLines : 0; i < lines.size(); ++i) {
      std::string line = lines[i].substr(0, kFailureTailLineChars);
      for (char& c : line) {  // what a sandbox wrote reaches a terminal: no control characters
        if ((static_cast<unsigned char>(c) < 0x20 && c != '\t') || c == 0x7f) c = '?';
      }
      tail.push_back(std::move(line));
    }
    return {{"stream", stream}, {"lines", tail}};
  }
  return nullptr;
}

// Why a run that succeeded fails its verdict (client/run_view.h's rule): "baseline r1 regressed (tests_removed): 2
// removed, 0 newly skipped", "1 protect violation"; "" when it does not.
std::string verdict_reason(const json& run) {
  if (!run.is_object() || !ending_of(run).verdict_failed) return "";
  std::string reason;
  const json baseline = run.value("baseline", json());
  if (baseline.is_object() && baseline.value("verdict", "") != "passed") {
    reason = "baseline " + baseline.value("run", "") + " " + baseline.value("verdict", "");
    const json reasons = baseline.value("reasons", json::array());
    for (std::size_t i = 0; reasons.is_array() && i < reasons.size(); ++i) {
      reason += (i == 0 ? " (" : ", ") + (reasons[i].is_string() ? reasons[i].get<std::string>() : "?");
      if (i + 1 == reasons.size()) reason += ")";
    }
    const auto count = [&](const char* list) {
      const json part = baseline.value(list, json::object());
      return part.is_object() ? part.value("count", 0ll) : 0ll;
    };
    reason += ": " + std::to_string(count("removed")) + " removed, " + std::to_string(count("newly_skipped")) +
              " newly skipped";
  }
  const json violations = run.value("protect_violations", json::array());
  if (violations.is_array() && !violations.empty()) {
    reason += (reason.empty() ? "" : "; ") + std::to_string(violations.size()) +
              (violations.size() == 1 ? " protect violation" : " protect violations");
  }
  return reason;
}

std::uint64_t percentile(const std::vector<std::uint64_t>& sorted, double p) {
  if (sorted.empty()) return 0;
  const auto rank = static_cast<std::size_t>(std::ceil(p * static_cast<double>(sorted.size())));
  return sorted[std::min(sorted.size() - 1, rank == 0 ? 0 : rank - 1)];
}

// One horizontal bar per row; `rows` are (label, value) pairs.
std::string svg_bars(const std::vector<std::pair<std::string, std::uint64_t>>& rows) {
  std::uint64_t top = 1;
  for (const auto& row : rows) top = std::max(top, row.second);
  const int height = 22 * static_cast<int>(rows.size()) + 10;
  std::ostringstream svg;
  svg << "<svg xmlns='http://www.w3.org/2000/svg' width='640' height='" << height << "'>";
  int y = 5;
  for (const auto& [label, value] : rows) {
    const int width = static_cast<int>(400.0 * static_cast<double>(value) / static_cast<double>(top));
    svg << "<text x='0' y='" << y + 14 << "' font-size='12'>" << proxy::pypi::html_escape(label) << "</text>"
        << "<rect x='200' y='" << y << "' width='" << std::max(width, 1) << "' height='16' fill='#4a7ab8'/>"
        << "<text x='" << 205 + width << "' y='" << y + 13 << "' font-size='12'>" << value << "</text>";
    y += 22;
  }
  svg << "</svg>";
  return svg.str();
}

// counts[key] += 1, counts being an object or still null.
void count(json& counts, const std::string& key) {
  if (!counts.is_object()) counts = json::object();
  counts[key] = counts.value(key, 0) + 1;
}

}  // namespace

json summarize(const BatchDir& batch, bool alive) {
  std::size_t corrupt = 0;
  const auto results = batch.results(&corrupt);
  const std::vector<BatchSpec> specs = batch.specs();
  json by_state = json::object(), by_label = json::object(), failures = json::array();
  std::vector<std::uint64_t> durations;
  std::size_t done = 0, cached = 0, verdict_failed = 0;
  for (const BatchSpec& spec : specs) {  // in spec order, so failures are listed as the input lists them
    const auto it = results.find(spec.key);
    if (it == results.end()) continue;
    const BatchResult& r = it->second;
    ++done;
    if (r.cached_from) ++cached;
    count(by_state, r.state);
    for (const auto& [key, value] : r.labels) count(by_label[key + "=" + value], r.state);
    if (!r.cached_from && r.state != "rejected") durations.push_back(r.wall_ms);
    // A run that succeeded but lost test cases of its baseline (or broke protect_test_config) is a failure too.
    const std::string verdict = r.state == "succeeded" ? verdict_reason(r.run) : "";
    if (!verdict.empty()) ++verdict_failed;
    if ((r.state != "succeeded" || !verdict.empty()) && failures.size() < kMaxFailuresListed) {
      json failure = {{"key", r.key}, {"state", r.state},
                      {"exit_code", r.exit_code ? json(*r.exit_code) : json(nullptr)},
                      {"reason", (verdict.empty() ? r.reason : verdict).substr(0, 500)}, {"run_id", r.run_id},
                      {"node", r.node}, {"output_tail", output_tail(r.run)}};
      if (!verdict.empty()) failure["verdict"] = "failed";
      failures.push_back(std::move(failure));
    }
  }
  std::sort(durations.begin(), durations.end());
  json histogram = json::array();
  // Buckets by powers of two from 16 ms up to the longest run: short and long runs both fall apart.
  if (!durations.empty()) {
    auto from = durations.begin();
    for (std::uint64_t le = 16;; le *= 2) {
      const auto to = std::upper_bound(from, durations.end(), le);
      histogram.push_back({{"le_ms", le}, {"count", to - from}});
      from = to;
      if (from == durations.end()) break;
    }
  }
  std::string state = done == specs.size() ? "finished" : alive ? "running" : batch.cancelled() ? "cancelled" : "incomplete";
  return {{"id", batch.meta().id}, {"engine", batch.meta().engine}, {"specs", specs.size()}, {"done", done},
          {"pending", specs.size() - done}, {"cached", cached}, {"corrupt_lines", corrupt}, {"state", state},
          {"verdict_failed", verdict_failed},
          {"by_state", by_state}, {"by_label", by_label},
          {"duration_ms", {{"count", durations.size()}, {"p50", percentile(durations, 0.5)},
                           {"p90", percentile(durations, 0.9)}, {"p99", percentile(durations, 0.99)},
                           {"max", durations.empty() ? 0 : durations.back()}, {"histogram", histogram}}},
          {"failures", failures}};
}

std::string summary_text(const json& s) {
  std::ostringstream out;
  out << "batch " << s["id"].get<std::string>() << " (" << s["engine"].get<std::string>() << "): "
      << s["state"].get<std::string>() << ", " << s["done"] << " of " << s["specs"] << " done";
  if (s["cached"].get<std::size_t>() > 0) out << " (" << s["cached"] << " from the cache)";
  out << "\n";
  for (const auto& [state, count] : s["by_state"].items()) out << "  " << state << ": " << count << "\n";
  if (s.value("verdict_failed", 0) > 0) {
    out << "  verdict failed (succeeded, but a baseline check or protect_test_config fails it): " << s["verdict_failed"]
        << "\n";
  }
  const json& d = s["duration_ms"];
  if (d["count"].get<std::size_t>() > 0) {
    out << "duration: p50 " << d["p50"] << " ms, p90 " << d["p90"] << " ms, p99 " << d["p99"] << " ms, max "
        << d["max"] << " ms over " << d["count"] << " runs\n";
  }
  if (!s["by_label"].empty()) out << "by label:\n";
  for (const auto& [label, counts] : s["by_label"].items()) {
    out << "  " << label << ":";
    for (const auto& [state, count] : counts.items()) out << " " << state << " " << count;
    out << "\n";
  }
  const json& failures = s["failures"];
  if (!failures.empty()) out << "failures:\n";
  for (std::size_t i = 0; i < std::min<std::size_t>(failures.size(), 50); ++i) {
    const json& f = failures[i];
    out << "  " << f["key"].get<std::string>() << ": " << f["state"].get<std::string>();
    if (f["exit_code"].is_number()) out << " (exit " << f["exit_code"] << ")";
    if (!f["reason"].get<std::string>().empty()) out << ": " << f["reason"].get<std::string>().substr(0, 120);
    out << "\n";
    if (f.contains("output_tail") && f["output_tail"].is_object()) {
      for (const json& line : f["output_tail"]["lines"]) {
        out << "    " << f["output_tail"]["stream"].get<std::string>() << "| " << line.get<std::string>() << "\n";
      }
    }
  }
  if (failures.size() > 50) out << "  ... " << failures.size() - 50 << " more (--format json lists them)\n";
  if (s["corrupt_lines"].get<std::size_t>() > 0) out << s["corrupt_lines"] << " torn result lines skipped\n";
  return out.str();
}

std::string summary_html(const json& s) {
  std::ostringstream out;
  const std::string id = proxy::pypi::html_escape(s["id"].get<std::string>());
  out << "<!doctype html><html><head><meta charset='utf-8'><title>capsule batch " << id << "</title>"
      << "<style>body{font-family:sans-serif;margin:2em}td,th{padding:2px 8px;text-align:left}</style></head><body>"
      << "<h1>batch " << id << "</h1><p>" << proxy::pypi::html_escape(s["state"].get<std::string>()) << ": " << s["done"]
      << " of " << s["specs"] << " done, " << s["cached"] << " from the cache, engine "
      << proxy::pypi::html_escape(s["engine"].get<std::string>()) << "</p>";
  std::vector<std::pair<std::string, std::uint64_t>> rows;
  for (const auto& [state, count] : s["by_state"].items()) rows.emplace_back(state, count.get<std::uint64_t>());
  out << "<h2>Status</h2>" << svg_bars(rows);
  if (!s["by_label"].empty()) {
    out << "<h2>Status by label</h2>";
    rows.clear();
    for (const auto& [label, counts] : s["by_label"].items()) {
      for (const auto& [state, count] : counts.items()) rows.emplace_back(label + " " + state, count.get<std::uint64_t>());
    }
    out << svg_bars(rows);
  }
  const json& d = s["duration_ms"];
  out << "<h2>Duration</h2><p>p50 " << d["p50"] << " ms, p90 " << d["p90"] << " ms, p99 " << d["p99"]
      << " ms, max " << d["max"] << " ms over " << d["count"] << " runs</p>";
  rows.clear();
  for (const json& bucket : d["histogram"]) {
    rows.emplace_back("<= " + std::to_string(bucket["le_ms"].get<std::uint64_t>()) + " ms", bucket["count"].get<std::uint64_t>());
  }
  out << svg_bars(rows);
  out << "<h2>Failures</h2><table><tr><th>key</th><th>state</th><th>exit</th><th>reason</th><th>run</th><th>node</th></tr>";
  for (const json& f : s["failures"]) {
    out << "<tr><td>" << proxy::pypi::html_escape(f["key"].get<std::string>()) << "</td><td>" << proxy::pypi::html_escape(f["state"].get<std::string>())
        << "</td><td>" << (f["exit_code"].is_number() ? f["exit_code"].dump() : "") << "</td><td>"
        << proxy::pypi::html_escape(f["reason"].get<std::string>());
    if (f.contains("output_tail") && f["output_tail"].is_object()) {
      std::string tail;
      for (const json& line : f["output_tail"]["lines"]) tail += line.get<std::string>() + "\n";
      out << "<pre>" << proxy::pypi::html_escape(tail) << "</pre>";
    }
    out << "</td><td>" << proxy::pypi::html_escape(f["run_id"].get<std::string>())
        << "</td><td>" << proxy::pypi::html_escape(f["node"].get<std::string>()) << "</td></tr>";
  }
  out << "</table></body></html>\n";
  return out.str();
}

}  // namespace capsule::client::batch
