// JSON through nlohmann's sorted objects; HTML built by hand with every interpolated value escaped.
#include "proxy/pypi/page_render.h"

#include "proxy/pypi/project_name.h"

namespace capsule::proxy::pypi {
namespace {

using nlohmann::json;

std::string dump(const json& document) {
  return document.dump(-1, ' ', /*ensure_ascii=*/false, json::error_handler_t::replace);
}

// pypi.org sends the serial as a number; a value we could not write back as the same digits stays a string.
json serial_value(const std::string& serial) {
  const bool plain = !serial.empty() && serial.size() <= 19 &&
                     serial.find_first_not_of("0123456789") == std::string::npos &&
                     (serial.size() == 1 || serial.front() != '0');
  if (plain) return std::stoull(serial);
  return serial;
}

json meta(const std::optional<std::string>& last_serial) {
  json out = {{"api-version", kApiVersion}};
  if (last_serial) out["_last-serial"] = serial_value(*last_serial);
  return out;
}

// "sha256=<hex>" when there is a sha256, else the first algorithm's "name=<hex>"; "" without digests.
std::string preferred_digest(const std::map<std::string, std::string>& digests) {
  const auto it = digests.count("sha256") ? digests.find("sha256") : digests.begin();
  return it == digests.end() ? "" : it->first + "=" + it->second;
}

// The HTML attribute value for a core-metadata entry, or "" when none is to be written.
std::string core_metadata_attribute(const json& value) {
  if (value.is_boolean()) return value.get<bool>() ? "true" : "";
  if (!value.is_object()) return "";
  std::map<std::string, std::string> digests;
  for (const auto& item : value.items())
    if (item.value().is_string()) digests.emplace(item.key(), item.value().get<std::string>());
  const std::string digest = preferred_digest(digests);
  return digest.empty() ? "true" : digest;
}

void attribute(std::string& out, std::string_view name, std::string_view value) {
  out += ' ';
  out += name;
  out += "=\"";
  out += html_escape(value);
  out += '"';
}

}  // namespace

std::string html_escape(std::string_view text) {
  std::string out;
  out.reserve(text.size());
  for (const char c : text) {
    switch (c) {
      case '&': out += "&amp;"; break;
      case '<': out += "&lt;"; break;
      case '>': out += "&gt;"; break;
      case '"': out += "&quot;"; break;
      case '\'': out += "&#x27;"; break;
      default: out += c;
    }
  }
  return out;
}

std::string render_project_json(const ProjectPage& page, const FileUrl& file_url) {
  json files = json::array();
  for (const auto& file : page.files) {
    json entry = {{"filename", file.filename}, {"url", file_url(file)}, {"hashes", file.hashes},
                  {"yanked", file.yanked}};
    if (file.requires_python) entry["requires-python"] = *file.requires_python;
    if (!file.core_metadata.is_null()) {
      entry["core-metadata"] = file.core_metadata;
      entry["data-dist-info-metadata"] = file.core_metadata;
    }
    if (file.gpg_sig) entry["gpg-sig"] = *file.gpg_sig;
    if (file.size) entry["size"] = *file.size;
    if (file.upload_time_text) entry["upload-time"] = *file.upload_time_text;
    files.push_back(std::move(entry));
  }
  const json document = {
      {"meta", meta(page.last_serial)}, {"name", page.name}, {"versions", page.versions}, {"files", std::move(files)}};
  return dump(document);
}

std::string render_project_html(const ProjectPage& page, const FileUrl& file_url) {
  const std::string name = html_escape(page.name);
  std::string out = "<!DOCTYPE html>\n<html>\n  <head>\n    <meta charset=\"utf-8\">\n";
  out += "    <meta name=\"pypi:repository-version\" content=\"";
  out += kApiVersion;
  out += "\">\n    <title>Links for " + name + "</title>\n  </head>\n  <body>\n    <h1>Links for " + name + "</h1>\n";
  for (const auto& file : page.files) {
    std::string href = file_url(file);
    if (const std::string digest = preferred_digest(file.hashes); !digest.empty())
      href = href.substr(0, href.find('#')) + "#" + digest;
    out += "    <a";
    attribute(out, "href", href);
    if (file.requires_python) attribute(out, "data-requires-python", *file.requires_python);
    if (file.yanked.is_string()) attribute(out, "data-yanked", file.yanked.get<std::string>());
    if (file.yanked.is_boolean() && file.yanked.get<bool>()) attribute(out, "data-yanked", "");
    if (const std::string metadata = core_metadata_attribute(file.core_metadata); !metadata.empty()) {
      attribute(out, "data-core-metadata", metadata);
      attribute(out, "data-dist-info-metadata", metadata);
    }
    if (file.gpg_sig) attribute(out, "data-gpg-sig", *file.gpg_sig ? "true" : "false");
    if (file.upload_time_text) attribute(out, "data-upload-time", *file.upload_time_text);
    out += '>';
    out += html_escape(file.filename);
    out += "</a><br />\n";
  }
  out += "  </body>\n</html>\n";
  return out;
}

std::string render_index_json(const ProjectIndex& index) {
  json projects = json::array();
  for (const auto& name : index.names) projects.push_back({{"name", name}});
  return dump({{"meta", meta(index.last_serial)}, {"projects", std::move(projects)}});
}

std::string render_index_html(const ProjectIndex& index) {
  std::string out = "<!DOCTYPE html>\n<html>\n  <head>\n    <meta charset=\"utf-8\">\n";
  out += "    <meta name=\"pypi:repository-version\" content=\"";
  out += kApiVersion;
  out += "\">\n    <title>Simple index</title>\n  </head>\n  <body>\n";
  for (const auto& name : index.names) {
    out += "    <a";
    attribute(out, "href", normalize_name(name) + "/");
    out += '>';
    out += html_escape(name);
    out += "</a>\n";
  }
  out += "  </body>\n</html>\n";
  return out;
}

}  // namespace capsule::proxy::pypi
