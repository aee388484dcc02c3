// Replay variations: limits and environment changes written into a replay's spec, and the pytest plugin that
// reverses the collected tests.
#include "daemon/runs/replay_vary.h"

#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <map>
#include <thread>

#include "http/response.h"

namespace capsule::daemon {
namespace {

constexpr const char* kPluginSource =
    "# Written by capsuled for replays with vary.order: pytest runs the collected tests in reverse order.\n"
    "import pytest\n"
    "\n"
    "\n"
    "@pytest.hookimpl(trylast=True)\n"
    "def pytest_collection_modifyitems(session, config, items):\n"
    "    items.reverse()\n";

void append_word(std::map<std::string, std::string>& env, const std::string& name, const std::string& word) {
  auto& value = env[name];
  value = value.empty() ? word : value + " " + word;
}

}  // namespace

ReplayVary parse_replay_vary(const nlohmann::json& body) {
  if (!body.is_object()) throw http::ApiError("invalid_request", "vary: must be an object {cpus, memory, order}");
  ReplayVary vary;
  for (const auto& [key, value] : body.items()) {
    if (!value.is_boolean()) throw http::ApiError("invalid_request", "vary." + key + ": must be true or false");
    if (key == "cpus") vary.cpus = value.get<bool>();
    else if (key == "memory") vary.memory = value.get<bool>();
    else if (key == "order") vary.order = value.get<bool>();
    else throw http::ApiError("invalid_request", "vary." + key + ": unknown; expected cpus, memory or order");
  }
  return vary;
}

std::vector<std::string> apply_replay_vary(spec::RunSpec& spec, const ReplayVary& vary,
                                           std::uint64_t peak_memory_bytes) {
  std::vector<std::string> applied;
  if (vary.cpus) {
    const double machine = std::max(1u, std::thread::hardware_concurrency());
    const double before = spec.limits.cpus > 0 ? spec.limits.cpus : machine;
    spec.limits.cpus = std::max(before / 2, std::min(before, 0.5));
    applied.push_back("cpus");
  }
  if (vary.memory) {
    const std::uint64_t floor = std::max<std::uint64_t>(peak_memory_bytes + peak_memory_bytes / 10, 4ull << 20);
    const std::uint64_t limit = spec.limits.memory_bytes;
    if (limit > 0) {
      spec.limits.memory_bytes = std::max(limit / 4 * 3, std::min(floor, limit));
      applied.push_back("memory");
    } else if (peak_memory_bytes > 0) {
      spec.limits.memory_bytes = std::max<std::uint64_t>(peak_memory_bytes * 2, 4ull << 20);
      applied.push_back("memory");
    }
  }
  if (vary.order) {
    append_word(spec.env, "MAVEN_OPTS", "-Dsurefire.runOrder=reversealphabetical");
    append_word(spec.env, "PYTEST_ADDOPTS", std::string("-p ") + kTestOrderPlugin);
    auto& path = spec.env["PYTHONPATH"];
    path = path.empty() ? kTestOrderDir : std::string(kTestOrderDir) + ":" + path;
    applied.push_back("order");
  }
  return applied;
}

bool uses_test_order_plugin(const spec::RunSpec& spec) {
  const auto found = spec.env.find("PYTEST_ADDOPTS");
  return found != spec.env.end() && found->second.find(std::string("-p ") + kTestOrderPlugin) != std::string::npos;
}

sandbox::BindMount test_order_plugin_mount(const std::string& cache_dir) {
  namespace fs = std::filesystem;
  const fs::path dir = fs::path(cache_dir) / "test-order";
  const fs::path file = dir / (std::string(kTestOrderPlugin) + ".py");
  if (!fs::exists(file)) {
    fs::create_directories(dir);
    fs::permissions(dir, fs::perms::owner_all | fs::perms::group_read | fs::perms::group_exec |
                             fs::perms::others_read | fs::perms::others_exec);
    // Written beside its name and renamed: concurrent replays never read half a file.
    // One name per thread: two io threads may write it at once.
    const fs::path staging = dir / (file.filename().string() + ".tmp-" + std::to_string(::getpid()) + "-" +
                                    std::to_string(::gettid()));
    {
      std::ofstream out(staging, std::ios::trunc);
      out << kPluginSource;
      if (!out.flush()) throw http::ApiError("internal_error", "writing " + staging.string() + " failed");
    }
    fs::permissions(staging, fs::perms::owner_read | fs::perms::owner_write | fs::perms::group_read |
                                 fs::perms::others_read);
    fs::rename(staging, file);
  }
  return sandbox::BindMount{dir.string(), kTestOrderDir, true, true};
}

}  // namespace capsule::daemon
