// StackRun: the life of one stack on its own thread, in order: its network and hosts file, a box per service,
// each stage (an exec in a service's box, or deploy: commands started in dependency order and probed until
// ready), then waiting for DELETE or its TTL, then teardown. Every step's outcome goes into the stack's record.
#pragma once

#include <chrono>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "daemon/stacks/port_relay.h"
#include "daemon/stacks/stack_manager.h"

namespace capsule::daemon {

struct CommandWatch;

class StackRun {
 public:
  StackRun(StackManager& manager, StackManager::Stack& stack);
  ~StackRun();
  void run();

 private:
  struct Service;
  using Clock = std::chrono::steady_clock;

  // False when the stack failed (recorded).
  bool set_up();
  bool run_exec_stage(std::size_t index, bool after_deploy);
  bool deploy(std::size_t index);
  void wait_for_end();
  void tear_down();

  // The end asked for (DELETE, TTL, capsuled stopping), if any; a TTL that has passed asks for "expired".
  bool ending();
  void fail(std::size_t stage, const std::string& reason, const std::string& service, const std::string& message);
  // `persist` false: the record in memory only (a probe's outcome every interval); the next change saves it.
  void set_service(const std::string& name, const std::function<void(ServiceStatus&)>& change, bool persist = true);
  // Starts argv in the service's box (as its user); the watch sees its output lines and its end.
  std::shared_ptr<CommandWatch> start_exec(Service& service, spec::ExecSpec exec, bool keep_lines);
  // Waits for the exec's end, until `deadline` or the stack ending. nullopt: not ended.
  std::optional<nlohmann::json> await_exec(CommandWatch& watch, Clock::time_point deadline);
  // One attempt of a started service's probe: ready, not ready, failed for good (readiness_failed), or, for an
  // exec probe, still running (kPending: asked again on the next tick; past its timeout it is killed: kNotYet).
  enum class Probe { kReady, kNotYet, kFailed, kPending };
  Probe probe(Service& service, std::string& detail, bool& refused);
  Probe exec_probe(Service& service, std::string& detail);
  // The first of the artifacts the command names (its program as a path, *.jar / *.war / *.ear words) that is
  // not in the service's box; "" when all are (or the box cannot be read).
  std::string missing_artifact(Service& service, const std::vector<std::string>& argv);
  // JUnit counts of the reports at `paths` inside the service's box (copied out through its root: nothing a
  // sandbox plants leads the daemon outside it).
  nlohmann::json collect_reports(Service& service, const std::vector<std::string>& paths);

  StackManager& manager_;
  StackManager::Stack& stack_;
  sandbox::NetworkNamespace network_;
  std::string dir_;  // stacks_dir/<id>: the hosts file
  std::map<std::string, std::unique_ptr<Service>> services_;
  std::vector<std::unique_ptr<PortRelay>> relays_;  // the services' published ports, while the stack lives
};

}  // namespace capsule::daemon
