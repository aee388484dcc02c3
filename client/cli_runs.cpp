// The runs subcommands: a listing page as the table run_view draws (or the API's JSON), one run as JSON, its
// logs relayed byte for byte, cancel and rm by id.
#include "client/cli_runs.h"

#include <unistd.h>

#include <chrono>
#include <iostream>
#include <nlohmann/json.hpp>

#include "client/run_view.h"
#include "http/unix_client.h"

namespace capsule::client {

using nlohmann::json;

std::string run_path(const std::string& id) { return "/v1/runs/" + http::url_encode(id); }

int cmd_runs_ls(const std::string& socket, const std::string& state, const std::string& label,
                std::optional<int> limit, const std::string& after, bool with_probes, bool json_output) {
  std::string target = "/v1/runs";
  char separator = '?';
  const auto add = [&](const std::string& name, const std::string& value) {
    if (value.empty()) return;
    target += separator + name + "=" + http::url_encode(value);
    separator = '&';
  };
  add("state", state);
  add("label", label);
  add("limit", limit ? std::to_string(*limit) : "");
  add("after", after);
  add("include", with_probes ? "probes" : "");
  const json page = http::request_json(http::HttpClient(socket), "GET", target);
  if (json_output) {
    std::cout << page.dump(2) << "\n";
    return 0;
  }
  const auto now = std::chrono::duration_cast<std::chrono::milliseconds>(
                       std::chrono::system_clock::now().time_since_epoch()).count();
  std::cout << format_runs_table(page.value("runs", json::array()), now);
  if (page.contains("next") && page["next"].is_string()) {
    std::cerr << "capsule: more runs: capsule runs ls --after " << page["next"].get<std::string>() << "\n";
  }
  return 0;
}

int cmd_runs_show(const std::string& socket, const std::string& id) {
  std::cout << http::request_json(http::HttpClient(socket), "GET", run_path(id)).dump(2) << "\n";
  return 0;
}

int cmd_runs_logs(const std::string& socket, const std::string& id, bool stderr_stream, bool follow,
                  std::optional<int> tail) {
  const std::string target = run_path(id) + "/logs?stream=" + (stderr_stream ? "stderr" : "stdout") +
                             (tail ? "&tail=" + std::to_string(*tail) : "") + (follow ? "&follow=true" : "");
  const http::HttpResponse response = http::HttpClient(socket).stream(
      "GET", target, nullptr, {}, [](std::string_view data) { relay_output(STDOUT_FILENO, data); });
  http::throw_if_error(response);
  return 0;
}

int cmd_runs_cancel(const std::string& socket, const std::string& id) {
  http::request_json(http::HttpClient(socket), "POST", run_path(id) + "/cancel");
  std::cout << id << "\n";
  return 0;
}

int cmd_runs_rm(const std::string& socket, const std::vector<std::string>& ids) {
  const http::HttpClient client(socket);
  int status = 0;
  for (const std::string& id : ids) {
    try {
      http::throw_if_error(client.request("DELETE", run_path(id)));
      std::cout << id << "\n";
    } catch (const http::ResponseError& e) {
      std::cerr << "capsule: runs rm " << id << ": " << e.what() << "\n";
      status = 1;
    }
  }
  return status;
}

int cmd_runs_commit(const std::string& socket, const std::string& id, const std::string& ref) {
  const nlohmann::json image =
      http::request_json(http::HttpClient(socket), "POST", run_path(id) + "/commit", {{"ref", ref}});
  std::cout << image.value("digest", "") << "\n";
  return 0;
}

}  // namespace capsule::client
