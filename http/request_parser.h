// From bytes to a routed Request: the Beast parser under ServerOptions' limits, header checks, target decoding
// and routing, with the error response for each way a request can be refused. Used by every connection, and
// without a socket by parse_request_bytes (the fuzz target and tests).
#pragma once

#include <boost/beast/core/error.hpp>
#include <boost/beast/http/message.hpp>
#include <boost/beast/http/parser.hpp>
#include <boost/beast/http/string_body.hpp>
#include <optional>
#include <string_view>

#include "http/request.h"
#include "http/response.h"
#include "http/router.h"
#include "http/server_options.h"

namespace capsule::http {

// What the server does with one request's bytes before calling a handler, without a socket: the Beast parser
// with `options`' limits, header checks, target decoding and routing. For the fuzz target and tests.
struct ParsedRequest {
  bool complete = false;            // a whole request was parsed (or an error decided)
  std::optional<Response> error;    // the error response the server would send
  Request request;                  // filled when complete without error
  const Handler* handler = nullptr;
};
ParsedRequest parse_request_bytes(std::string_view bytes, const Router& router, const ServerOptions& options);

namespace detail {

using RequestMessage = boost::beast::http::request<boost::beast::http::string_body>;
using RequestParser = boost::beast::http::request_parser<boost::beast::http::string_body>;

// Sets the parser's header and body limits from `options`.
void apply_limits(RequestParser& parser, const ServerOptions& options);
// The answer to a failed read, or nullopt when the connection should just close (client went away).
std::optional<Response> read_error_response(const boost::beast::error_code& ec, const ServerOptions& options);
// Checks made once the header is in, before the body is read (only the chunked Transfer-Encoding is served).
std::optional<Response> check_header(const boost::beast::http::request_header<>& header);
// Decoding and routing of a complete request message: always `complete`, with an error or a handler.
ParsedRequest route_request(RequestMessage&& message, const Router& router, const PeerCredentials& peer);

}  // namespace detail
}  // namespace capsule::http
