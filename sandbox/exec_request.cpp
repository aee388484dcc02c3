// JSON encoding of ExecRequest for the launcher -> capsule-init channel.
// The only place these fields are mapped; both sides use it.
#include "sandbox/exec_request.h"

#include <nlohmann/json.hpp>

#include "sandbox/error.h"

namespace capsule::sandbox {

NLOHMANN_DEFINE_TYPE_NON_INTRUSIVE(ExecRequest, op, id, argv, env, cwd, uid, gid, nofile, fsize_bytes, stack_bytes,
                                   cgroup_fds, prepared, controlling_tty, ends_sandbox, watchdog_ns, kill_grace_ms)

std::string encode_exec_request(const ExecRequest& request) {
  const nlohmann::json message = request;
  return message.dump();
}

ExecRequest decode_exec_request(const std::string& text) {
  try {
    ExecRequest request = nlohmann::json::parse(text).get<ExecRequest>();
    if (request.op != init_op::kExec && request.op != init_op::kPrepare) {
      throw_error("exec-request", "", "unknown op '" + request.op + "'");
    }
    return request;
  } catch (const nlohmann::json::exception& e) {
    throw_error("exec-request", "", e.what());
  }
}

}  // namespace capsule::sandbox
