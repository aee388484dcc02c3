// Responder and StreamWriter, declared in http/responder.h, and the Exchange they share: each call posts to the
// request's Connection, which does the writing on its own strand; an unanswered request becomes 500.
#include "http/responder.h"

#include <spdlog/spdlog.h>

#include "http/connection.h"

namespace capsule::http {

namespace detail {

Exchange::Exchange(std::shared_ptr<Connection> c) : connection(std::move(c)) {}

Exchange::~Exchange() {
  if (answered.exchange(true)) return;
  spdlog::error("http: a handler dropped its request without answering");
  connection->post_response(error_response("internal_error", "the request handler did not answer"));
}

bool Exchange::claim() {
  if (!answered.exchange(true)) return true;
  spdlog::warn("http: a request was answered twice; the second answer is ignored");
  return false;
}

}  // namespace detail

Responder::Responder(std::shared_ptr<detail::Exchange> exchange) : exchange_(std::move(exchange)) {}

void Responder::respond(Response response) const {
  if (exchange_->claim()) exchange_->connection->post_response(std::move(response));
}

std::shared_ptr<StreamWriter> Responder::start_stream(unsigned status, const std::string& content_type,
                                                      std::vector<std::pair<std::string, std::string>> headers) const {
  if (!exchange_->claim()) return std::make_shared<StreamWriter>(nullptr);
  exchange_->connection->post_stream_start(status, content_type, std::move(headers));
  return std::make_shared<StreamWriter>(exchange_->connection);
}

bool Responder::client_gone() const { return exchange_->connection->gone(); }

StreamWriter::StreamWriter(std::shared_ptr<detail::Connection> connection) : connection_(std::move(connection)) {}

StreamWriter::~StreamWriter() {
  if (connection_ && !finished_) connection_->post_abort();
}

bool StreamWriter::write(std::string chunk) {
  if (!connection_ || finished_ || connection_->gone()) return false;
  if (chunk.empty()) return true;
  return connection_->post_chunk(std::move(chunk));
}

void StreamWriter::finish() {
  if (connection_ && !finished_.exchange(true)) connection_->post_finish();
}

void StreamWriter::when_drained(std::function<void()> callback) {
  if (connection_ && !finished_ && !connection_->gone()) connection_->post_when_drained(std::move(callback));
}

std::size_t StreamWriter::backlog() const { return connection_ ? connection_->backlog() : 0; }

bool StreamWriter::client_gone() const { return !connection_ || connection_->gone(); }

}  // namespace capsule::http
