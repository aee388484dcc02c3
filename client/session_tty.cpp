// The terminal side of a pty exec: a forwarder thread polls our stdin, SIGWINCH (a signalfd) and a wake pipe,
// and turns them into POST .../stdin and .../resize; the main thread relays the exec's event stream.
#include "client/session_tty.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/ioctl.h>
#include <sys/signalfd.h>
#include <termios.h>
#include <unistd.h>

#include <stdexcept>
#include <thread>

#include "base/unique_fd.h"
#include "client/cli_session.h"
#include "client/run_stream.h"

namespace capsule::client {
namespace {

using nlohmann::json;

// This terminal in raw mode (no echo, no line editing, no signals from keys) until destruction.
class RawTerminal {
 public:
  RawTerminal() {
    if (::tcgetattr(STDIN_FILENO, &saved_) != 0) throw std::runtime_error("session exec -t: stdin is not a terminal");
    termios raw = saved_;
    ::cfmakeraw(&raw);
    ::tcsetattr(STDIN_FILENO, TCSADRAIN, &raw);
  }
  ~RawTerminal() { ::tcsetattr(STDIN_FILENO, TCSADRAIN, &saved_); }
  RawTerminal(const RawTerminal&) = delete;
  RawTerminal& operator=(const RawTerminal&) = delete;

 private:
  termios saved_{};
};

std::pair<int, int> window_size() {
  winsize size{};
  if (::ioctl(STDIN_FILENO, TIOCGWINSZ, &size) != 0 || size.ws_row == 0 || size.ws_col == 0) return {24, 80};
  return {size.ws_row, size.ws_col};
}

// Feeds our stdin and window size to exec `exec_path` until told to stop (or stdin ends: then EOF is sent).
class Forwarder {
 public:
  Forwarder(const http::HttpClient& client, int winch_fd) : client_(client), winch_fd_(winch_fd) {
    int fds[2];
    if (::pipe2(fds, O_CLOEXEC) != 0) throw std::runtime_error("session exec -t: cannot make a pipe");
    wake_read_ = base::UniqueFd(fds[0]);
    wake_write_ = base::UniqueFd(fds[1]);
  }
  ~Forwarder() { stop(); }
  Forwarder(const Forwarder&) = delete;
  Forwarder& operator=(const Forwarder&) = delete;

  void start(std::string exec_path) {
    thread_ = std::thread([this, path = std::move(exec_path)] { loop(path); });
  }
  void stop() {
    if (!thread_.joinable()) return;
    const char byte = 0;
    (void)!::write(wake_write_.get(), &byte, 1);
    thread_.join();
  }

 private:
  void loop(const std::string& path) {
    bool stdin_open = true;
    char buffer[4096];
    for (;;) {
      pollfd fds[3] = {{wake_read_.get(), POLLIN, 0}, {winch_fd_, POLLIN, 0}, {stdin_open ? STDIN_FILENO : -1, POLLIN, 0}};
      if (::poll(fds, 3, -1) < 0) continue;
      if (fds[0].revents != 0) return;
      try {
        if (fds[1].revents != 0) {
          signalfd_siginfo info{};
          (void)!::read(winch_fd_, &info, sizeof info);
          const auto [rows, cols] = window_size();
          client_.request("POST", path + "/resize", {{"rows", rows}, {"cols", cols}});
        }
        if (fds[2].revents != 0) {
          const ssize_t n = ::read(STDIN_FILENO, buffer, sizeof buffer);
          if (n > 0) {
            client_.request_bytes("POST", path + "/stdin", std::string(buffer, static_cast<std::size_t>(n)),
                                  "application/octet-stream");
          } else {
            stdin_open = false;
            client_.request_bytes("POST", path + "/stdin?close=true", "", "application/octet-stream");
          }
        }
      } catch (const std::exception&) {
        // The exec ending races with what is typed: its stream says how it ended.
      }
    }
  }

  const http::HttpClient& client_;
  int winch_fd_;
  base::UniqueFd wake_read_, wake_write_;
  std::thread thread_;
};

}  // namespace

int exec_on_tty(const http::HttpClient& client, const std::string& session_id, json body, bool json_output) {
  if (!::isatty(STDIN_FILENO)) throw std::runtime_error("session exec -t: stdin is not a terminal");
  const auto [rows, cols] = window_size();
  body.erase("stdin");
  body.erase("stdin_b64");
  body["pty"] = true;
  body["rows"] = rows;
  body["cols"] = cols;

  sigset_t winch;
  sigemptyset(&winch);
  sigaddset(&winch, SIGWINCH);
  sigset_t old_mask;
  pthread_sigmask(SIG_BLOCK, &winch, &old_mask);
  const base::UniqueFd winch_fd(::signalfd(-1, &winch, SFD_CLOEXEC));
  Forwarder forwarder(client, winch_fd.get());
  RunEventRelay relay(json_output, [&](const std::string& exec_id) {
    forwarder.start(exec_path(session_id, exec_id));
  });
  http::HttpResponse response;
  {
    const RawTerminal raw;  // restored before anything below prints
    response = client.stream_lines("POST", session_path(session_id) + "/exec", body,
                                   {{"Accept", "application/x-ndjson"}}, [&relay](std::string_view line) { relay.on_line(line); });
    forwarder.stop();
  }
  pthread_sigmask(SIG_SETMASK, &old_mask, nullptr);
  http::throw_if_error(response);
  return report_finished(relay, json_output);
}

}  // namespace capsule::client
