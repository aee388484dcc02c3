// The pipes between the launcher and a sandbox: plain close-on-exec pipes, and a stdin that either feeds
// bytes (a socket pair: no SIGPIPE in the daemon) or reads as EOF at once.
#pragma once

#include "base/unique_fd.h"

namespace capsule::sandbox {

struct Pipe {
  base::UniqueFd read_end;
  base::UniqueFd write_end;
};

Pipe make_pipe();  // throws SandboxError (step "pipes")
// has_data: a socket pair whose write end the caller feeds with send(MSG_NOSIGNAL); otherwise a pipe whose
// write end the caller closes at once.
Pipe make_stdin(bool has_data);

}  // namespace capsule::sandbox
