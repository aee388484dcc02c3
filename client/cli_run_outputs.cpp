// `capsule runs cp`: a finished run's kept outputs, through session cp's streaming and safe unpacking (libarchive:
// in capsule-full).
#include "client/cli_run_outputs.h"

#include <stdexcept>

#include "client/cli_runs.h"
#include "client/session_files.h"
#include "http/unix_client.h"

namespace capsule::client {

int cmd_runs_cp(const std::string& socket, const std::string& source, const std::string& destination) {
  const auto colon = source.find(':');
  if (colon == std::string::npos || colon == 0 || colon + 1 == source.size()) {
    throw std::invalid_argument("runs cp: the source is ID:PATH (PATH relative to /workspace, or absolute)");
  }
  const std::string id = source.substr(0, colon);
  const std::string path = source.substr(colon + 1);
  download_files(http::HttpClient(socket), run_path(id) + "/files?path=" + http::url_encode(path), path, destination);
  return 0;
}

}  // namespace capsule::client
