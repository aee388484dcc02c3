// The snapshot subcommands: one request each; export streams the canonical tar into a file (written to a
// temporary sibling and renamed once whole, so a failed export leaves no partial file under the name).
#include "client/cli_snapshot.h"

#include <filesystem>
#include <fstream>
#include <iostream>
#include <sstream>
#include <stdexcept>

#include "client/cli_args.h"
#include "http/unix_client.h"

namespace capsule::client {
namespace {

using nlohmann::json;
namespace fs = std::filesystem;

std::string describe_source(const json& source) {
  if (source.contains("git")) {
    return "git " + source.value("git", "") + "@" + source.value("rev", "") + " (" + source.value("commit", "").substr(0, 12) + ")";
  }
  if (source.contains("tar")) return "tar " + source.value("tar", "");
  return std::string(source.value("reproducible", false) ? "run workspace " : "dir ") + source.value("dir", "");
}

}  // namespace

void add_snapshot_commands(CLI::App& app, SnapshotCommands& c) {
  c.group = app.add_subcommand("snapshot", "content-addressed snapshots of directories, tar files and git commits");
  c.group->require_subcommand(1);
  c.create = c.group->add_subcommand("create", "snapshot DIR, TAR or REPO@REV (or --git REPO --rev REV); prints the digest");
  c.create->add_option("source", c.source, "a directory, a tar file (.tar, .tar.gz, .tar.zst) or REPO@REV");
  c.create->add_option("--git", c.git, "a local git repository (no network), with --rev");
  c.create->add_option("--rev", c.rev, "the commit-ish of --git");
  c.create->add_flag("--json", c.json, "print the snapshot object");
  c.ls = c.group->add_subcommand("ls", "list your snapshots (root: all)");
  c.ls->add_flag("--json", c.json, "print the API's JSON instead of a table");
  c.export_tar = c.group->add_subcommand("export", "write a snapshot's canonical tar (its sha256 is the digest)");
  c.export_tar->add_option("digest", c.digest, "sha256:...")->required();
  c.export_tar->add_option("-o,--output", c.out, "the tar file to write")->required();
  c.rm = c.group->add_subcommand("rm", "remove a snapshot (refused while a run or session uses it)");
  c.rm->add_option("digest", c.digest, "sha256:...")->required();
  c.gc = c.group->add_subcommand("gc", "remove your snapshots that no kept run or session pins and none uses (root: all)");
  c.gc->add_option("--unused-for", c.unused_for, "only those unused for at least this long (e.g. 24h; default 0s)");
  c.gc->add_flag("--dry-run", c.dry_run, "say what would be removed, remove nothing");
  c.gc->add_flag("--json", c.json, "print the API's JSON");
}

json snapshot_create_body(const SnapshotCommands& c) {
  if (!c.git.empty() || !c.rev.empty()) {
    if (c.git.empty() || c.rev.empty()) throw std::invalid_argument("--git and --rev go together");
    if (!c.source.empty()) throw std::invalid_argument("give SOURCE or --git REPO --rev REV, not both");
    return {{"git", absolute_path(c.git)}, {"rev", c.rev}};
  }
  if (c.source.empty()) throw std::invalid_argument("snapshot create needs DIR, TAR, REPO@REV or --git REPO --rev REV");
  std::error_code ec;
  if (fs::is_directory(c.source, ec)) return {{"dir", absolute_path(c.source)}};
  if (fs::is_regular_file(c.source, ec)) return {{"tar", absolute_path(c.source)}};
  const auto at = c.source.rfind('@');
  if (at != std::string::npos && at > 0 && at + 1 < c.source.size() && fs::is_directory(c.source.substr(0, at), ec)) {
    return {{"git", absolute_path(c.source.substr(0, at))}, {"rev", c.source.substr(at + 1)}};
  }
  throw std::invalid_argument("'" + c.source + "' is neither a directory, a file, nor REPO@REV with REPO a directory");
}

std::string format_snapshots_table(const json& snapshots) {
  std::ostringstream out;
  out << "DIGEST               SIZE        FILES    CREATED               SOURCE\n";
  for (const json& s : snapshots) {
    std::string digest = s.value("digest", "");
    if (digest.size() > 19) digest.resize(19);
    out << digest << std::string(21 - std::min<std::size_t>(digest.size(), 20), ' ');
    const std::string size = std::to_string(s.value("size", 0ull));
    out << size << std::string(size.size() < 12 ? 12 - size.size() : 1, ' ');
    const std::string files = std::to_string(s.value("files", 0ull));
    out << files << std::string(files.size() < 9 ? 9 - files.size() : 1, ' ');
    const std::string created = s.value("created", "");
    out << created << std::string(created.size() < 22 ? 22 - created.size() : 1, ' ');
    out << describe_source(s.value("source", json::object())) << "\n";
  }
  return out.str();
}

void export_snapshot(const http::HttpClient& client, const std::string& digest, const fs::path& out) {
  const fs::path partial = out.string() + ".partial";
  std::ofstream file(partial, std::ios::binary | std::ios::trunc);
  if (!file) throw std::runtime_error("cannot write " + partial.string());
  const http::HttpResponse response =
      client.stream("GET", "/v1/snapshots/" + http::url_encode(digest), nullptr, {}, [&file](std::string_view data) {
        file.write(data.data(), static_cast<std::streamsize>(data.size()));
      });
  file.close();
  try {
    http::throw_if_error(response);
    if (!file) throw std::runtime_error("writing " + partial.string() + " failed");
  } catch (...) {
    fs::remove(partial);
    throw;
  }
  fs::rename(partial, out);
}

int cmd_snapshot(const std::string& socket, const SnapshotCommands& c) {
  const http::HttpClient client(socket);
  if (c.create->parsed()) {
    const json snapshot = http::request_json(client, "POST", "/v1/snapshots", snapshot_create_body(c));
    if (c.json) std::cout << snapshot.dump(2) << "\n";
    else std::cout << snapshot.value("digest", "") << "\n";
    return 0;
  }
  if (c.ls->parsed()) {
    const json list = http::request_json(client, "GET", "/v1/snapshots");
    if (c.json) std::cout << list.dump(2) << "\n";
    else std::cout << format_snapshots_table(list.value("snapshots", json::array()));
    return 0;
  }
  if (c.gc->parsed()) {
    json body = {{"dry_run", c.dry_run}};
    if (!c.unused_for.empty()) body["unused_for"] = c.unused_for;
    const json report = http::request_json(client, "POST", "/v1/snapshots/gc", body);
    if (c.json) {
      std::cout << report.dump(2) << "\n";
      return 0;
    }
    const char* verb = c.dry_run ? "would remove " : "removed ";
    for (const json& s : report.value("removed", json::array())) std::cout << verb << s.value("digest", "") << "\n";
    for (const json& d : report.value("released", json::array())) {
      std::cout << (c.dry_run ? "would drop your claim on " : "dropped your claim on ") << d.get<std::string>()
                << " (others still own it)\n";
    }
    std::cout << report.value("removed", json::array()).size() << " snapshot(s), " << report.value("bytes_freed", 0ull)
              << " bytes" << (c.dry_run ? " would be freed" : " freed") << "; " << report.value("in_use", 0ull)
              << " in use by a live run or session\n";
    return 0;
  }
  if (c.rm->parsed()) {
    std::cout << "removed " << http::request_json(client, "DELETE", "/v1/snapshots/" + c.digest).value("removed", "") << "\n";
    return 0;
  }
  const fs::path out = absolute_path(c.out);
  export_snapshot(client, c.digest, out);
  std::cerr << "capsule: exported " << c.digest << " to " << out.string() << "\n";
  return 0;
}

}  // namespace capsule::client
