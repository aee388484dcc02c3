// The error code -> HTTP status table, grouped by status so a reader sees what each means for capsule. A new
// code gets its row here once: tests/base/error_codes_test.cpp fails for a code thrown without one.
#include "http/error_status.h"

#include <map>
#include <string>
#include <system_error>

#include "base/error.h"

namespace capsule::http {

unsigned status_for(std::string_view code) {
  static const std::map<std::string, unsigned, std::less<>> kStatus = {
      // 400: the request is malformed or names something invalid.
      {"bad_request", 400}, {"invalid_json", 400}, {"invalid_request", 400}, {"invalid_query", 400},
      {"invalid_spec", 400}, {"invalid_ref", 400}, {"invalid_image", 400}, {"too_many_layers", 400},
      {"bad_cutoff", 400}, {"bad_coordinate", 400}, {"bad_path", 400}, {"bad_project_name", 400},
      {"bad_upstream_url", 400}, {"bad_mirror", 400}, {"bad_cache_key", 400}, {"release_data_outdated", 400},
      {"invalid_path", 400}, {"invalid_archive", 400}, {"snapshot_source_failed", 400},
      {"not_committable", 400},  // a run's commit: its image cannot take a layer (the host image)
      {"invalid_bundle", 400},  // an audit bundle that does not check out (daemon/bundle/)
      // 403: the caller may not do this.
      {"forbidden", 403}, {"cutoff_mismatch", 403},
      // 404: nothing by that name, or hidden by the cutoff.
      {"not_found", 404}, {"image_not_found", 404}, {"no_matching_image", 404}, {"policy_not_found", 404},
      {"snapshot_not_found", 404}, {"baseline_not_found", 404},
      {"outputs_not_kept", 404},  // a run's files or commit: its outputs were not kept, or are gone
      // Protocol-level refusals of the server itself.
      {"method_not_allowed", 405}, {"not_acceptable", 406}, {"request_timeout", 408},
      {"payload_too_large", 413}, {"snapshot_too_large", 413}, {"headers_too_large", 431}, {"not_implemented", 501},
      {"http_version_not_supported", 505}, {"bundle_too_large", 413},
      // 409: the resource's state does not allow it.
      {"conflict", 409}, {"already_finished", 409}, {"run_active", 409}, {"pin_mismatch", 409}, {"not_a_file", 409},
      {"session_ended", 409}, {"session_frozen", 409}, {"stack_ended", 409}, {"snapshot_in_use", 409},
      {"bundle_incomplete", 409}, {"run_exists", 409},  // a bundle's export lacks a pinned object; an import's id is taken
      {"execs_running", 409},  // a session's network is switched only between its execs
      {"record_incomplete", 409},  // a replay of a proxy run whose record kept no list of the objects it was served
      // 429 / 503 / 507: come back later.
      {"queue_full", 429}, {"too_many_sessions", 429}, {"too_many_stacks", 429}, {"draining", 503}, {"too_many_connections", 503}, {"offline_miss", 503},
      {"insufficient_storage", 507},
      // 502 / 504: an upstream failed us.
      {"bad_upstream", 502}, {"upstream_unavailable", 502}, {"upstream_too_large", 502}, {"hash_mismatch", 502},
      {"unverifiable_file", 502}, {"bad_publish_times", 502}, {"upstream_timeout", 504}, {"path_timeout", 504},
      // 500: capsule's own failure.
      {"internal_error", 500}, {"session_failed", 500}, {"image_save_failed", 500}, {"invalid_release_data", 500},
      {"log_unreadable", 500}, {"cache_failure", 500}, {"bad_ca_file", 500},
  };
  const auto found = kStatus.find(code);
  return found == kStatus.end() ? 500 : found->second;
}

std::string error_code_of(const std::exception& error) {
  if (const auto* failure = dynamic_cast<const base::Error*>(&error)) {
    if (failure->code() == "internal_error" && base::is_out_of_space(failure->cause().errno_value)) {
      return "insufficient_storage";
    }
    return failure->code();
  }
  if (const auto* system = dynamic_cast<const std::system_error*>(&error)) {  // std::filesystem's errors too
    const std::error_condition condition = system->code().default_error_condition();
    if (condition.category() == std::generic_category() && base::is_out_of_space(condition.value())) {
      return "insufficient_storage";
    }
  }
  return "internal_error";
}

}  // namespace capsule::http
