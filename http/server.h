// The HTTP/1.1 server (Boost.Beast) as its owner sees it: serve a Router on Unix sockets, loopback TCP or a
// given listening socket, under ServerOptions' limits and deadlines, and stop. The rest of http/ does the work.
#pragma once

#include <sys/types.h>

#include <boost/asio/io_context.hpp>
#include <cstddef>
#include <memory>
#include <optional>
#include <string>

#include "http/server_options.h"

namespace capsule::http {

class Router;

namespace detail {
class ServerState;
}  // namespace detail

// Serves `router` on the caller's io_context, which may be run on any number of threads (each connection is
// serialised on its own strand). The router must outlive the io_context's use of it; destroy the server before
// the io_context.
class HttpServer {
 public:
  HttpServer(boost::asio::io_context& io, const Router& router, ServerOptions options = {});
  // As above, keeping the router alive for as long as a connection may still use it.
  HttpServer(boost::asio::io_context& io, std::shared_ptr<const Router> router, ServerOptions options = {});
  ~HttpServer();  // stop()
  HttpServer(const HttpServer&) = delete;
  HttpServer& operator=(const HttpServer&) = delete;

  // Listens on a Unix socket created with `mode` (and `group`, when given). A socket file nobody listens on
  // (a leftover) is replaced; a live one, or any other kind of file, makes this throw std::runtime_error.
  void listen_unix(const std::string& path, mode_t mode, std::optional<gid_t> group);
  // Listens on a loopback address (127.0.0.1, ::1); port 0 picks one. Returns the bound port. Throws
  // std::invalid_argument for a non-loopback address, std::runtime_error when binding fails.
  unsigned short listen_tcp(const std::string& address, unsigned short port);

  // Serves on a socket already bound and listening (e.g. one made inside a sandbox's network namespace),
  // taking ownership of the descriptor (closed on failure too). Throws std::runtime_error if it is unusable.
  void listen_fd(int listening_fd);

  // Stops accepting (and removes the Unix socket files it created), closes connections waiting for a request,
  // and lets responses in flight finish, closing those connections afterwards. Callable from any thread.
  void stop();
  // Connections currently open.
  std::size_t active_connections() const;

 private:
  std::shared_ptr<detail::ServerState> state_;
};

}  // namespace capsule::http
