// HttpClient: connections that each own a small io_context driven against deadlines, a mutex-guarded idle
// pool, and the redirect and retry loops around one request/response exchange.
#include "proxy/upstream/http_client.h"

#include <openssl/ssl.h>
#include <openssl/x509_vfy.h>
#include <openssl/x509v3.h>
#include <poll.h>

#include <algorithm>
#include <atomic>
#include <boost/asio/connect.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/address.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/ssl.hpp>
#include <boost/beast/core/flat_buffer.hpp>
#include <boost/beast/http.hpp>
#include <mutex>
#include <optional>
#include <stdexcept>
#include <thread>

#include "proxy/cutoff.h"
#include "proxy/error.h"
#include "proxy/upstream/url.h"

namespace capsule::proxy {
namespace {

namespace net = boost::asio;
namespace ssl = net::ssl;
namespace beast = boost::beast;
namespace bhttp = boost::beast::http;
using tcp = net::ip::tcp;
using Clock = std::chrono::steady_clock;
using boost::system::error_code;
using std::chrono::milliseconds;

constexpr std::size_t kChunkBytes = 64 * 1024;
constexpr std::uint32_t kHeaderLimit = 64 * 1024;

// A failed exchange below HTTP (cause().detail says what failed; code() is upstream_timeout or
// upstream_unavailable), and whether another attempt may help.
struct TransportError : base::Error {
  explicit TransportError(std::string cause, bool timed_out = false)
      : base::Error(base::Cause{"upstream", "", 0, std::move(cause)},
                    timed_out ? "upstream_timeout" : "upstream_unavailable") {}
  bool retryable = true;
  bool stale = false;     // a reused connection failed before any response byte: the server had closed it
  bool streamed = false;  // part of a 200 body had already reached the sink
};

TransportError timeout_error(const std::string& cause) { return TransportError(cause, /*timed_out=*/true); }

std::string millis_text(milliseconds duration) { return std::to_string(duration.count()) + " ms"; }

bool is_ip_literal(const std::string& host) {
  error_code ec;
  net::ip::make_address(host, ec);
  return !ec;
}

// One TCP (or TLS over TCP) connection with the io_context its operations run on; used by one thread at a time.
class Connection {
 public:
  Connection(const Url& url, ssl::context* tls_context, milliseconds connect_timeout)
      : key_(url.origin()), socket_(ioc_) {
    const auto deadline = Clock::now() + connect_timeout;
    const std::string where = url.authority();
    error_code ec;
    tcp::resolver resolver(ioc_);
    const auto endpoints = resolver.resolve(url.host, std::to_string(url.port), tcp::resolver::numeric_service, ec);
    if (ec) throw TransportError("resolve " + url.host + ": " + ec.message());
    bool timed_out = false;
    ec = run([&endpoints](tcp::socket& socket, auto handler) { net::async_connect(socket, endpoints, handler); },
             deadline, timed_out);
    if (timed_out)
      throw timeout_error("connect to " + where + ": no connection within " + millis_text(connect_timeout));
    if (ec) throw TransportError("connect to " + where + ": " + ec.message());
    socket_.set_option(tcp::no_delay(true), ec);
    if (tls_context) handshake(url, *tls_context, deadline, connect_timeout);
  }

  const std::string& key() const { return key_; }
  beast::flat_buffer& buffer() { return buffer_; }
  Clock::time_point idle_since{};

  // Runs one asynchronous operation, started by op(stream, handler) on the plain or TLS stream, until it
  // completes or `deadline` passes; then the socket is closed, which aborts it, and timed_out is set.
  template <class Op>
  error_code run_on_stream(Op op, Clock::time_point deadline, bool& timed_out) {
    if (tls_) {
      return run([&op, this](tcp::socket&, auto handler) { op(*tls_, handler); }, deadline, timed_out);
    }
    return run([&op](tcp::socket& socket, auto handler) { op(socket, handler); }, deadline, timed_out);
  }

  // An idle connection the server has closed (or written to unasked) is readable: not worth reusing.
  bool looks_open() {
    pollfd descriptor{socket_.native_handle(), POLLIN, 0};
    return ::poll(&descriptor, 1, 0) == 0;
  }

 private:
  template <class Op>
  error_code run(Op op, Clock::time_point deadline, bool& timed_out) {
    bool done = false;
    error_code result;
    op(socket_, [&done, &result](error_code ec, auto&&...) {
      done = true;
      result = ec;
    });
    ioc_.restart();
    ioc_.run_until(deadline);
    if (done) return result;
    timed_out = true;
    error_code ignored;
    socket_.close(ignored);
    ioc_.restart();
    ioc_.run();  // lets the aborted operation complete
    return net::error::timed_out;
  }

  void handshake(const Url& url, ssl::context& context, Clock::time_point deadline, milliseconds timeout) {
    const std::string where = url.authority();
    tls_.emplace(socket_, context);
    SSL* native = tls_->native_handle();
    X509_VERIFY_PARAM* param = SSL_get0_param(native);
    X509_VERIFY_PARAM_set_hostflags(param, X509_CHECK_FLAG_NO_PARTIAL_WILDCARDS);
    bool configured;
    if (is_ip_literal(url.host)) {
      configured = X509_VERIFY_PARAM_set1_ip_asc(param, url.host.c_str()) == 1;
    } else {
      configured = SSL_set_tlsext_host_name(native, url.host.c_str()) == 1 &&
                   X509_VERIFY_PARAM_set1_host(param, url.host.c_str(), 0) == 1;
    }
    if (!configured) throw TransportError("TLS with " + where + ": cannot set the expected host name");
    bool timed_out = false;
    const error_code ec =
        run([this](tcp::socket&, auto handler) { tls_->async_handshake(ssl::stream_base::client, handler); }, deadline,
            timed_out);
    if (timed_out) throw timeout_error("TLS handshake with " + where + ": not done within " + millis_text(timeout));
    if (!ec) return;
    const long verify = SSL_get_verify_result(native);
    if (verify != X509_V_OK) {
      TransportError error("TLS handshake with " + where +
                           ": certificate verification failed: " + X509_verify_cert_error_string(verify));
      error.retryable = false;
      throw error;
    }
    throw TransportError("TLS handshake with " + where + ": " + ec.message());
  }

  std::string key_;
  net::io_context ioc_{1};
  tcp::socket socket_;
  std::optional<ssl::stream<tcp::socket&>> tls_;
  beast::flat_buffer buffer_;
};

bool is_retryable_status(unsigned status) { return status == 429 || (status >= 500 && status <= 599); }

bool is_redirect(unsigned status) {
  return status == 301 || status == 302 || status == 303 || status == 307 || status == 308;
}

// Retry-After as delta-seconds or an HTTP date; nullopt when absent or unreadable.
std::optional<milliseconds> retry_after(const HttpHeaders& headers) {
  const auto found = headers.find("Retry-After");
  if (found == headers.end()) return std::nullopt;
  const std::string& value = found->second;
  if (!value.empty() && value.size() <= 9 &&
      std::all_of(value.begin(), value.end(), [](char c) { return c >= '0' && c <= '9'; })) {
    return milliseconds(std::stoll(value) * 1000);
  }
  if (const auto at = parse_http_date(value)) {
    const Micros now =
        std::chrono::duration_cast<std::chrono::microseconds>(std::chrono::system_clock::now().time_since_epoch())
            .count();
    return milliseconds(std::max<Micros>(0, (*at - now) / 1000));
  }
  return std::nullopt;
}

void check_header(const std::string& name, const std::string& value) {
  const bool bad_name =
      name.empty() || std::any_of(name.begin(), name.end(), [](char c) {
        return static_cast<unsigned char>(c) <= 0x20 || static_cast<unsigned char>(c) >= 0x7f || c == ':';
      });
  if (bad_name || value.find_first_of(std::string_view("\r\n\0", 3)) != std::string::npos) {
    throw std::invalid_argument("HttpClient: malformed request header " + name);
  }
}

}  // namespace

bool HeaderLess::operator()(std::string_view a, std::string_view b) const {
  const auto fold = [](char c) { return c >= 'A' && c <= 'Z' ? static_cast<char>(c + ('a' - 'A')) : c; };
  return std::lexicographical_compare(a.begin(), a.end(), b.begin(), b.end(),
                                      [&fold](char x, char y) { return fold(x) < fold(y); });
}

struct HttpClient::State {
  using Headers = std::vector<std::pair<std::string, std::string>>;

  HttpClientOptions options;
  ssl::context tls_context{ssl::context::tls_client};
  std::mutex mutex;
  std::map<std::string, std::vector<std::unique_ptr<Connection>>> idle;  // by scheme://host[:port]
  std::atomic<std::uint64_t> connections_opened{0};
  std::atomic<std::uint64_t> requests_sent{0};

  explicit State(HttpClientOptions client_options) : options(std::move(client_options)) {
    tls_context.set_options(ssl::context::default_workarounds | ssl::context::no_sslv2 | ssl::context::no_sslv3 |
                            ssl::context::no_tlsv1 | ssl::context::no_tlsv1_1);
    tls_context.set_verify_mode(ssl::verify_peer);
    error_code ec;
    if (options.ca_file.empty()) {
      tls_context.set_default_verify_paths(ec);
    } else {
      tls_context.load_verify_file(options.ca_file, ec);
    }
    if (ec) {
      throw ProxyError("bad_ca_file", "upstream", options.ca_file.empty() ? "default paths" : options.ca_file,
                       "cannot load CA certificates: " + ec.message());
    }
  }

  HttpResponse execute(std::string_view url_text, bhttp::verb method, const Headers& headers, const BodySink* sink) {
    const std::string requested(url_text);
    std::optional<Url> url = parse_url(url_text);
    if (!url) throw ProxyError("upstream_unavailable", "upstream", requested, "not an absolute http(s) URL");
    for (int redirects = 0;; ++redirects) {
      HttpResponse response = with_retries(*url, method, headers, sink);
      response.url = url->str();
      const auto location = response.headers.find("Location");
      if (!is_redirect(response.status) || location == response.headers.end() || options.max_redirects == 0) {
        return response;
      }
      if (redirects >= options.max_redirects) {
        throw ProxyError("upstream_unavailable", "upstream", requested,
            "more than " + std::to_string(options.max_redirects) + " redirects (last to " + location->second + ")");
      }
      const auto next_text = resolve_url(url->str(), location->second);
      std::optional<Url> next = next_text ? parse_url(*next_text) : std::nullopt;
      if (!next) {
        throw ProxyError("upstream_unavailable", "upstream", url->str(),
                         "redirect to an unusable Location: " + location->second);
      }
      if (url->scheme == "https" && next->scheme == "http") {
        throw ProxyError("upstream_unavailable", "upstream", url->str(),
                         "redirect from https to http refused: " + next->str());
      }
      url = std::move(next);
    }
  }

  HttpResponse with_retries(const Url& url, bhttp::verb method, const Headers& headers, const BodySink* sink) {
    const int attempts = std::max(1, options.max_attempts);
    for (int attempt = 1;; ++attempt) {
      milliseconds delay;
      try {
        HttpResponse response = attempt_once(url, method, headers, sink);
        if (!is_retryable_status(response.status) || attempt >= attempts) return response;
        delay = std::min(retry_after(response.headers).value_or(backoff(attempt)), options.max_backoff);
      } catch (const TransportError& error) {
        const bool last = attempt >= attempts || !error.retryable || error.streamed;
        if (last) {
          // Rethrown with what only this loop knows: the URL, whether a retry was possible, how many were made.
          std::string detail = error.cause().detail;
          if (error.streamed) detail += " (part of the body was already delivered; not retried)";
          if (attempts > 1) detail += " (attempt " + std::to_string(attempt) + " of " + std::to_string(attempts) + ")";
          throw ProxyError(error.code(), "upstream", url.str(), detail);
        }
        delay = backoff(attempt);
      }
      std::this_thread::sleep_for(delay);
    }
  }

  milliseconds backoff(int attempt) const {
    milliseconds delay = options.initial_backoff;
    for (int i = 1; i < attempt && delay < options.max_backoff; ++i) delay *= 2;
    return std::min(delay, options.max_backoff);
  }

  // One attempt: on a pooled connection if there is one, else a new one. A pooled connection the server had
  // already closed is replaced once, transparently.
  HttpResponse attempt_once(const Url& url, bhttp::verb method, const Headers& headers, const BodySink* sink) {
    std::unique_ptr<Connection> connection = take_idle(url.origin());
    for (;;) {
      const bool reused = connection != nullptr;
      if (!reused) connection = open(url);
      try {
        bool reusable = false;
        HttpResponse response = exchange(*connection, url, method, headers, sink, reused, reusable);
        if (reusable) give_back(std::move(connection));
        return response;
      } catch (const TransportError& error) {
        if (!error.stale) throw;
        connection.reset();
      }
    }
  }

  std::unique_ptr<Connection> open(const Url& url) {
    auto connection =
        std::make_unique<Connection>(url, url.scheme == "https" ? &tls_context : nullptr, options.connect_timeout);
    ++connections_opened;
    return connection;
  }

  std::unique_ptr<Connection> take_idle(const std::string& key) {
    std::lock_guard lock(mutex);
    const auto found = idle.find(key);
    if (found == idle.end()) return nullptr;
    auto& connections = found->second;
    while (!connections.empty()) {
      std::unique_ptr<Connection> connection = std::move(connections.back());
      connections.pop_back();
      if (Clock::now() - connection->idle_since < options.max_idle && connection->looks_open()) return connection;
    }
    return nullptr;
  }

  void give_back(std::unique_ptr<Connection> connection) {
    connection->idle_since = Clock::now();
    std::lock_guard lock(mutex);
    auto& connections = idle[connection->key()];
    if (connections.size() < options.max_idle_per_host) connections.push_back(std::move(connection));
  }

  // Sends one request and reads its response; a 200 body goes to `sink` when there is one. `reusable` tells
  // whether the connection may serve another request. Throws TransportError, or ProxyError for a body over
  // max_body_bytes.
  HttpResponse exchange(Connection& connection, const Url& url, bhttp::verb method, const Headers& headers,
                        const BodySink* sink, bool reused, bool& reusable) {
    bhttp::request<bhttp::empty_body> request{method, url.target, 11};
    request.set(bhttp::field::host, url.authority());
    request.set(bhttp::field::user_agent, options.user_agent);
    request.set(bhttp::field::accept_encoding, "identity");
    for (const auto& header : headers) {
      check_header(header.first, header.second);
      request.set(header.first, header.second);
    }

    const auto deadline = Clock::now() + options.request_timeout;
    bool timed_out = false;
    const auto no_response = [&] {
      return timeout_error("no complete response within " + millis_text(options.request_timeout));
    };
    const auto stale = [](const std::string& cause) {
      TransportError error(cause);
      error.stale = true;
      return error;
    };
    ++requests_sent;
    error_code ec = connection.run_on_stream(
        [&request](auto& stream, auto handler) { bhttp::async_write(stream, request, handler); }, deadline, timed_out);
    if (timed_out) throw no_response();
    if (ec && reused) throw stale("send request on a kept-alive connection: " + ec.message());
    if (ec) throw TransportError("send request: " + ec.message());

    bhttp::response_parser<bhttp::buffer_body> parser;
    parser.header_limit(kHeaderLimit);
    parser.body_limit(options.max_body_bytes);
    if (method == bhttp::verb::head) parser.skip(true);
    ec = connection.run_on_stream(
        [&connection, &parser](auto& stream, auto handler) {
          bhttp::async_read_header(stream, connection.buffer(), parser, handler);
        },
        deadline, timed_out);
    if (timed_out) throw no_response();
    if (ec == bhttp::error::body_limit) throw too_large(url);
    if (ec && reused && !parser.got_some()) throw stale("read response on a kept-alive connection: " + ec.message());
    if (ec) throw TransportError("read response header: " + ec.message());

    auto& message = parser.get();
    HttpResponse response;
    response.status = message.result_int();
    for (const auto& field : message) {
      const std::string_view name(field.name_string().data(), field.name_string().size());
      const std::string_view value(field.value().data(), field.value().size());
      const auto [slot, inserted] = response.headers.emplace(name, value);
      if (!inserted) slot->second.append(", ").append(value);
    }

    const bool to_sink = sink != nullptr && response.status == 200;
    bool streamed = false;
    std::vector<char> chunk;
    while (!parser.is_done()) {
      chunk.resize(kChunkBytes);
      message.body().data = chunk.data();
      message.body().size = chunk.size();
      ec = connection.run_on_stream(
          [&connection, &parser](auto& stream, auto handler) {
            bhttp::async_read(stream, connection.buffer(), parser, handler);
          },
          deadline, timed_out);
      if (ec == bhttp::error::need_buffer) ec = {};
      if (ec == bhttp::error::body_limit) throw too_large(url);
      if (timed_out || ec) {
        TransportError error = timed_out ? no_response() : TransportError("read response body: " + ec.message());
        error.streamed = streamed;
        throw error;
      }
      const std::size_t received = chunk.size() - message.body().size;
      if (to_sink && received > 0) {
        (*sink)(chunk.data(), received);
        streamed = true;
      } else if (!to_sink) {
        response.body.append(chunk.data(), received);
      }
    }
    reusable = message.keep_alive() && !parser.need_eof() && connection.buffer().size() == 0;
    return response;
  }

  ProxyError too_large(const Url& url) const {
    return ProxyError("upstream_too_large", "upstream", url.str(),
                      "body larger than " + std::to_string(options.max_body_bytes) + " bytes");
  }
};

HttpClient::HttpClient(HttpClientOptions options) : state_(std::make_unique<State>(std::move(options))) {}

HttpClient::~HttpClient() = default;

HttpResponse HttpClient::get(const std::string& url, const std::vector<std::pair<std::string, std::string>>& headers) {
  return state_->execute(url, bhttp::verb::get, headers, nullptr);
}

HttpResponse HttpClient::head(const std::string& url, const std::vector<std::pair<std::string, std::string>>& headers) {
  return state_->execute(url, bhttp::verb::head, headers, nullptr);
}

HttpResponse HttpClient::get_to(const std::string& url, const BodySink& sink,
                                const std::vector<std::pair<std::string, std::string>>& headers) {
  return state_->execute(url, bhttp::verb::get, headers, &sink);
}

std::uint64_t HttpClient::connections_opened() const { return state_->connections_opened; }

std::uint64_t HttpClient::requests_sent() const { return state_->requests_sent; }

}  // namespace capsule::proxy
