// The stack object's JSON in both directions (API answers and the record files) and the record files' I/O.
#include "daemon/stacks/stack_record.h"

#include <spdlog/spdlog.h>

#include <filesystem>
#include <fstream>
#include <system_error>


namespace capsule::daemon {
namespace {

using nlohmann::json;

json optional_json(const std::optional<std::int64_t>& value) { return value ? json(*value) : json(nullptr); }
json optional_json(const std::optional<int>& value) { return value ? json(*value) : json(nullptr); }

template <typename T>
std::optional<T> optional_of(const json& j, const char* key) {
  if (!j.contains(key) || j[key].is_null()) return std::nullopt;
  return j[key].get<T>();
}

}  // namespace

json StackRecord::to_json() const {
  json services_json = json::object();
  for (const auto& [name, s] : services) {
    json published = json::array();
    for (const auto& [port, host_port] : s.published) {
      published.push_back({{"port", port}, {"host", "127.0.0.1:" + std::to_string(host_port)}});
    }
    services_json[name] = {{"state", s.state}, {"session", s.session}, {"exec_id", s.exec_id},
                           {"ready_ms", optional_json(s.ready_ms)}, {"exit_code", optional_json(s.exit_code)},
                           {"probe", s.probe}, {"published", published}, {"usage", s.usage}};
  }
  json stages_json = json::array();
  for (const StageStatus& s : stages) {
    stages_json.push_back({{"name", s.name}, {"state", s.state}, {"started_ms", s.started_ms}, {"wall_ms", s.wall_ms},
                           {"exec_id", s.exec_id}, {"exit_code", optional_json(s.exit_code)}, {"tests", s.tests}});
  }
  json failure_json = nullptr;
  if (failure) {
    failure_json = {{"stage", failure->stage}, {"reason", failure->reason}, {"service", failure->service},
                    {"message", failure->message}};
  }
  return {{"id", id},
          {"state", state},
          {"created_ms", created_ms},
          {"ended_ms", ended_ms == 0 ? json(nullptr) : json(ended_ms)},
          {"ended_reason", ended_reason},
          {"peer", {{"uid", peer_uid}, {"pid", peer_pid}}},
          {"spec", spec},
          {"network", {{"hosts", hosts}}},
          {"failure", failure_json},
          {"stages", stages_json},
          {"services", services_json}};
}

StackRecord StackRecord::from_json(const json& j) {
  StackRecord record;
  record.id = j.at("id").get<std::string>();
  record.state = j.at("state").get<std::string>();
  record.created_ms = j.at("created_ms").get<std::int64_t>();
  record.ended_ms = optional_of<std::int64_t>(j, "ended_ms").value_or(0);
  record.ended_reason = j.value("ended_reason", "");
  record.peer_uid = j.at("peer").at("uid").get<uid_t>();
  record.peer_pid = j.at("peer").at("pid").get<pid_t>();
  record.spec = j.at("spec");
  record.hosts = j.at("network").at("hosts").get<std::vector<std::string>>();
  if (const json& f = j.at("failure"); !f.is_null()) {
    record.failure = StackFailure{f.at("stage").get<std::string>(), f.at("reason").get<std::string>(),
                                  f.at("service").get<std::string>(), f.at("message").get<std::string>()};
  }
  for (const json& s : j.at("stages")) {
    StageStatus stage;
    stage.name = s.at("name").get<std::string>();
    stage.state = s.at("state").get<std::string>();
    stage.started_ms = s.at("started_ms").get<std::int64_t>();
    stage.wall_ms = s.at("wall_ms").get<std::int64_t>();
    stage.exec_id = s.at("exec_id").get<std::string>();
    stage.exit_code = optional_of<int>(s, "exit_code");
    stage.tests = s.at("tests");
    record.stages.push_back(std::move(stage));
  }
  for (const auto& [name, s] : j.at("services").items()) {
    ServiceStatus service;
    service.state = s.at("state").get<std::string>();
    service.session = s.at("session").get<std::string>();
    service.exec_id = s.at("exec_id").get<std::string>();
    service.ready_ms = optional_of<std::int64_t>(s, "ready_ms");
    service.exit_code = optional_of<int>(s, "exit_code");
    service.probe = s.value("probe", "");
    service.usage = s.value("usage", json(nullptr));
    for (const json& published : s.value("published", json::array())) {
      const std::string host = published.at("host").get<std::string>();
      service.published[published.at("port").get<std::uint16_t>()] =
          static_cast<std::uint16_t>(std::stoul(host.substr(host.rfind(':') + 1)));
    }
    record.services[name] = std::move(service);
  }
  return record;
}

void save_stack_record(const std::string& dir, const StackRecord& record) {
  const std::string path = dir + "/" + record.id + ".json";
  const std::string partial = path + ".partial";
  {
    std::ofstream out(partial, std::ios::trunc);
    out << record.to_json().dump();
    if (!out.flush()) throw std::runtime_error("cannot write " + partial);
  }
  std::filesystem::rename(partial, path);
}

std::vector<StackRecord> load_stack_records(const std::string& dir) {
  std::vector<StackRecord> records;
  std::error_code error;
  for (const auto& entry : std::filesystem::directory_iterator(dir, error)) {
    if (entry.path().extension() != ".json") continue;
    try {
      std::ifstream in(entry.path());
      records.push_back(StackRecord::from_json(json::parse(in)));
    } catch (const std::exception& e) {
      spdlog::warn("stack record {} is unreadable, skipped: {}", entry.path().string(), e.what());
    }
  }
  return records;
}

}  // namespace capsule::daemon
