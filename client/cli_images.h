// `capsule images import|ls|inspect|share|rm|save|gc`: the image subcommands over capsuled's /v1/images routes,
// and the table the ls subcommand prints.
#pragma once

#include <CLI/CLI.hpp>
#include <cstddef>
#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

namespace capsule::client {

// Who besides its owner may use a ref (docs/security.md, Images): --public / --private, --group G / --no-group.
struct ImageSharing {
  bool make_public = false;
  bool make_private = false;
  std::string group;
  bool no_group = false;
};
// Adds these flags to `command`, and their "public"/"group" fields to `body` (none given: nothing added).
void add_sharing_flags(CLI::App& command, ImageSharing& sharing);
void add_sharing_fields(const ImageSharing& sharing, nlohmann::json& body);

struct ImageImportOptions {
  std::string source;   // host path (made absolute)
  std::string format;   // layout | archive | rootfs; empty: guessed from the source
  std::string ref;      // name[:tag]
  std::vector<std::string> labels;  // K=V, rootfs only; win over the labels file's
  std::string labels_file;          // a JSON object of string labels (the labels.json the recipes write)
  bool quiet = false;   // no progress line
  ImageSharing sharing;
};

// "layout" for a directory holding an oci-layout file, "rootfs" for other directories; for files, "archive"
// when named *.oci.tar, *.oci.tar.gz or *.oci-archive, else "rootfs" (a tarball of a root filesystem).
// --format overrides the guess.
std::string guess_import_format(const std::string& source);
// The POST /v1/images body for these options: labels from the labels file, then the --label items over them.
// Throws std::invalid_argument for malformed labels or a labels file that is not a JSON object of strings (or
// larger than kMaxLabelsFileBytes), std::runtime_error for one that cannot be read.
inline constexpr std::size_t kMaxLabelsFileBytes = 64 * 1024;
nlohmann::json build_import_body(const ImageImportOptions& options);
// REF  DIGEST(12)  SIZE  TOOLCHAINS, one image per line.
std::string format_images_table(const nlohmann::json& images);

int cmd_images_import(const std::string& socket, ImageImportOptions options);
int cmd_images_ls(const std::string& socket, bool json);
int cmd_images_inspect(const std::string& socket, const std::string& ref);
int cmd_images_rm(const std::string& socket, const std::string& ref);
int cmd_images_save(const std::string& socket, const std::string& ref, const std::string& out);
int cmd_images_gc(const std::string& socket);
// PATCH /v1/images/{ref} with the sharing flags; prints who may use the ref now.
int cmd_images_share(const std::string& socket, const std::string& ref, const ImageSharing& sharing);

}  // namespace capsule::client
