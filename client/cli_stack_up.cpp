// `capsule stack up FILE`: the stack file (the API's JSON or a compose.yaml subset, read by stack_compose with
// yaml-cpp) posted to /v1/stacks; apart from the other stack commands because only capsule-full links yaml-cpp.
#include <cerrno>
#include <cstring>
#include <fstream>
#include <iostream>

#include "client/cli_daemon.h"
#include "client/cli_stack.h"
#include "client/json_read.h"
#include "client/stack_compose.h"
#include "http/unix_client.h"

namespace capsule::client {
namespace {

using nlohmann::json;

// The file's bytes, at most one more than kMaxStackFileBytes (stack_body_from_text refuses a longer file).
std::string read_stack_file(const std::string& path) {
  std::ifstream file(path, std::ios::binary);
  if (!file) throw std::runtime_error(path + ": cannot be read: " + std::strerror(errno));
  std::string content(kMaxStackFileBytes + 1, '\0');
  file.read(content.data(), static_cast<std::streamsize>(content.size()));
  content.resize(static_cast<std::size_t>(file.gcount()));
  return content;
}

}  // namespace

int cmd_stack_up(const std::string& socket, const StackCommands& c) {
  return exit_125_on_error([&] {
    const json body = stack_body_from_text(c.file, read_stack_file(c.file));
    const http::HttpClient client(socket);
    ensure_daemon(client);
    const json stack = http::request_json(client, "POST", c.detach ? "/v1/stacks" : "/v1/stacks?wait=true", body);
    if (c.json) {
      std::cout << stack.dump(2) << "\n";
    } else if (c.detach) {
      std::cout << text(stack, "id") << "\n";
      std::cerr << "capsule: stack " << text(stack, "id") << " " << text(stack, "state") << "; follow it with "
                << "capsule stack ps " << text(stack, "id") << "\n";
    } else {
      std::cout << format_stack_summary(stack);
    }
    return stack_exit_code(stack);
  });
}

}  // namespace capsule::client
