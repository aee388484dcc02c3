// The routes over a run's stored output: GET /v1/runs/{id}/logs streamed with bounded memory (a LogSender
// inflates 64 KiB at a time, following a live run on its writer's signals to its end; ?tail=N sends only the
// last N lines, found on a worker) and DELETE /v1/runs/{id}.
#include "daemon/api/api.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <charconv>
#include <optional>

#include <boost/asio/post.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/strand.hpp>

namespace capsule::daemon {
namespace {

using nlohmann::json;
constexpr std::size_t kPieceBytes = 64 * 1024;
// How often a follower waiting for its run's next signal looks whether its client is still there (the log is
// not read then): a client that leaves a silent run frees its follower within this.
constexpr auto kClientCheckInterval = std::chrono::seconds(1);

// ?tail=N: at most this many lines, and at most kTailMaxBytes of them.
constexpr std::size_t kTailMaxLines = 10000;
constexpr std::size_t kTailMaxBytes = 1u << 20;

// The N of ?tail=N (1..kTailMaxLines), if given; 400 invalid_query for anything else.
std::optional<std::size_t> tail_lines(const http::Request& request) {
  const auto it = request.query.find("tail");
  if (it == request.query.end()) return std::nullopt;
  const std::string& text = it->second;
  std::size_t lines = 0;
  const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), lines);
  if (ec != std::errc() || end != text.data() + text.size() || lines == 0 || lines > kTailMaxLines) {
    throw http::ApiError("invalid_query", "tail: expected a number of lines from 1 to " +
                                              std::to_string(kTailMaxLines) + ", got '" + text + "'");
  }
  return lines;
}

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

// Sends one log to one client. All steps run on `strand`; the drained callback and the log's signals only
// post a step there. Following, a step reads only what the log gained since the last (the reader keeps its
// place), and nothing runs between signals but the client check.
class LogSender : public std::enable_shared_from_this<LogSender> {
 public:
  LogSender(ApiContext& ctx, std::string id, Stream stream, std::unique_ptr<LogReader> reader, std::uint64_t skip)
      : ctx_(ctx), id_(std::move(id)), stream_(stream), skip_(skip), reader_(std::move(reader)),
        strand_(boost::asio::make_strand(ctx.io)), timer_(strand_) {}

  // Makes the sender follow the live run to its end: subscribes to the log's signals, then reads the run's
  // state once more (an end recorded before the subscription sent no signal here). Before start().
  void follow() {
    follow_ = true;
    std::weak_ptr<LogSender> weak = weak_from_this();
    subscription_ = ctx_.logs.watch(id_, stream_, [weak](LogEvent event) {
      auto self = weak.lock();
      if (!self) return;
      if (event == LogEvent::kRunEnded) self->run_ended_ = true;
      self->wake();
    });
    if (is_finished(ctx_.ledger.get(id_))) run_ended_ = true;
  }

  // `first`: the piece read while answering (so a corrupt log is an error status, not a cut stream).
  void start(std::shared_ptr<http::StreamWriter> writer, std::string first) {
    auto begin = [self = shared_from_this(), writer = std::move(writer), first = std::move(first)]() mutable {
      self->writer_ = std::move(writer);  // a signal's step before this one waits for it: send() steps
      if (self->follow_) self->check_client_later();
      self->send(std::move(first));
    };
    boost::asio::post(strand_, std::move(begin));
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

  // Reads and sends the next piece, or ends the stream, or (following) waits for the log's next signal.
  void step() {
    if (done_ || awaiting_drain_ || !writer_) return;
    if (writer_->client_gone()) return stop();
    try {
      // The flag before the log: a run recorded as ended has closed its logs, so what this read finds is all.
      const bool ended = run_ended_;
      std::string piece = read_after(*reader_, skip_);
      if (!piece.empty()) return send(std::move(piece));
      if (!follow_ || ended) return end();
    } catch (const std::exception& e) {
      spdlog::warn("logs of run {}: {}; the stream is cut", id_, e.what());
      return stop();  // without finish(): the client sees a truncated body, not a clean end
    }
  }

  // Holds the sender while it waits for signals, and lets it go once its client has.
  void check_client_later() {
    timer_.expires_after(kClientCheckInterval);
    timer_.async_wait([self = shared_from_this()](const boost::system::error_code& ec) {
      if (ec || self->done_) return;
      if (self->writer_->client_gone()) return self->stop();
      self->check_client_later();
    });
  }

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
  bool follow_ = false;
  std::uint64_t skip_;  // bytes of the log still to drop before sending (?from=)
  std::unique_ptr<LogReader> reader_;
  boost::asio::strand<boost::asio::io_context::executor_type> strand_;
  boost::asio::steady_timer timer_;  // the client check
  std::shared_ptr<http::StreamWriter> writer_;
  std::unique_ptr<LogWatchers::Subscription> subscription_;
  std::atomic<bool> wake_posted_{false};
  std::atomic<bool> run_ended_{false};  // set by the kRunEnded signal (any thread) or follow()
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
  const std::optional<std::size_t> tail = tail_lines(request);
  if (tail && request.query.contains("from")) throw http::ApiError("invalid_query", "tail and from exclude each other");
  Stream stream = Stream::kStdout;
  if (auto it = request.query.find("stream"); it != request.query.end()) {
    if (it->second == "stderr") stream = Stream::kStderr;
    else if (it->second != "stdout") throw http::ApiError("invalid_query", "stream: expected stdout or stderr");
  }
  const auto follow_it = request.query.find("follow");
  const bool follow = follow_it != request.query.end() && (follow_it->second == "true" || follow_it->second == "1") &&
                      !is_finished(row);
  // A log closed past the cap says so in a header too (the marker line is in the text).
  std::vector<std::pair<std::string, std::string>> headers;
  if (auto cut = ctx.logs.truncation(id, stream)) {
    headers.emplace_back("X-Capsule-Log-Dropped-Bytes", std::to_string(cut->dropped_bytes));
    headers.emplace_back("X-Capsule-Log-Total-Bytes", std::to_string(cut->total_bytes));
  }
  if (tail) {
    // The whole log is inflated to find its end: on a worker, not on the io thread.
    answer_later(ctx.transfers, request.peer.uid, responder,
                 [&ctx, id, stream, follow, lines = *tail, headers](const http::Responder& answer) mutable {
                   std::unique_ptr<LogReader> reader;
                   std::string last;
                   try {
                     reader = ctx.logs.open_reader(id, stream);
                     last = read_last_lines(*reader, lines, kTailMaxBytes);
                   } catch (const LogStoreError& e) {
                     throw http::ApiError("log_unreadable", e.what());
                   }
                   if (!follow) {
                     return answer.respond(http::Response{200, "text/plain", std::move(last), std::move(headers)});
                   }
                   auto sender = std::make_shared<LogSender>(ctx, id, stream, std::move(reader), 0);
                   sender->follow();
                   sender->start(answer.start_stream(200, "text/plain", std::move(headers)), std::move(last));
                 });
    return;
  }
  std::unique_ptr<LogReader> reader;
  std::string first;
  try {
    reader = ctx.logs.open_reader(id, stream);  // a log never written reads as empty
    first = read_after(*reader, skip);
  } catch (const LogStoreError& e) {
    throw http::ApiError("log_unreadable", e.what());
  }
  if (!follow && (reader->finished() || first.size() < kPieceBytes)) {
    responder.respond(http::Response{200, "text/plain", std::move(first), std::move(headers)});  // all in one piece
    return;
  }
  auto sender = std::make_shared<LogSender>(ctx, id, stream, std::move(reader), skip);
  if (follow) sender->follow();
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
