// The request pipeline declared in http/request_parser.h: Beast's parse errors mapped to their answers
// (431, 413, 505, 400), the Transfer-Encoding check, and the decoded, routed Request handed to a handler.
#include "http/request_parser.h"

#include <algorithm>
#include <boost/asio/buffer.hpp>
#include <boost/beast/core/string.hpp>
#include <boost/beast/http/error.hpp>
#include <cstdint>
#include <string>

#include "http/target.h"

namespace capsule::http {

namespace beast = boost::beast;
namespace bhttp = boost::beast::http;

namespace detail {

void apply_limits(RequestParser& parser, const ServerOptions& options) {
  parser.header_limit(static_cast<std::uint32_t>(std::min<std::size_t>(options.max_header_bytes, UINT32_MAX)));
  parser.body_limit(options.max_body_bytes);
}

std::optional<Response> read_error_response(const beast::error_code& ec, const ServerOptions& options) {
  if (ec == bhttp::error::header_limit) {
    return error_response("headers_too_large",
                          "the request header exceeds " + std::to_string(options.max_header_bytes) + " bytes");
  }
  if (ec == bhttp::error::body_limit) {
    return error_response("payload_too_large",
                          "the request body exceeds " + std::to_string(options.max_body_bytes) + " bytes");
  }
  if (ec == bhttp::error::bad_version) {  // Beast accepts only HTTP/1.0 and HTTP/1.1
    return error_response("http_version_not_supported", "only HTTP/1.0 and HTTP/1.1 are supported");
  }
  if (ec == bhttp::error::end_of_stream || ec.category() != bhttp::make_error_code(bhttp::error::end_of_stream).category()) {
    return std::nullopt;
  }
  return error_response("bad_request", "malformed HTTP request: " + ec.message());
}

std::optional<Response> check_header(const bhttp::request_header<>& header) {
  const auto [first, last] = header.equal_range(bhttp::field::transfer_encoding);
  for (auto field = first; field != last; ++field) {
    auto value = std::string_view(field->value().data(), field->value().size());
    while (!value.empty() && (value.front() == ' ' || value.front() == '\t')) value.remove_prefix(1);
    while (!value.empty() && (value.back() == ' ' || value.back() == '\t')) value.remove_suffix(1);
    if (!beast::iequals(beast::string_view(value.data(), value.size()), "chunked")) {
      return error_response("not_implemented", "Transfer-Encoding '" + std::string(value) + "' is not supported");
    }
  }
  return std::nullopt;
}

ParsedRequest route_request(RequestMessage&& message, const Router& router, const PeerCredentials& peer) {
  ParsedRequest out;
  out.complete = true;
  const std::string_view target(message.target().data(), message.target().size());
  auto parsed = parse_target(target);
  if (!parsed) {
    out.error = error_response("bad_request", "malformed request target: " + std::string(target));
    return out;
  }
  const std::string_view method(message.method_string().data(), message.method_string().size());
  auto match = router.match(method, parsed->segments);
  if (match.error) {
    out.error = std::move(match.error);
    return out;
  }
  Request& request = out.request;
  request.method = method;
  request.target = target;
  request.path = std::move(parsed->path);
  request.query = std::move(parsed->query);
  for (const auto& field : message) {
    const std::string name(field.name_string());
    const std::string value(field.value());
    auto [it, inserted] = request.headers.emplace(name, value);
    if (!inserted) it->second += ", " + value;
  }
  request.body = std::move(message.body());
  request.peer = peer;
  request.params = std::move(match.params);
  out.handler = match.handler;
  return out;
}

}  // namespace detail

ParsedRequest parse_request_bytes(std::string_view bytes, const Router& router, const ServerOptions& options) {
  ParsedRequest out;
  detail::RequestParser parser;
  detail::apply_limits(parser, options);
  beast::error_code ec;
  bool header_checked = false;
  while (!ec && !parser.is_done() && !bytes.empty()) {
    const auto used = parser.put(boost::asio::buffer(bytes.data(), bytes.size()), ec);
    bytes.remove_prefix(used);
    if (ec == bhttp::error::need_more) return out;  // incomplete: the server would wait for more
    if (!ec && parser.is_header_done() && !header_checked) {
      header_checked = true;
      if (auto error = detail::check_header(parser.get())) {
        out.complete = true;
        out.error = std::move(error);
        return out;
      }
      parser.eager(true);
    }
    if (!ec && used == 0) return out;
  }
  if (ec) {
    out.complete = true;
    out.error = detail::read_error_response(ec, options).value_or(error_response("bad_request", ec.message()));
    return out;
  }
  if (!parser.is_done()) return out;
  return detail::route_request(parser.release(), router, PeerCredentials{});
}

}  // namespace capsule::http
