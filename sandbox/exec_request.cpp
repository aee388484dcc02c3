// JSON encoding of ExecRequest for the launcher -> capsule-init channel.
// The only place these fields are mapped; both sides use it.
#include "sandbox/exec_request.h"

#include <nlohmann/json.hpp>

#include "sandbox/error.h"

namespace capsule::sandbox {

NLOHMANN_DEFINE_TYPE_NON_INTRUSIVE(ExecRequest, id, argv, env, cwd, uid, gid, nofile, fsize_bytes, stack_bytes,
                                   cgroup_fds, controlling_tty, ends_sandbox, watchdog_ns, kill_grace_ms)

std::string encode_exec_request(const ExecRequest& request) {
  nlohmann::json message = request;
  message["op"] = init_op::kExec;
  return message.dump();
}

ExecRequest decode_exec_request(const std::string& text) {
  try {
    return nlohmann::json::parse(text).get<ExecRequest>();
  } catch (const nlohmann::json::exception& e) {
    throw_error("exec-request", "", e.what());
  }
}

}  // namespace capsule::sandbox
