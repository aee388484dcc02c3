// EventLines: a run's (or an exec's) events as an ndjson response, started once the submission was accepted,
// with bounded backlog: a slow client loses output events (counted in "dropped"), never the stream.
#pragma once

#include <map>
#include <memory>
#include <mutex>
#include <nlohmann/json.hpp>
#include <string>

#include "daemon/api/api.h"

namespace capsule::daemon {

// The ndjson answer to POST /v1/runs and POST /v1/sessions/{id}/exec. The stream starts only once submit() accepted the run (a refusal must
// be an error status, not a 200 stream), but events may come before that; they wait in `pending`. A client
// that falls behind loses output events, never the stream: while more than kOutputBacklog bytes wait for it,
// stdout/stderr events are counted instead of queued and a {"event": "dropped", "stream", "bytes"} tells it
// how many bytes it missed (GET /v1/runs/{id}/logs has them); "finished" is always sent.
struct EventLines {
  using json = nlohmann::json;

  // Leaves room below the server's 16 MiB limit for "finished" (a record is at most 4 MiB).
  static constexpr std::size_t kOutputBacklog = 6u << 20;

  std::mutex mutex;
  std::shared_ptr<http::StreamWriter> writer;
  std::string pending;
  bool finished = false;
  std::map<std::string, std::uint64_t> dropped;  // output bytes not sent, by stream, since the last notice
  std::string id;

  static std::uint64_t output_bytes(const json& event) {
    const auto it = event.find("data_b64");
    if (it == event.end() || !it->is_string()) return 0;
    const std::string& text = it->get_ref<const std::string&>();
    const std::size_t padding = text.ends_with("==") ? 2 : text.ends_with("=") ? 1 : 0;
    return text.size() / 4 * 3 - padding;
  }

  // An output event's line, rendered without scanning the large string: base64 needs no JSON escaping.
  // The field order is fixed ({"event","id","data_b64"}) so clients can read it without a full parse.
  static std::string output_line(const std::string& kind, const json& event) {
    const auto it = event.find("data_b64");
    if (it == event.end() || !it->is_string()) return dump(event) + "\n";
    const std::string& data = it->get_ref<const std::string&>();
    std::string line;
    line.reserve(data.size() + 96);
    line += "{\"event\":";
    line += dump(kind);
    line += ",\"id\":";
    line += dump(event.value("id", ""));
    line += ",\"data_b64\":\"";
    line += data;
    line += "\"}\n";
    return line;
  }

  void send_dropped_locked() {
    for (auto& [stream, bytes] : dropped) {
      if (bytes == 0) continue;
      writer->write(dump({{"event", "dropped"}, {"id", id}, {"stream", stream}, {"bytes", bytes}}) + "\n");
      bytes = 0;
    }
  }

  void add(const json& event) {
    const std::string kind = event.value("event", "");
    const bool last = kind == "finished";
    const bool output = kind == "stdout" || kind == "stderr";
    std::lock_guard lock(mutex);
    if (id.empty()) id = event.value("id", "");
    if (!writer) {
      pending += output ? output_line(kind, event) : dump(event) + "\n";
      finished = finished || last;
      return;
    }
    if (output && writer->backlog() > kOutputBacklog) {
      dropped[kind] += output_bytes(event);
      return;
    }
    if (output || last) send_dropped_locked();
    writer->write(output ? output_line(kind, event) : dump(event) + "\n");
    if (last) writer->finish();
  }

  void start(const http::Responder& responder) {
    std::lock_guard lock(mutex);
    writer = responder.start_stream(200, "application/x-ndjson");
    writer->write(std::move(pending));
    if (finished) writer->finish();
  }
};

}  // namespace capsule::daemon
