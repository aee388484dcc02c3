// The /v1/toolchains routes: what is installed per toolchain (the image store's org.capsule.toolchain.* labels)
// and a dry run of a run's `toolchains` + `as_of`, answered by the very code that pins a submitted run.
#include <algorithm>
#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <utility>
#include <vector>

#include "daemon/api/api.h"
#include "daemon/image_access.h"
#include "images/image_stack.h"
#include "spec/as_of.h"
#include "spec/json_fields.h"

namespace capsule::daemon {
namespace {

using nlohmann::json;

const images::ImageStore& require_store(const ApiContext& ctx) {
  if (ctx.images.store == nullptr) throw http::ApiError("image_not_found", "this capsuled has no image store");
  return *ctx.images.store;
}

// GET /v1/toolchains: {"toolchains": {name: [{version, ref, digest, base?, unusable?}, ...newest first]}}. A
// toolchain layer is listed with the base it stacks on, as selection sees it (its labels merged over the base's).
json installed_toolchains(const ApiContext& ctx, const Caller& caller) {
  std::map<std::string, std::vector<std::pair<std::string, json>>> by_name;  // name -> (version, entry)
  for (const images::ImageCandidate& image : images::toolchain_candidates(require_store(ctx).list(ref_viewer(caller, ctx.access)))) {
    for (const auto& [key, version] : image.labels) {
      if (!key.starts_with(images::kToolchainLabelPrefix) || !images::is_valid_version(version)) continue;
      json entry = {{"version", version}, {"ref", image.ref}, {"digest", image.digest}};
      if (!image.base_ref.empty()) entry["base"] = {{"ref", image.base_ref}, {"digest", image.base_digest}};
      if (!image.unusable.empty()) entry["unusable"] = image.unusable;
      by_name[key.substr(images::kToolchainLabelPrefix.size())].emplace_back(version, std::move(entry));
    }
  }
  json toolchains = json::object();
  for (auto& [name, entries] : by_name) {
    std::stable_sort(entries.begin(), entries.end(), [](const auto& a, const auto& b) {
      return images::compare_versions(a.first, b.first) > 0;
    });
    json list = json::array();
    for (auto& entry : entries) list.push_back(std::move(entry.second));
    toolchains[name] = std::move(list);
  }
  return {{"toolchains", toolchains}};
}

// The release table's entry for the version "auto" chose, and which table answered.
json python_release(const images::PythonReleases& table, const std::string& version) {
  json out = {{"version", version},
              {"table", {{"path", table.origin()},
                         {"complete_through", base::format_date(table.complete_through())},
                         {"source", table.source()}}}};
  if (const images::PythonRelease* release = table.find(version)) out["date"] = base::format_date(release->date);
  return out;
}

// GET /v1/toolchains/resolve?NAME=VERSION...&as_of=DATE|SPAN: what a run with these `toolchains` and `as_of`
// would be pinned to, or the error its submission would get. Validation is parse_run_spec's (the same
// parse_toolchain_request and field names), the choice is pin_images'.
json resolve_toolchains(const ApiContext& ctx, const http::Request& request) {
  json toolchains = json::object();
  std::string as_of;
  for (const auto& [key, value] : request.query) {
    if (key == "as_of") as_of = value;
    else toolchains[key] = value;
  }
  if (toolchains.empty()) {
    throw http::ApiError("invalid_query", "name at least one toolchain, as a run's toolchains: "
                                          "?python=auto&as_of=2025-01-01, ?java=17");
  }
  if (!as_of.empty()) as_of = spec::resolve_as_of(as_of, "as_of");  // a span, as a run's, is today's date minus it
  Submission run;
  run.caller = caller_of(request.peer);
  try {
    const images::ToolchainRequest parsed = images::parse_toolchain_request(toolchains, as_of);
    run.spec.toolchains = parsed.toolchains;
    if (parsed.as_of) run.spec.as_of = as_of;
  } catch (const images::ToolchainError& e) {
    spec::invalid("toolchains", e.what());  // as parse_run_spec names it when toolchains are given
  }
  pin_images(run, ctx.images);
  // The image half of the run's `pinned`: what its record would show.
  const json pinned = spec::to_json(run.pinned);
  json answer = {{"toolchains", toolchains},
                 {"pinned", {{"image_digests", pinned.at("image_digests")},
                             {"image_choice", pinned.at("image_choice")},
                             {"toolchains", pinned.at("toolchains")}}}};
  if (run.spec.as_of) answer["as_of"] = *run.spec.as_of;
  answer["image"] = run.pinned.image_choice.at("images").back();  // the chosen image; a layer's base precedes it
  if (run.pinned.image_choice.contains("python_auto") && ctx.images.python_releases != nullptr) {
    answer["python_release"] = python_release(*ctx.images.python_releases, run.pinned.toolchains.at("python"));
  }
  return answer;
}

}  // namespace

void register_toolchains_api(http::Router& router, ApiContext& ctx) {
  router.add("GET", "/v1/toolchains",
             [&ctx](const http::Request& request) {
               return http::json_response(200, installed_toolchains(ctx, caller_of(request.peer)));
             });
  router.add("GET", "/v1/toolchains/resolve", [&ctx](const http::Request& request) {
    return http::json_response(200, resolve_toolchains(ctx, request));
  });
}

}  // namespace capsule::daemon
