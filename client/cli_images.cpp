// The image subcommands: import streams the daemon's ndjson events and shows a progress line (elapsed time)
// on a terminal while the daemon works; the others are one request each.
#include "client/cli_images.h"

#include <unistd.h>

#include <atomic>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <iomanip>
#include <iostream>
#include <sstream>
#include <thread>

#include "client/cli_args.h"
#include "client/run_view.h"
#include "http/unix_client.h"

namespace capsule::client {
namespace {

using nlohmann::json;
namespace fs = std::filesystem;

std::string human_size(std::uint64_t bytes) {
  const char* units[] = {"B", "KB", "MB", "GB", "TB"};
  double value = static_cast<double>(bytes);
  int unit = 0;
  while (value >= 1000 && unit < 4) {
    value /= 1000;
    ++unit;
  }
  std::ostringstream out;
  out << std::fixed << std::setprecision(unit == 0 ? 0 : 1) << value << " " << units[unit];
  return out.str();
}

std::string image_path(const std::string& ref) { return "/v1/images/" + http::url_encode(ref); }

// Redraws "importing SOURCE ... 12s" on stderr every 200 ms while an import runs (terminals only).
class ProgressLine {
 public:
  ProgressLine(std::string label, bool enabled) : label_(std::move(label)) {
    if (!enabled || !isatty(STDERR_FILENO)) return;
    thread_ = std::thread([this] {
      const auto start = std::chrono::steady_clock::now();
      const char spinner[] = "|/-\\";
      for (int tick = 0; !done_; ++tick) {
        const auto seconds = std::chrono::duration_cast<std::chrono::seconds>(std::chrono::steady_clock::now() - start);
        std::cerr << "\r" << spinner[tick % 4] << " " << label_ << " " << seconds.count() << "s" << std::flush;
        std::this_thread::sleep_for(std::chrono::milliseconds(200));
      }
      std::cerr << "\r\033[K" << std::flush;
    });
  }
  ~ProgressLine() {
    done_ = true;
    if (thread_.joinable()) thread_.join();
  }

 private:
  std::string label_;
  std::atomic<bool> done_{false};
  std::thread thread_;
};

// The labels of a --labels-file: a JSON object whose values are all strings, at most kMaxLabelsFileBytes.
json labels_from_file(const std::string& path) {
  std::ifstream file(path, std::ios::binary);
  if (!file) throw std::runtime_error("--labels-file " + path + ": cannot be read");
  std::string content(kMaxLabelsFileBytes + 1, '\0');
  file.read(content.data(), static_cast<std::streamsize>(content.size()));
  content.resize(static_cast<std::size_t>(file.gcount()));
  if (file.bad()) throw std::runtime_error("--labels-file " + path + ": cannot be read");
  if (content.size() > kMaxLabelsFileBytes) {
    throw std::invalid_argument("--labels-file " + path + ": larger than " + std::to_string(kMaxLabelsFileBytes) +
                                " bytes");
  }
  const json labels = json::parse(content, nullptr, false);
  if (labels.is_discarded()) throw std::invalid_argument("--labels-file " + path + ": not valid JSON");
  if (!labels.is_object()) {
    throw std::invalid_argument("--labels-file " + path + ": expected a JSON object {\"K\": \"V\"}");
  }
  for (const auto& [key, value] : labels.items()) {
    if (key.empty()) throw std::invalid_argument("--labels-file " + path + ": a label has an empty name");
    if (!value.is_string()) {
      throw std::invalid_argument("--labels-file " + path + ": label " + key + " is not a string");
    }
  }
  return labels;
}

}  // namespace

std::string guess_import_format(const std::string& source) {
  if (fs::is_directory(source)) return fs::exists(fs::path(source) / "oci-layout") ? "layout" : "rootfs";
  const std::string name = fs::path(source).filename().string();
  for (const char* suffix : {".oci.tar", ".oci.tar.gz", ".oci-archive"}) {
    if (name.size() >= std::string(suffix).size() && name.ends_with(suffix)) return "archive";
  }
  return "rootfs";
}

json build_import_body(const ImageImportOptions& options) {
  json body = {{"source", fs::absolute(options.source).lexically_normal().string()},
               {"format", options.format.empty() ? guess_import_format(options.source) : options.format},
               {"ref", options.ref}};
  json labels = options.labels_file.empty() ? json::object() : labels_from_file(options.labels_file);
  for (const std::string& item : options.labels) {
    const auto [key, value] = split_pair(item, "--label");
    labels[key] = value;
  }
  if (!labels.empty()) body["labels"] = labels;
  add_sharing_fields(options.sharing, body);
  return body;
}

void add_sharing_flags(CLI::App& command, ImageSharing& sharing) {
  CLI::Option* make_public = command.add_flag("--public", sharing.make_public, "everyone may use it");
  command.add_flag("--private", sharing.make_private, "only its owner (and root) may use it")->excludes(make_public);
  CLI::Option* group = command.add_option("--group", sharing.group, "the members of this group may use it");
  command.add_flag("--no-group", sharing.no_group, "shared with no group")->excludes(group);
}

void add_sharing_fields(const ImageSharing& sharing, json& body) {
  if (sharing.make_public || sharing.make_private) body["public"] = sharing.make_public;
  if (!sharing.group.empty()) body["group"] = sharing.group;
  if (sharing.no_group) body["group"] = nullptr;
}

std::string format_images_table(const json& images) {
  std::vector<std::vector<std::string>> rows = {{"REF", "DIGEST", "SIZE", "TOOLCHAINS"}};
  for (const json& image : images) {
    std::string toolchains;
    if (image.contains("toolchains") && image["toolchains"].is_object()) {
      for (auto it = image["toolchains"].begin(); it != image["toolchains"].end(); ++it) {
        toolchains += (toolchains.empty() ? "" : " ") + it.key() + "=" + it.value().get<std::string>();
      }
    }
    const std::string digest = image.value("digest", "");
    const std::string short_digest = digest.substr(0, std::min<std::size_t>(digest.size(), 7 + 12));
    const json refs = image.contains("refs") ? image["refs"] : json::array();
    if (refs.empty()) rows.push_back({"<none>", short_digest, human_size(image.value("size", 0ull)), toolchains});
    for (const json& ref : refs) {
      rows.push_back({ref.get<std::string>(), short_digest, human_size(image.value("size", 0ull)), toolchains});
    }
  }
  return format_columns(rows);
}

int cmd_images_import(const std::string& socket, ImageImportOptions options) {
  const json body = build_import_body(options);
  json image;
  std::string error;
  {
    ProgressLine progress("importing " + body["source"].get<std::string>() + " (" + body["format"].get<std::string>() + ")",
                          !options.quiet);
    const http::HttpResponse response = http::HttpClient(socket).stream_lines(
        "POST", "/v1/images", body, {{"Accept", "application/x-ndjson"}}, [&](std::string_view line) {
          const json event = json::parse(line, nullptr, false);
          if (!event.is_object()) return;
          if (event.value("event", "") == "imported") image = event["image"];
          if (event.value("event", "") == "error") error = event["error"].value("message", "import failed");
        });
    http::throw_if_error(response);
  }
  if (!error.empty()) throw std::runtime_error(error);
  if (!image.is_object()) throw std::runtime_error("the import stream ended without a result");
  std::cout << image.value("digest", "") << "\n";
  std::cerr << "capsule: imported " << options.ref << " (" << human_size(image.value("size", 0ull)) << ")\n";
  return 0;
}

int cmd_images_ls(const std::string& socket, bool json_output) {
  const json list = http::request_json(http::HttpClient(socket), "GET", "/v1/images");
  if (json_output) std::cout << list.dump(2) << "\n";
  else std::cout << format_images_table(list.value("images", json::array()));
  return 0;
}

int cmd_images_inspect(const std::string& socket, const std::string& ref) {
  std::cout << http::request_json(http::HttpClient(socket), "GET", image_path(ref)).dump(2) << "\n";
  return 0;
}

int cmd_images_share(const std::string& socket, const std::string& ref, const ImageSharing& sharing) {
  json body = json::object();
  add_sharing_fields(sharing, body);
  if (body.empty()) throw std::invalid_argument("images share: give --public, --private, --group G or --no-group");
  const json image = http::request_json(http::HttpClient(socket), "PATCH", image_path(ref), body);
  std::cout << image.value("ref_access", json::object()).dump() << "\n";
  return 0;
}

int cmd_images_rm(const std::string& socket, const std::string& ref) {
  for (const json& removed : http::request_json(http::HttpClient(socket), "DELETE", image_path(ref)).value("removed", json::array())) {
    std::cout << "removed " << removed.get<std::string>() << "\n";
  }
  return 0;
}

int cmd_images_save(const std::string& socket, const std::string& ref, const std::string& out) {
  const std::string path = fs::absolute(out).lexically_normal().string();
  http::request_json(http::HttpClient(socket), "POST", image_path(ref) + "/save", {{"path", path}});
  std::cerr << "capsule: saved " << ref << " to " << path << "\n";
  return 0;
}

int cmd_images_gc(const std::string& socket) {
  const json result = http::request_json(http::HttpClient(socket), "POST", "/v1/images/gc");
  std::cout << "removed " << result.value("blobs", json::array()).size() << " blobs ("
            << human_size(result.value("bytes", 0ull)) << ") and " << result.value("layers", json::array()).size()
            << " unpacked layers\n";
  return 0;
}

}  // namespace capsule::client
