// The toolchain subcommands: one request each; `resolve` prints the daemon's answer (or its error) as a few
// "name  value" lines, or as JSON with --json.
#include "client/cli_toolchains.h"

#include <algorithm>
#include <iostream>

#include "client/cli_args.h"
#include "client/run_view.h"
#include "http/unix_client.h"

namespace capsule::client {
namespace {

using nlohmann::json;

std::string text_of(const json& object, const char* key) {
  return object.is_object() && object.contains(key) && object[key].is_string() ? object[key].get<std::string>() : "";
}

std::string short_digest(const std::string& digest) { return digest.substr(0, std::min<std::size_t>(digest.size(), 19)); }

}  // namespace

void add_toolchain_commands(CLI::App& app, ToolchainCommands& commands) {
  commands.group = app.add_subcommand("toolchains", "installed toolchains, and which image a run's toolchains get");
  commands.group->require_subcommand(1);
  commands.ls = commands.group->add_subcommand("ls", "list each toolchain's installed versions and their images");
  commands.ls->add_flag("--json", commands.json, "print the API's JSON instead of a table");
  commands.resolve = commands.group->add_subcommand(
      "resolve", "dry run: the image and versions a run with these toolchains would get, and why");
  commands.resolve->add_option("toolchains", commands.toolchains, "NAME=VERSION items: java=17, python=3.11, python=auto")
      ->required();
  commands.resolve->add_option("--as-of", commands.as_of, "date (YYYY-MM-DD) that python=auto is chosen for");
  commands.resolve->add_flag("--json", commands.json, "print the API's JSON (or its error) instead of lines");
}

std::string resolve_target(const std::vector<std::string>& toolchains, const std::string& as_of) {
  std::string query;
  for (const std::string& item : toolchains) {
    const auto [name, version] = split_pair(item, "toolchain");
    query += (query.empty() ? "?" : "&") + http::url_encode(name) + "=" + http::url_encode(version);
  }
  if (!as_of.empty()) query += (query.empty() ? "?" : "&") + std::string("as_of=") + http::url_encode(as_of);
  return "/v1/toolchains/resolve" + query;
}

std::string format_toolchains_table(const json& listing) {
  std::vector<std::vector<std::string>> rows = {{"TOOLCHAIN", "VERSION", "REF", "DIGEST", "NOTE"}};
  const json toolchains = listing.is_object() ? listing.value("toolchains", json::object()) : json::object();
  for (auto it = toolchains.begin(); it != toolchains.end(); ++it) {
    for (const json& entry : it.value()) {
      std::string note;
      if (entry.contains("base")) note = "layer on " + text_of(entry["base"], "ref");
      if (entry.contains("unusable")) note = "unusable: " + text_of(entry, "unusable");
      rows.push_back({it.key(), text_of(entry, "version"), text_of(entry, "ref"), short_digest(text_of(entry, "digest")),
                      note});
    }
  }
  return format_columns(rows);
}

std::string format_resolution(const json& answer) {
  const json& pinned = answer.value("pinned", json::object());
  const json& choice = pinned.value("image_choice", json::object());
  std::vector<std::vector<std::string>> rows;
  const json images = choice.value("images", json::array());
  for (std::size_t i = 0; i < images.size(); ++i) {
    const bool base = i + 1 < images.size();
    rows.push_back({base ? "base" : "image", text_of(images[i], "ref") + " " + text_of(images[i], "digest")});
  }
  const json wanted = choice.value("wanted", json::object());
  const json asked = answer.value("toolchains", json::object());
  const json versions = pinned.value("toolchains", json::object());
  for (auto it = versions.begin(); it != versions.end(); ++it) {
    const std::string name = it.key();
    rows.push_back({name, it.value().get<std::string>() + " (asked " + text_of(asked, name.c_str()) +
                              (text_of(asked, name.c_str()) == "auto" ? " -> " + text_of(wanted, name.c_str()) : "") +
                              ")"});
  }
  if (answer.contains("python_release")) {
    const json& release = answer["python_release"];
    rows.push_back({"release", text_of(release, "version") + " released " + text_of(release, "date") +
                                   " (table complete through " +
                                   text_of(release.value("table", json::object()), "complete_through") + ")"});
  }
  if (choice.contains("python_auto")) rows.push_back({"auto", text_of(choice["python_auto"], "reason")});
  rows.push_back({"reason", text_of(choice, "reason")});
  return format_columns(rows);
}

int cmd_toolchains(const std::string& socket, const ToolchainCommands& commands) {
  const http::HttpClient client(socket);
  if (commands.ls->parsed()) {
    const json listing = http::request_json(client, "GET", "/v1/toolchains");
    std::cout << (commands.json ? listing.dump(2) + "\n" : format_toolchains_table(listing));
    return 0;
  }
  const http::HttpResponse response = client.request("GET", resolve_target(commands.toolchains, commands.as_of));
  if (commands.json && response.status >= 400) {  // the error a run would get, as the API gives it
    std::cout << response.body << "\n";
    return 1;
  }
  http::throw_if_error(response);
  const json answer = json::parse(response.body);
  std::cout << (commands.json ? answer.dump(2) + "\n" : format_resolution(answer));
  return 0;
}

}  // namespace capsule::client
