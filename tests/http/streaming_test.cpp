// Chunked responses through StreamWriter: ndjson from another thread, writes failing once the client left, and
// when_drained pacing a producer below max_stream_buffer_bytes (and releasing it when the client goes).
#include <gtest/gtest.h>

#include <future>
#include <memory>
#include <sstream>
#include <string>
#include <thread>

#include "tests/http/http_test_support.h"

namespace capsule::http::test {
namespace {

TEST_F(HttpServerTest, StreamsChunkedNdjsonFromAnotherThread) {
  router_.add("GET", "/v1/stream", [this](const http::Request&, http::Responder responder) {
    auto writer = responder.start_stream(200, "application/x-ndjson");
    helpers_.emplace_back([writer] {
      for (int i = 0; i < 5; ++i) {
        writer->write(json({{"n", i}}).dump() + "\n");
        std::this_thread::sleep_for(20ms);
      }
      writer->finish();
    });
  });
  start();
  RawClient client(socket_path_);
  client.send(get("/v1/stream"));
  std::string streamed;
  int chunks = 0;
  auto reply = client.read([&](std::string_view data) {
    streamed += data;
    ++chunks;
  });
  ASSERT_TRUE(reply);
  EXPECT_EQ(reply->headers["Content-Type"], "application/x-ndjson");
  EXPECT_EQ(reply->headers["Transfer-Encoding"], "chunked");
  EXPECT_GE(chunks, 2);
  std::istringstream lines(streamed);
  std::string line;
  for (int i = 0; i < 5; ++i) {
    ASSERT_TRUE(std::getline(lines, line));
    EXPECT_EQ(json::parse(line)["n"], i);
  }
  client.send(get("/v1/hello"));  // kept alive after the last chunk
  EXPECT_EQ(client.read().value_or(Reply{}).status, 200u);
}

TEST_F(HttpServerTest, StreamWriteFailsOnceTheClientIsGone) {
  std::promise<bool> noticed;
  router_.add("GET", "/v1/forever", [this, &noticed](const http::Request&, http::Responder responder) {
    auto writer = responder.start_stream(200, "application/x-ndjson");
    helpers_.emplace_back([writer, &noticed] {
      const auto deadline = std::chrono::steady_clock::now() + 20s;
      bool gone = false;
      while (!gone && std::chrono::steady_clock::now() < deadline) {
        gone = !writer->write("{\"tick\":1}\n");
        std::this_thread::sleep_for(10ms);
      }
      noticed.set_value(gone && writer->client_gone());
    });
  });
  start();
  {
    RawClient client(socket_path_);
    client.send(get("/v1/forever"));
    std::promise<void> first;
    bool got = false;
    client.read([&](std::string_view) {
      if (!got) first.set_value();
      got = true;
    }, 1s);
    ASSERT_TRUE(got);
  }  // disconnect mid-stream
  auto result = noticed.get_future();
  ASSERT_EQ(result.wait_for(30s), std::future_status::ready);
  EXPECT_TRUE(result.get());
}

// A producer that writes its next piece only when the previous one was sent (StreamWriter::when_drained).
struct PacedProducer : std::enable_shared_from_this<PacedProducer> {
  std::shared_ptr<http::StreamWriter> writer;
  int left = 0;
  void next() {
    if (left-- == 0) return writer->finish();
    if (!writer->write(std::string(64 * 1024, static_cast<char>('a' + left % 26)))) return;
    writer->when_drained([self = shared_from_this()] { self->next(); });
  }
};

TEST_F(HttpServerTest, WhenDrainedPacesAProducerBelowTheBufferLimit) {
  std::weak_ptr<PacedProducer> endless;
  router_.add("GET", "/v1/paced", [](const http::Request& request, http::Responder responder) {
    auto producer = std::make_shared<PacedProducer>();
    producer->writer = responder.start_stream(200, "application/octet-stream");
    producer->left = std::stoi(request.query.at("pieces"));
    producer->next();
  });
  router_.add("GET", "/v1/endless", [&endless](const http::Request&, http::Responder responder) {
    auto producer = std::make_shared<PacedProducer>();
    producer->writer = responder.start_stream(200, "application/octet-stream");
    producer->left = -1;  // never ends
    endless = producer;
    producer->next();
  });
  http::ServerOptions options;
  options.max_stream_buffer_bytes = 256 * 1024;  // 4 pieces: 200 written at once would drop the client
  start(options);
  {
    RawClient client(socket_path_);
    client.send(get("/v1/paced?pieces=200"));
    std::size_t received = 0;
    auto reply = client.read([&](std::string_view data) { received += data.size(); }, 60s);
    ASSERT_TRUE(reply);
    EXPECT_EQ(received, 200u * 64 * 1024);
  }
  {
    RawClient client(socket_path_);  // never reads: the pending callback holds the producer
    client.send(get("/v1/endless"));
    ASSERT_TRUE(eventually([&] { return !endless.expired(); }));
  }  // gone: the connection closes and drops the callback, and with it the producer
  EXPECT_TRUE(eventually([&] { return endless.expired(); }, 40s)) << "the producer was kept after the client left";
}

}  // namespace
}  // namespace capsule::http::test
