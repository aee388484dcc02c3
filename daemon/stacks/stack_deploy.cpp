// The deploy stage on the stack's thread: each command started once what it depends on holds, then probed every
// interval (tcp and http from this thread, inside the stack's namespace; log lines; exec in its box) until ready.
#include <algorithm>
#include <set>
#include <thread>

#include "daemon/stacks/probes.h"
#include "daemon/stacks/stack_run_parts.h"

namespace capsule::daemon {

using nlohmann::json;

StackRun::Probe StackRun::exec_probe(Service& service, std::string& detail) {
  const spec::ReadyProbe& ready = service.spec->ready;
  const auto timeout = ready.attempt_timeout();
  if (!service.probe_run) {
    spec::ExecSpec exec;
    exec.argv = ready.argv;
    exec.timeout = timeout;  // the session kills it then (its run ends timed_out)
    exec.labels["capsule/probe"] = service.name;
    try {
      service.probe_run = start_exec(service, exec, false);
    } catch (const std::exception& e) {
      detail = std::string("the probe could not start: ") + e.what();
      return Probe::kNotYet;
    }
    service.probe_started = Clock::now();
  }
  std::optional<json> run;
  {
    std::lock_guard lock(service.probe_run->mutex);
    run = service.probe_run->finished;
  }
  if (!run) {
    // The session's own kill at `timeout` ends the run; should its end not come soon after, it is cancelled here.
    if (Clock::now() < service.probe_started + timeout + kProbeEndGrace) return Probe::kPending;
    try {
      manager_.sessions_.cancel_exec(service.session, service.probe_run->id);
    } catch (const std::exception&) {
      // It ended meanwhile, or its session went: nothing is left to cancel.
    }
    detail = "the probe ran past its timeout of " + std::to_string(timeout.count()) + " ms and was killed (run " +
             service.probe_run->id + ")";
    service.probe_run.reset();
    return Probe::kNotYet;
  }
  const std::string id = service.probe_run->id;
  service.probe_run.reset();
  const std::string status = status_of(*run);
  if (status == "timed_out") {
    detail = "the probe ran past its timeout of " + std::to_string(timeout.count()) + " ms and was killed (run " + id + ")";
    return Probe::kNotYet;
  }
  const std::optional<int> code = exit_code_of(*run);
  detail = "probe " + status + (code ? " (exit " + std::to_string(*code) + ")" : std::string());
  return status == "succeeded" ? Probe::kReady : Probe::kNotYet;
}

StackRun::Probe StackRun::probe(Service& service, std::string& detail, bool& refused) {
  const spec::ReadyProbe& ready = service.spec->ready;
  const auto timeout = ready.attempt_timeout();
  switch (ready.kind) {
    case spec::ReadyProbe::Kind::kNone: return Probe::kReady;
    case spec::ReadyProbe::Kind::kTcp: {
      const ProbeOutcome outcome = probe_tcp(ready.port, timeout);
      detail = outcome.detail;
      refused = outcome.refused;
      return outcome.ready ? Probe::kReady : Probe::kNotYet;
    }
    case spec::ReadyProbe::Kind::kHttp: {
      const ProbeOutcome outcome = probe_http(ready.port, ready.path, ready.status, service.name, timeout);
      detail = outcome.detail;
      refused = outcome.refused;
      return outcome.ready ? Probe::kReady : Probe::kNotYet;
    }
    case spec::ReadyProbe::Kind::kLog: {
      std::deque<std::string> lines;
      {
        std::lock_guard lock(service.command->mutex);
        lines.swap(service.command->lines);
        service.command->queued_bytes = 0;
      }
      for (const std::string& line : lines) {
        if (service.failure && service.failure->found_in(line)) {
          detail = "the failure pattern matched: " + line.substr(0, 200);
          return Probe::kFailed;
        }
        if (service.success->found_in(line)) {
          detail = "matched: " + line.substr(0, 200);
          return Probe::kReady;
        }
      }
      detail = "the success pattern has not matched yet";
      return Probe::kNotYet;
    }
    case spec::ReadyProbe::Kind::kExec: return exec_probe(service, detail);
  }
  return Probe::kNotYet;
}

bool StackRun::deploy(std::size_t index) {
  const spec::StageSpec& stage = stack_.spec.stages[index];
  const Clock::time_point start = Clock::now();
  const Clock::time_point stage_deadline =
      stage.deadline.count() > 0 ? start + stage.deadline : Clock::time_point::max();
  manager_.update(stack_, [&](StackRecord& record) {
    record.stages[index].state = "running";
    record.stages[index].started_ms = unix_ms();
  });
  // Who waits on a service's successful end ("completed"): its command may end without being a failure.
  std::set<std::string> awaited_ends;
  for (const auto& [name, service] : stack_.spec.services) {
    for (const auto& [other, condition] : service.depends_on) {
      if (condition == spec::DependsOn::kCompleted) awaited_ends.insert(other);
    }
  }
  const std::vector<std::string> order = stack_.spec.start_order();
  std::map<std::string, bool> last_refused;
  std::map<std::string, std::string> last_detail;
  const auto in_start_period = [](const Service& service) {
    return Clock::now() < service.started + service.spec->ready.start_period;
  };
  for (;;) {
    if (ending()) {
      fail(index, stack_reason::kCancelled, "", "the stack was ended during deploy");
      return false;
    }
    bool all_ready = true;
    for (const std::string& name : order) {
      Service& service = *services_.at(name);
      const spec::ServiceSpec& spec = *service.spec;
      if (service.state == "pending") {
        bool free = true;
        for (const auto& [other, condition] : spec.depends_on) {
          const Service& dependency = *services_.at(other);
          if (condition == spec::DependsOn::kStarted) free = free && dependency.state != "pending";
          if (condition == spec::DependsOn::kReady) free = free && dependency.state == "ready";
          if (condition == spec::DependsOn::kCompleted) free = free && dependency.state == "completed";
        }
        if (!free) {
          all_ready = false;
          continue;
        }
        if (spec.command.empty()) {
          service.state = "ready";
          set_service(name, [](ServiceStatus& s) {
            s.state = "ready";
            s.ready_ms = 0;
          });
          continue;
        }
        spec::ExecSpec exec;
        exec.argv = spec.command;
        exec.background = true;
        exec.timeout = std::chrono::milliseconds(0);
        exec.kill_grace = spec.stop_grace;  // SIGTERM at the stack's end, SIGKILL this long after
        exec.labels["capsule/command"] = name;
        try {
          service.command = start_exec(service, exec, spec.ready.kind == spec::ReadyProbe::Kind::kLog);
        } catch (const std::exception& e) {
          set_service(name, [](ServiceStatus& s) { s.state = "failed"; });
          const std::string missing = missing_artifact(service, spec.command);
          fail(index, missing.empty() ? stack_reason::kContainerExit : stack_reason::kMissingArtifact, name,
               std::string("its command could not start: ") + e.what() +
                   (missing.empty() ? std::string() : "; it names " + missing + ", which is not in its box"));
          return false;
        }
        service.state = "started";
        service.started = service.next_probe = Clock::now();
        const std::string exec_id = service.command->id;
        set_service(name, [&](ServiceStatus& s) {
          s.state = "started";
          s.exec_id = exec_id;
        });
      }
      if (service.state == "started" || service.state == "ready" || service.state == "completed") {
        std::optional<json> ended;
        if (service.command) {
          std::lock_guard lock(service.command->mutex);
          ended = service.command->finished;
        }
        if (ended && service.state != "completed") {
          const std::optional<int> code = exit_code_of(*ended);
          const bool was_ready = service.state == "ready";
          const bool clean = status_of(*ended) == "succeeded";
          const bool expected = clean && awaited_ends.contains(name);
          service.state = expected ? "completed" : "exited";
          set_service(name, [&](ServiceStatus& s) {
            s.state = expected ? "exited" : "failed";
            s.exit_code = code;
          });
          if (!expected) {
            const std::string missing = was_ready ? std::string() : missing_artifact(service, spec.command);
            std::string message = "its command ended " + status_of(*ended) +
                                  (code ? " with exit code " + std::to_string(*code) : std::string()) +
                                  (was_ready ? " after it was ready" : " before it was ready") + " (run " +
                                  service.command->id + ")";
            if (!missing.empty()) message += "; it names " + missing + ", which is not in its box";
            fail(index, missing.empty() ? stack_reason::kContainerExit : stack_reason::kMissingArtifact, name, message);
            return false;
          }
        }
      }
      if (service.state == "started") {
        all_ready = false;
        const spec::ReadyProbe& ready = spec.ready;
        if (service.probe_run || Clock::now() >= service.next_probe) {
          std::string detail;
          bool refused = false;
          const Probe outcome = probe(service, detail, refused);
          if (outcome != Probe::kPending) {
            const bool starting = in_start_period(service);
            service.next_probe = Clock::now() + (starting && ready.start_interval.count() > 0
                                                     ? ready.start_interval : ready.interval);
            last_refused[name] = refused;
            last_detail[name] = detail;
            set_service(name, [&](ServiceStatus& s) { s.probe = detail; }, false);
          }
          if (outcome == Probe::kReady || outcome == Probe::kFailed) {
            if (service.command) service.command->stop_keeping_lines();
          }
          if (outcome == Probe::kReady) {
            service.state = "ready";
            const std::int64_t ready_ms = ms_since(service.started);
            set_service(name, [&](ServiceStatus& s) {
              s.state = "ready";
              s.ready_ms = ready_ms;
            });
            continue;
          }
          if (outcome == Probe::kFailed) {
            set_service(name, [](ServiceStatus& s) { s.state = "failed"; });
            fail(index, stack_reason::kReadinessFailed, name, detail);
            return false;
          }
          if (outcome == Probe::kNotYet && !in_start_period(service) && ++service.failed_in_row == ready.retries) {
            set_service(name, [](ServiceStatus& s) { s.state = "failed"; });
            fail(index, refused ? stack_reason::kConnectionRefused : stack_reason::kReadinessFailed, name,
                 "unhealthy: " + std::to_string(ready.retries) + " probes in a row failed after its start period of " +
                     std::to_string(ready.start_period.count()) + " ms; the last: " + detail);
            return false;
          }
        }
        if (Clock::now() >= service.started + ready.deadline) {
          set_service(name, [](ServiceStatus& s) { s.state = "failed"; });
          const bool refused = last_refused[name];
          const std::string last = last_detail[name].empty() ? "none has ended yet" : last_detail[name];
          fail(index, refused ? stack_reason::kConnectionRefused : stack_reason::kDeployTimeout, name,
               "not ready within " + std::to_string(ready.deadline.count()) + " ms; the last probe: " + last);
          return false;
        }
      }
      if (service.state == "ready" && awaited_ends.contains(name) && service.command &&
          Clock::now() >= service.started + spec.ready.deadline) {
        // Others wait for it to end: a command that never does would hold deploy until the stack's TTL.
        set_service(name, [](ServiceStatus& s) { s.state = "failed"; });
        fail(index, stack_reason::kDeployTimeout, name,
             "did not complete within " + std::to_string(spec.ready.deadline.count()) +
                 " ms (its ready deadline), and other services wait for it to complete (run " +
                 service.command->id + ")");
        return false;
      }
      if (service.state == "pending") all_ready = false;
    }
    if (all_ready) break;
    if (Clock::now() >= stage_deadline) {
      std::string waiting;
      for (const std::string& name : order) {
        if (services_.at(name)->state != "ready" && services_.at(name)->state != "completed") {
          waiting = name;
          break;
        }
      }
      fail(index, last_refused[waiting] ? stack_reason::kConnectionRefused : stack_reason::kDeployTimeout, waiting,
           "deploy did not finish within " + std::to_string(stage.deadline.count()) + " ms (" + waiting +
               " is not ready)");
      return false;
    }
    std::this_thread::sleep_for(kTick);
  }
  manager_.update(stack_, [&](StackRecord& record) {
    record.stages[index].state = "passed";
    record.stages[index].wall_ms = ms_since(start);
  });
  return true;
}

}  // namespace capsule::daemon
