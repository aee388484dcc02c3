// The stack's thread: it joins the stack's network namespace first, so its probes' sockets are made there and
// reach the services on 127.0.0.1; every box is a session placed in that namespace with the stack's hosts file.
#include "daemon/stacks/stack_run.h"

#include <fcntl.h>
#include <spdlog/spdlog.h>
#include <stdlib.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <future>

#include "base/unique_fd.h"
#include "daemon/record/junit.h"
#include "daemon/stacks/named_artifacts.h"
#include "daemon/stacks/stack_run_parts.h"
#include "http/response.h"
#include "sandbox/command.h"
#include "sandbox/root_files.h"
#include "sandbox/tar_in_root.h"

namespace capsule::daemon {

using nlohmann::json;

namespace {

constexpr std::uint64_t kMaxReportBytes = 64ull << 20;

}  // namespace

StackRun::StackRun(StackManager& manager, StackManager::Stack& stack)
    : manager_(manager), stack_(stack), dir_(manager.options_.stacks_dir + "/" + stack.id) {}

StackRun::~StackRun() = default;

void StackRun::run() {
  std::size_t stage = 0;
  try {
    if (set_up()) {
      bool after_deploy = false;
      for (; stage < stack_.spec.stages.size(); ++stage) {
        const bool passed = stack_.spec.stages[stage].deploy ? deploy(stage) : run_exec_stage(stage, after_deploy);
        after_deploy = after_deploy || stack_.spec.stages[stage].deploy;
        if (!passed) break;
      }
    }
  } catch (const std::exception& e) {  // capsuled's own failure (no thread, no memory): the stack fails, tidily
    fail(std::min(stage, stack_.spec.stages.size() - 1), stack_reason::kSetupFailed, "",
         std::string("capsuled could not go on: ") + e.what());
  }
  manager_.update(stack_, [](StackRecord& record) {
    for (StageStatus& status : record.stages) {
      if (status.state == "pending") status.state = "skipped";
    }
    if (record.state == "starting") record.state = record.failure ? "failed" : "up";
  });
  wait_for_end();
  tear_down();
}

bool StackRun::set_up() {
  try {
    network_ = sandbox::NetworkNamespace::create(manager_.options_.netns_dir, stack_.id);
    sandbox::join_network_namespace(network_.path());  // this thread's sockets are the stack's from here on
    std::filesystem::create_directories(dir_);
    std::ofstream hosts(dir_ + "/hosts");
    hosts << "127.0.0.1\tlocalhost";
    for (const auto& [name, service] : stack_.spec.services) hosts << ' ' << name;
    hosts << "\n::1\tlocalhost ip6-localhost ip6-loopback\n";
    if (!hosts.flush()) throw std::runtime_error("cannot write " + dir_ + "/hosts");
  } catch (const std::exception& e) {
    fail(0, stack_reason::kSetupFailed, "", std::string("the stack's network: ") + e.what());
    return false;
  }
  if (ending()) {
    fail(0, stack_reason::kCancelled, "", "the stack was ended before its boxes were made");
    return false;
  }
  // Every box is asked for at once (each create waits until its box serves execs); the session thread makes
  // them one by one, but their waits and the stack's other set-up overlap.
  std::map<std::string, std::future<std::string>> made;
  const std::vector<std::string> order = stack_.spec.start_order();
  for (const std::string& name : order) {
    auto service = std::make_unique<Service>();
    service->name = name;
    service->spec = &stack_.spec.services.at(name);
    const spec::ReadyProbe& ready = service->spec->ready;
    if (ready.kind == spec::ReadyProbe::Kind::kLog) {
      service->success = std::make_unique<LogPattern>(ready.success);
      if (!ready.failure.empty()) service->failure = std::make_unique<LogPattern>(ready.failure);
    }
    spec::SessionSpec box = service->spec->box;
    box.environment.labels["capsule/stack"] = stack_.id;
    box.environment.labels["capsule/service"] = name;
    set_service(name, [](ServiceStatus& s) { s.state = "starting"; });
    made[name] = std::async(std::launch::async, [this, box, name, &order] {
      // With egress "proxy", the first service's box serves the stack's one proxy listener for all of them.
      const SessionPlacement placement{network_.path(), dir_ + "/hosts", name, name == order.front()};
      return manager_.sessions_.create(box, stack_.boxes.at(name), stack_.peer, placement).at("id").get<std::string>();
    });
    services_[name] = std::move(service);
  }
  bool all_made = true;
  for (auto& [name, future] : made) {
    try {
      const std::string session = future.get();
      services_.at(name)->session = session;
      set_service(name, [&](ServiceStatus& s) {
        s.state = "pending";
        s.session = session;
      });
    } catch (const std::exception& e) {
      set_service(name, [](ServiceStatus& s) { s.state = "failed"; });
      fail(0, stack_reason::kSetupFailed, name, std::string("its box could not be made: ") + e.what());
      all_made = false;
    }
  }
  if (!all_made) return false;
  // Published ports listen on the host from now on; a connection before the service listens is closed at once.
  for (const auto& [name, service] : services_) {
    for (const spec::PublishedPort& published : service->spec->publish) {
      try {
        relays_.push_back(std::make_unique<PortRelay>(network_.path(), published.port, published.host_port,
                                                      manager_.options_.relay));
      } catch (const std::exception& e) {
        fail(0, stack_reason::kSetupFailed, name, e.what());
        return false;
      }
      const std::uint16_t host_port = relays_.back()->host_port();
      set_service(name, [&](ServiceStatus& s) { s.published[published.port] = host_port; });
    }
  }
  return true;
}

bool StackRun::ending() {
  std::lock_guard lock(manager_.mutex_);
  stack_.expire_if_due_locked();
  return !stack_.end_state.empty();
}

void StackRun::fail(std::size_t stage, const std::string& reason, const std::string& service,
                    const std::string& message) {
  manager_.update(stack_, [&](StackRecord& record) {
    if (record.failure) return;  // the first failure is the stack's
    record.failure = StackFailure{record.stages.at(stage).name, reason, service, message};
    StageStatus& status = record.stages[stage];
    if (status.state != "passed") status.state = "failed";
    // A stage that ends here (deploy, or an exec stage that could not start) has run from its start until now.
    if (status.wall_ms == 0 && status.started_ms > 0) status.wall_ms = std::max<std::int64_t>(0, unix_ms() - status.started_ms);
  });
}

void StackRun::set_service(const std::string& name, const std::function<void(ServiceStatus&)>& change, bool persist) {
  manager_.update(stack_, [&](StackRecord& record) { change(record.services[name]); }, persist);
}

std::shared_ptr<CommandWatch> StackRun::start_exec(Service& service, spec::ExecSpec exec, bool keep_lines) {
  auto watch = std::make_shared<CommandWatch>();
  watch->keep_lines = keep_lines;
  if (!service.spec->user.empty()) exec.user = service.spec->user;
  exec.labels["capsule/stack"] = stack_.id;
  watch->id = manager_.sessions_.exec(service.session, exec, stack_.peer,
                                      [watch](const json& event) { watch->take(event); });
  return watch;
}

std::optional<json> StackRun::await_exec(CommandWatch& watch, Clock::time_point deadline) {
  std::unique_lock lock(watch.mutex);
  while (!watch.finished) {
    if (Clock::now() >= deadline) return std::nullopt;
    lock.unlock();
    if (ending()) return std::nullopt;
    lock.lock();
    watch.ended.wait_for(lock, std::chrono::milliseconds(100));
  }
  return watch.finished;
}

std::string StackRun::missing_artifact(Service& service, const std::vector<std::string>& argv) {
  const std::vector<std::string> named = named_artifacts(argv);
  if (named.empty() || service.session.empty()) return "";
  const spec::RunSpec& box = service.spec->box.environment;
  const std::string cwd = box.cwd ? *box.cwd : box.workspace ? "/workspace" : "/";
  std::string missing;
  try {
    manager_.sessions_.with_frozen_box(service.session, [&](const SessionBox& frozen) {
      const base::UniqueFd root = frozen.sandbox.open_root();
      for (const std::string& path : named) {
        try {
          sandbox::open_for_read(root.get(), path.starts_with("/") ? path : cwd + "/" + path);
        } catch (const base::Error& e) {
          if (e.code() != "not_found") continue;  // there, if not readable as a file: not missing
          missing = path;
          return;
        }
      }
    });
  } catch (const std::exception& e) {
    spdlog::debug("stack {}: service {}: its artifacts could not be looked up: {}", stack_.id, service.name, e.what());
    return "";
  }
  return missing;
}

bool StackRun::run_exec_stage(std::size_t index, bool after_deploy) {
  const spec::StageSpec& stage = stack_.spec.stages[index];
  Service& service = *services_.at(stage.service);
  const Clock::time_point start = Clock::now();
  manager_.update(stack_, [&](StackRecord& record) {
    record.stages[index].state = "running";
    record.stages[index].started_ms = unix_ms();
  });
  spec::ExecSpec exec = stage.exec;
  exec.labels["capsule/stage"] = stage.name;
  std::shared_ptr<CommandWatch> watch;
  try {
    watch = start_exec(service, exec, false);
  } catch (const std::exception& e) {
    fail(index, after_deploy ? stack_reason::kTestFailed : stack_reason::kBuildFailed, service.name,
         std::string("the stage could not start: ") + e.what());
    return false;
  }
  manager_.update(stack_, [&](StackRecord& record) { record.stages[index].exec_id = watch->id; });
  const std::optional<json> run = await_exec(*watch, Clock::time_point::max());
  if (!run) {
    try {
      manager_.sessions_.cancel_exec(service.session, watch->id);
    } catch (const std::exception&) {
      // It ended meanwhile, or its session went: nothing is left to cancel.
    }
    fail(index, stack_reason::kCancelled, service.name, "the stack was ended during the stage");
    return false;
  }
  json tests = nullptr;
  if (!stage.junit.empty()) tests = collect_reports(service, stage.junit);
  const std::string status = status_of(*run);
  const std::optional<int> code = exit_code_of(*run);
  manager_.update(stack_, [&](StackRecord& record) {
    StageStatus& s = record.stages[index];
    s.wall_ms = ms_since(start);
    s.exit_code = code;
    s.tests = tests;
    if (status == "succeeded") s.state = "passed";
  });
  if (status == "succeeded") return true;
  const bool timed_out = status == "timed_out" || status == "idle_timed_out";
  const std::string reason =
      timed_out ? stack_reason::kStageTimeout : after_deploy ? stack_reason::kTestFailed : stack_reason::kBuildFailed;
  fail(index, reason, service.name,
       "stage " + stage.name + " ended " + status + (code ? " with exit code " + std::to_string(*code) : std::string()) +
           " (run " + watch->id + ")");
  return false;
}


json StackRun::collect_reports(Service& service, const std::vector<std::string>& paths) {
  char pattern[] = "/tmp/capsule-stack-reports-XXXXXX";
  if (mkdtemp(pattern) == nullptr) return {{"error", "no temporary directory for the reports"}};
  const std::string copy = pattern;
  std::vector<std::string> problems;
  try {
    manager_.sessions_.with_frozen_box(service.session, [&](const SessionBox& box) {
      const base::UniqueFd root = box.sandbox.open_root();
      const base::UniqueFd into(open(copy.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
      std::uint64_t left = kMaxReportBytes;  // for all the paths together, as the box is frozen meanwhile
      for (std::size_t i = 0; i < paths.size(); ++i) {
        const std::string where = paths[i].starts_with("/") ? paths[i] : "/workspace/" + paths[i];
        // The tar of that path, held whole (bounded), then unpacked into a directory of our own.
        std::string tar;
        try {
          sandbox::pack_tree(root.get(), where, [&](std::string_view chunk) {
            if (tar.size() + chunk.size() > left) throw http::ApiError("payload_too_large", "the reports pass 64 MiB");
            tar.append(chunk);
          });
          bool given = false;
          sandbox::unpack_tree(into.get(), std::to_string(i), [&]() -> std::string_view {
            if (given) return {};
            given = true;
            return tar;
          }, sandbox::RootOwner{0, 0}, sandbox::UnpackLimits{left, 100000});
          left -= tar.size();
        } catch (const std::exception& e) {
          problems.push_back(paths[i] + ": " + e.what());
        }
      }
    });
  } catch (const std::exception& e) {
    problems.push_back(std::string("the box: ") + e.what());
  }
  TestCounts counts = collect_junit(copy, {"**/*.xml"});
  std::error_code ignored;
  std::filesystem::remove_all(copy, ignored);
  json tests = counts.to_json();
  for (const std::string& problem : problems) tests["unreadable"].push_back(problem);
  return tests;
}

void StackRun::wait_for_end() {
  std::unique_lock lock(manager_.mutex_);
  for (;;) {
    stack_.expire_if_due_locked();
    if (!stack_.end_state.empty()) return;
    if (stack_.expires == Clock::time_point::max()) manager_.changed_.wait(lock);
    else manager_.changed_.wait_until(lock, stack_.expires);
  }
}

void StackRun::tear_down() {
  std::string end_reason;
  {
    std::lock_guard lock(manager_.mutex_);
    end_reason = stack_.end_reason;
  }
  // Commands with a stop_grace get SIGTERM first, all at once, and that long (SIGKILL then) to end by themselves.
  Clock::time_point stopped_by = Clock::now();
  for (const auto& [name, service] : services_) {
    if (service->spec->stop_grace.count() == 0 || !service->command) continue;
    try {
      manager_.sessions_.cancel_exec(service->session, service->command->id);
      stopped_by = std::max(stopped_by, Clock::now() + service->spec->stop_grace + kProbeEndGrace);
    } catch (const std::exception&) {
      // It has ended already.
    }
  }
  for (const auto& [name, service] : services_) {
    if (service->spec->stop_grace.count() > 0 && service->command) {
      std::unique_lock lock(service->command->mutex);
      service->command->ended.wait_until(lock, stopped_by, [&] { return service->command->finished.has_value(); });
    }
  }
  for (const auto& [name, service] : services_) {
    if (service->session.empty()) continue;
    if (const std::optional<json> session = manager_.sessions_.get(service->session); session && session->contains("usage")) {
      set_service(name, [&](ServiceStatus& s) { s.usage = (*session)["usage"]; });  // what its box used, kept
    }
    try {
      manager_.sessions_.remove(service->session, "its stack " + stack_.id + " ended: " + end_reason);
    } catch (const std::exception& e) {
      spdlog::debug("stack {}: service {}: {}", stack_.id, name, e.what());
    }
    set_service(name, [](ServiceStatus& s) {
      if (s.state != "failed" && s.state != "exited") s.state = "stopped";
    });
  }
  relays_.clear();
  manager_.update(stack_, [](StackRecord& record) {
    for (auto& [name, service] : record.services) service.published.clear();
  });
  network_.remove();
  std::error_code ignored;
  std::filesystem::remove_all(dir_, ignored);
}

}  // namespace capsule::daemon
