// `capsule runs cp ID:PATH DEST`: a finished run's kept outputs, fetched through GET /v1/runs/{id}/files (a file,
// or a directory's tar unpacked safely). In capsule-full, with session cp's unpacking.
#pragma once

#include <string>

namespace capsule::client {

// PATH relative: under the run's /workspace; absolute: in its root filesystem. A file is written to DEST (or
// into DEST when it is a directory); a directory's tar is unpacked under DEST (created when missing) refusing
// absolute names, ".." and writes through symlinks. Prints nothing; returns 0 or throws.
int cmd_runs_cp(const std::string& socket, const std::string& source, const std::string& destination);

}  // namespace capsule::client
