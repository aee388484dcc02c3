// HttpClient: a blocking HTTP/1.1 client for the proxy's upstreams over Boost.Beast, plain or TLS (OpenSSL,
// certificates and host names verified), with a keep-alive connection pool, timeouts and retries with backoff.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace capsule::proxy {

struct HeaderLess {
  using is_transparent = void;
  bool operator()(std::string_view a, std::string_view b) const;  // ASCII case-insensitive
};
using HttpHeaders = std::map<std::string, std::string, HeaderLess>;

struct HttpClientOptions {
  std::chrono::milliseconds connect_timeout{10000};  // TCP connect and TLS handshake (DNS: the system's own)
  std::chrono::milliseconds request_timeout{60000};  // one attempt, request to last body byte (sink time counts)
  // 429, 5xx, connection failures and timeouts are retried; certificate failures and oversized bodies are not.
  int max_attempts = 4;
  std::chrono::milliseconds initial_backoff{200};  // doubled per attempt; Retry-After (seconds or date) wins
  std::chrono::milliseconds max_backoff{5000};     // caps both
  std::size_t max_idle_per_host = 8;               // kept-alive connections per scheme://host:port
  std::chrono::milliseconds max_idle{30000};       // a pooled connection unused this long is closed
  std::string ca_file;                             // PEM bundle; empty: OpenSSL's default verify paths
  std::uint64_t max_body_bytes = 4ULL << 30;
  int max_redirects = 5;  // 301/302/303/307/308 followed (never https -> http); 0: returned as they are
  std::string user_agent = "capsule-proxy";
};

struct HttpResponse {
  unsigned status = 0;
  HttpHeaders headers;  // repeated fields joined with ", "
  std::string body;     // empty for HEAD and for get_to()
  std::string url;      // the URL finally answered, after redirects
};

using BodySink = std::function<void(const char* data, std::size_t size)>;

// Thread-safe: any number of threads may issue requests at once; each borrows a pooled connection. Requests
// carry Host, User-Agent and Accept-Encoding: identity; the caller's headers are added last and win (a name or
// value with CR, LF or NUL throws std::invalid_argument).
class HttpClient {
 public:
  // Throws ProxyError 500 "bad_ca_file" when options.ca_file cannot be loaded.
  explicit HttpClient(HttpClientOptions options = {});
  ~HttpClient();
  HttpClient(const HttpClient&) = delete;
  HttpClient& operator=(const HttpClient&) = delete;

  // The final response after redirects and retries, whatever its status (404 is an answer, not an error; a
  // 429/5xx still there after the last attempt is returned too). Throws ProxyError, subject the URL, detail
  // the cause: 502 "upstream_unavailable" (not an http(s) URL, connect/TLS/protocol failure after the last
  // attempt, too many redirects), 504 "upstream_timeout" (the last attempt timed out), 502
  // "upstream_too_large" (body over max_body_bytes; not retried).
  HttpResponse get(const std::string& url, const std::vector<std::pair<std::string, std::string>>& headers = {});
  HttpResponse head(const std::string& url, const std::vector<std::pair<std::string, std::string>>& headers = {});
  // As get(), but a 200 body is streamed to `sink` as it arrives instead of being kept (other statuses keep
  // their body in the response). A retry after part of a body was streamed is refused (throws 502), because
  // the sink cannot take bytes back.
  HttpResponse get_to(const std::string& url, const BodySink& sink,
                      const std::vector<std::pair<std::string, std::string>>& headers = {});

  // Counters for tests and metrics.
  std::uint64_t connections_opened() const;
  std::uint64_t requests_sent() const;  // requests written: retries, redirects and stale-connection replays too

 private:
  struct State;
  std::unique_ptr<State> state_;
};

}  // namespace capsule::proxy
