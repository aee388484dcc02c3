// The bundle commands: an export streams into OUT.part and is renamed into place only once whole, so a failed
// export leaves no file; an import names the bundle by its absolute path and prints the stored run.
#include "client/cli_run_bundle.h"

#include <filesystem>
#include <fstream>
#include <iostream>

#include "client/cli_runs.h"
#include "http/unix_client.h"

namespace capsule::client {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

int export_bundle(const std::string& socket, const std::string& id, const std::string& out) {
  const fs::path target = fs::absolute(out).lexically_normal();
  const fs::path partial = target.string() + ".part";
  std::ofstream file(partial, std::ios::binary | std::ios::trunc);
  if (!file) throw std::runtime_error("cannot write " + partial.string());
  std::uint64_t bytes = 0;
  try {
    const http::HttpResponse response = http::HttpClient(socket).stream(
        "GET", run_path(id) + "/bundle", nullptr, {}, [&](std::string_view data) {
          file.write(data.data(), static_cast<std::streamsize>(data.size()));
          bytes += data.size();
        });
    http::throw_if_error(response);
    file.close();
    if (!file) throw std::runtime_error("writing " + partial.string() + " failed");
  } catch (...) {
    std::error_code ignored;
    fs::remove(partial, ignored);
    throw;
  }
  fs::rename(partial, target);
  std::cerr << "capsule: exported run " << id << " to " << target.string() << " (" << bytes << " bytes)\n";
  return 0;
}

int import_bundle(const std::string& socket, const std::string& bundle, bool as_json) {
  const std::string path = fs::absolute(bundle).lexically_normal().string();
  const json run = http::request_json(http::HttpClient(socket), "POST", "/v1/runs/import", {{"path", path}});
  if (as_json) {
    std::cout << run.dump(2) << "\n";
  } else {
    std::cout << run.value("id", "") << "\n";
    std::cerr << "capsule: imported run " << run.value("id", "") << " (" << run.value("state", "")
              << "); capsule replay " << run.value("id", "") << " runs it again\n";
  }
  return 0;
}

}  // namespace

void add_bundle_commands(CLI::App& runs, BundleCommands& commands) {
  commands.export_run = runs.add_subcommand("export", "write a finished run's audit bundle: the record, its images, "
                                                      "workspace snapshot, dependency objects and logs");
  commands.export_run->add_option("id", commands.id, "run id")->required();
  commands.export_run->add_option("--output,-o", commands.out, "OUT.tar")->required();
  commands.import_run = runs.add_subcommand("import", "store a run from an audit bundle (then: capsule replay ID)");
  commands.import_run->add_option("bundle", commands.bundle, "the bundle tar")->required();
  commands.import_run->add_flag("--json", commands.json, "print the imported run object");
}

bool bundle_command_parsed(const BundleCommands& commands) {
  return commands.export_run->parsed() || commands.import_run->parsed();
}

int cmd_runs_bundle(const std::string& socket, const BundleCommands& commands) {
  if (commands.export_run->parsed()) return export_bundle(socket, commands.id, commands.out);
  return import_bundle(socket, commands.bundle, commands.json);
}

}  // namespace capsule::client
