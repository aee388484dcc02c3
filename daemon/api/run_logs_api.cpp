// The routes over a run's stored output: GET /v1/runs/{id}/logs streamed with bounded memory (a LogSender
// inflates 64 KiB at a time, following a live run on the writer's signal) and DELETE /v1/runs/{id}.
#include "daemon/api/api.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <charconv>

#include <boost/asio/post.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/strand.hpp>

namespace capsule::daemon {
namespace {

using nlohmann::json;
constexpr std::size_t kPieceBytes = 64 * 1024;
constexpr auto kFollowFallback = std::chrono::milliseconds(1000);
constexpr auto kRunEndRecheck = std::chrono::milliseconds(20);

bool is_finished(const std::optional<RunRow>& row) {
  return !row || (row->state != "queued" && row->state != "running");
}

// The next piece of the log after the first `skip` bytes (?from=OFFSET), which are read and dropped first.
std::string read_after(LogReader& reader, std::uint64_t& skip) {
  while (skip > 0) {
    const std::string dropped = reader.read(static_cast<std::size_t>(std::min<std::uint64_t>(skip, kPieceBytes)));
    if (dropped.empty()) return {};
    skip -= dropped.size();
  }
  return reader.read(kPieceBytes);
}

// Sends one log to one client. All steps run on `strand`; the drained callback and the writer's signal only
// post a step there.
class LogSender : public std::enable_shared_from_this<LogSender> {
 public:
  LogSender(ApiContext& ctx, std::string id, Stream stream, bool follow, std::unique_ptr<LogReader> reader,
            std::uint64_t skip)
      : ctx_(ctx), id_(std::move(id)), stream_(stream), follow_(follow), skip_(skip), reader_(std::move(reader)),
        strand_(boost::asio::make_strand(ctx.io)), timer_(strand_) {}

  // `first`: the piece read while answering (so a corrupt log is an error status, not a cut stream).
  void start(std::shared_ptr<http::StreamWriter> writer, std::string first) {
    writer_ = std::move(writer);
    if (follow_) {
      std::weak_ptr<LogSender> weak = weak_from_this();
      subscription_ = ctx_.logs.watch(id_, stream_, [weak] {
        if (auto self = weak.lock()) self->wake();
      });
    }
    boost::asio::post(strand_, [self = shared_from_this(), first = std::move(first)]() mutable {
      self->send(std::move(first));
    });
  }

 private:
  void wake() {
    if (wake_posted_.exchange(true)) return;
    boost::asio::post(strand_, [self = shared_from_this()] {
      self->wake_posted_ = false;
      self->step();
    });
  }

  void send(std::string piece) {
    if (piece.empty()) return step();
    if (!writer_->write(std::move(piece))) return stop();
    awaiting_drain_ = true;
    writer_->when_drained([self = shared_from_this()] {
      boost::asio::post(self->strand_, [self] {
        self->awaiting_drain_ = false;
        self->step();
      });
    });
  }

  // Reads and sends the next piece, or ends the stream, or waits for the log to grow.
  void step() {
    if (done_ || awaiting_drain_) return;
    if (writer_->client_gone()) return stop();
    std::chrono::milliseconds delay = kFollowFallback;
    try {
      std::string piece = read_piece();
      if (!piece.empty()) return send(std::move(piece));
      if (!follow_) return end();
      // At the end of what is written so far. The run's state is read before reading again: a run the ledger
      // calls finished has closed its logs, so what that second read finds is all there is.
      const bool run_finished = is_finished(ctx_.ledger.get(id_));
      piece = read_piece();
      if (!piece.empty()) return send(std::move(piece));
      if (run_finished) return end();
      // A closed log whose run is not yet marked finished (the manager closes logs just before): the stream
      // ends with the run, which is a moment away.
      if (reader_->finished()) delay = kRunEndRecheck;
    } catch (const std::exception& e) {
      spdlog::warn("logs of run {}: {}; the stream is cut", id_, e.what());
      return stop();  // without finish(): the client sees a truncated body, not a clean end
    }
    timer_.expires_after(delay);
    timer_.async_wait([self = shared_from_this()](const boost::system::error_code& ec) {
      if (!ec) self->step();
    });
  }

  std::string read_piece() { return read_after(*reader_, skip_); }

  void end() {
    writer_->finish();
    stop();
  }

  void stop() {
    done_ = true;
    subscription_.reset();
    timer_.cancel();
    writer_.reset();
  }

  ApiContext& ctx_;
  const std::string id_;
  const Stream stream_;
  const bool follow_;
  std::uint64_t skip_;  // bytes of the log still to drop before sending (?from=)
  std::unique_ptr<LogReader> reader_;
  boost::asio::strand<boost::asio::io_context::executor_type> strand_;
  boost::asio::steady_timer timer_;
  std::shared_ptr<http::StreamWriter> writer_;
  std::unique_ptr<LogWatchers::Subscription> subscription_;
  std::atomic<bool> wake_posted_{false};
  bool awaiting_drain_ = false;
  bool done_ = false;
};

}  // namespace

void serve_log(ApiContext& ctx, const RunRow& row, const http::Request& request, http::Responder responder) {
  const std::string& id = row.id;
  std::uint64_t skip = 0;
  if (auto it = request.query.find("from"); it != request.query.end()) {
    const std::string& text = it->second;
    const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), skip);
    if (ec != std::errc() || end != text.data() + text.size()) {
      throw http::ApiError("invalid_query", "from: expected a byte offset, got '" + text + "'");
    }
  }
  Stream stream = Stream::kStdout;
  if (auto it = request.query.find("stream"); it != request.query.end()) {
    if (it->second == "stderr") stream = Stream::kStderr;
    else if (it->second != "stdout") throw http::ApiError("invalid_query", "stream: expected stdout or stderr");
  }
  const auto follow_it = request.query.find("follow");
  const bool follow = follow_it != request.query.end() && (follow_it->second == "true" || follow_it->second == "1") &&
                      !is_finished(row);
  std::unique_ptr<LogReader> reader;
  std::string first;
  try {
    reader = ctx.logs.open_reader(id, stream);  // a log never written reads as empty
    first = read_after(*reader, skip);
  } catch (const LogStoreError& e) {
    throw http::ApiError("log_unreadable", e.what());
  }
  // A log closed past the cap says so in a header too (the marker line is in the text).
  std::vector<std::pair<std::string, std::string>> headers;
  if (auto cut = ctx.logs.truncation(id, stream)) {
    headers.emplace_back("X-Capsule-Log-Dropped-Bytes", std::to_string(cut->dropped_bytes));
    headers.emplace_back("X-Capsule-Log-Total-Bytes", std::to_string(cut->total_bytes));
  }
  if (!follow && (reader->finished() || first.size() < kPieceBytes)) {
    responder.respond(http::Response{200, "text/plain", std::move(first), std::move(headers)});  // all in one piece
    return;
  }
  auto sender = std::make_shared<LogSender>(ctx, id, stream, follow, std::move(reader), skip);
  sender->start(responder.start_stream(200, "text/plain", std::move(headers)), std::move(first));
}

namespace {

http::Response delete_run(ApiContext& ctx, const http::Request& request) {
  const std::string& id = request.params.at("id");
  const RunRow row = require_visible_run(ctx, request, id);
  if (!is_finished(row)) {
    throw http::ApiError("run_active", "run " + id + " is " + row.state + "; cancel it and wait until it has finished");
  }
  switch (ctx.ledger.remove_finished(id)) {
    case Ledger::Removal::kRemoved:
      break;
    case Ledger::Removal::kUnknown:
      throw http::ApiError("not_found", "no run with id " + id);
    case Ledger::Removal::kActive:
      throw http::ApiError("run_active", "run " + id + " is not finished");
  }
  try {
    ctx.logs.remove(id);
  } catch (const LogStoreError& e) {
    spdlog::warn("run {} was deleted but its logs stay: {}", id, e.what());
  }
  return http::json_response(200, {{"id", id}, {"deleted", true}});
}

}  // namespace

void register_run_logs_api(http::Router& router, ApiContext& ctx) {
  router.add("GET", "/v1/runs/{id}/logs", [&ctx](const http::Request& request, http::Responder responder) {
    serve_log(ctx, require_visible_run(ctx, request, request.params.at("id")), request, std::move(responder));
  });
  router.add("DELETE", "/v1/runs/{id}", [&ctx](const http::Request& request) { return delete_run(ctx, request); });
}

}  // namespace capsule::daemon
