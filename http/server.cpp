// HttpServer: binding its sockets (a Unix socket with its mode and group set before listen(), replacing only a
// dead leftover; loopback TCP; an inherited listening fd) and handing each to the shared ServerState to serve.
#include "http/server.h"

#include <spdlog/spdlog.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <algorithm>
#include <boost/asio/ip/address.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/local/stream_protocol.hpp>
#include <boost/asio/strand.hpp>
#include <cerrno>
#include <cstring>
#include <stdexcept>
#include <system_error>

#include "http/listener.h"
#include "http/router.h"

namespace capsule::http {

namespace net = boost::asio;
namespace beast = boost::beast;
using detail::Acceptor;

namespace {

std::string errno_text(int error) { return std::generic_category().message(error); }

// Removes a leftover socket file nobody listens on; throws if someone does or the file is not a socket.
void remove_stale_socket(const std::string& path) {
  struct stat st {};
  if (lstat(path.c_str(), &st) != 0) {
    if (errno == ENOENT) return;
    throw std::runtime_error("cannot inspect " + path + ": " + errno_text(errno));
  }
  if (!S_ISSOCK(st.st_mode)) throw std::runtime_error(path + " exists and is not a socket; refusing to replace it");
  const int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  if (fd < 0) throw std::runtime_error("cannot create a socket: " + errno_text(errno));
  sockaddr_un address{};
  address.sun_family = AF_UNIX;
  path.copy(address.sun_path, sizeof address.sun_path - 1);
  const int result = connect(fd, reinterpret_cast<const sockaddr*>(&address), sizeof address);
  const int error = errno;
  ::close(fd);
  if (result == 0 || error == EAGAIN || error == EINPROGRESS) {
    throw std::runtime_error("another process is already listening on " + path);
  }
  if (error != ECONNREFUSED) throw std::runtime_error("cannot check whether " + path + " is in use: " + errno_text(error));
  if (unlink(path.c_str()) != 0 && errno != ENOENT) {
    throw std::runtime_error("cannot remove the stale socket " + path + ": " + errno_text(errno));
  }
  spdlog::info("http: removed the stale socket {}", path);
}

}  // namespace

HttpServer::HttpServer(net::io_context& io, const Router& router, ServerOptions options)
    : state_(std::make_shared<detail::ServerState>(io, nullptr, router, std::move(options))) {}

HttpServer::HttpServer(net::io_context& io, std::shared_ptr<const Router> router, ServerOptions options)
    : state_(std::make_shared<detail::ServerState>(io, router, *router, std::move(options))) {}

HttpServer::~HttpServer() { stop(); }

void HttpServer::listen_unix(const std::string& path, mode_t mode, std::optional<gid_t> group) {
  if (path.empty() || path.size() >= sizeof(sockaddr_un::sun_path)) {
    throw std::runtime_error("unusable socket path (empty or longer than 107 bytes): " + path);
  }
  remove_stale_socket(path);
  Acceptor acceptor(net::make_strand(state_->io));
  beast::error_code ec;
  const net::generic::stream_protocol::endpoint endpoint{net::local::stream_protocol::endpoint(path)};
  acceptor.open(endpoint.protocol(), ec);
  if (!ec) acceptor.bind(endpoint, ec);
  if (ec) throw std::runtime_error("cannot bind " + path + ": " + ec.message());
  // Permissions are set before listen(), so nobody can connect while the socket still has umask permissions.
  auto fail = [&](const std::string& what) {
    const int error = errno;
    unlink(path.c_str());
    throw std::runtime_error(what + " " + path + ": " + errno_text(error));
  };
  if (chmod(path.c_str(), mode) != 0) fail("cannot chmod");
  if (group && chown(path.c_str(), static_cast<uid_t>(-1), *group) != 0) fail("cannot chown");
  acceptor.listen(net::socket_base::max_listen_connections, ec);
  if (ec) {
    unlink(path.c_str());
    throw std::runtime_error("cannot listen on " + path + ": " + ec.message());
  }
  struct stat st {};
  stat(path.c_str(), &st);
  state_->serve(std::move(acceptor), [path, device = st.st_dev, inode = st.st_ino] {
    struct stat now {};
    if (lstat(path.c_str(), &now) == 0 && now.st_dev == device && now.st_ino == inode) unlink(path.c_str());
  });
}

unsigned short HttpServer::listen_tcp(const std::string& address, unsigned short port) {
  beast::error_code ec;
  const auto ip = net::ip::make_address(address, ec);
  if (ec || !ip.is_loopback()) throw std::invalid_argument("not a loopback address: " + address);
  const net::ip::tcp::endpoint tcp_endpoint(ip, port);
  const net::generic::stream_protocol::endpoint endpoint(tcp_endpoint);
  Acceptor acceptor(net::make_strand(state_->io));
  acceptor.open(endpoint.protocol(), ec);
  if (!ec) acceptor.set_option(net::socket_base::reuse_address(true), ec);
  if (!ec) acceptor.bind(endpoint, ec);
  if (!ec) acceptor.listen(net::socket_base::max_listen_connections, ec);
  const auto bound = acceptor.local_endpoint(ec);
  if (ec) throw std::runtime_error("cannot listen on " + address + ":" + std::to_string(port) + ": " + ec.message());
  net::ip::tcp::endpoint bound_tcp;
  std::memcpy(bound_tcp.data(), bound.data(), std::min<std::size_t>(bound.size(), bound_tcp.capacity()));
  state_->serve(std::move(acceptor));
  return bound_tcp.port();
}

void HttpServer::listen_fd(int listening_fd) {
  Acceptor acceptor(net::make_strand(state_->io));
  beast::error_code ec;
  sockaddr_storage address{};
  socklen_t length = sizeof address;
  if (getsockname(listening_fd, reinterpret_cast<sockaddr*>(&address), &length) != 0) {
    const int error = errno;
    close(listening_fd);
    throw std::runtime_error("not a socket: " + errno_text(error));
  }
  acceptor.assign(net::generic::stream_protocol(address.ss_family, SOCK_STREAM), listening_fd, ec);
  if (ec) {
    close(listening_fd);
    throw std::runtime_error("cannot serve on the given socket: " + ec.message());
  }
  state_->serve(std::move(acceptor));
}

void HttpServer::stop() { state_->stop(); }

std::size_t HttpServer::active_connections() const { return state_->active_connections(); }

}  // namespace capsule::http
