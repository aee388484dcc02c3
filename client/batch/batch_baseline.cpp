// Baselines for a batch's specs: one run for all, or per key the run an earlier batch made of the same spec, so
// a harness re-running a batch of migrations compares each project with its own earlier run.
#include "client/batch/batch_baseline.h"

#include <optional>
#include <stdexcept>

namespace capsule::client::batch {

using nlohmann::json;

namespace {

// The RunSpec of a request body: the body itself, or a stored run's "spec".
json& run_spec_of(json& body) {
  return body.contains("pinned") && body.contains("spec") && body["spec"].is_object() ? body["spec"] : body;
}

bool collects_junit(const json& spec) {
  if (!spec.contains("collect") || !spec["collect"].is_object()) return false;
  const json& collect = spec["collect"];
  return collect.contains("junit") && collect["junit"].is_array() && !collect["junit"].empty();
}

// Each key's result in batch `id`, which must hold `expected` specs.
std::map<std::string, BatchResult> results_of(const fs::path& root, const std::string& id, std::size_t expected) {
  std::optional<BatchDir> opened;
  try {
    opened.emplace(root, id);
  } catch (const std::runtime_error& e) {  // "no batch ID in ROOT", "not a batch id: ..."
    throw std::runtime_error(std::string("--baseline-batch: ") + e.what());
  }
  const BatchDir& earlier = *opened;
  if (earlier.meta().specs != expected) {
    throw std::runtime_error("--baseline-batch " + id + " has " + std::to_string(earlier.meta().specs) +
                             " specs, this input " + std::to_string(expected) +
                             ": each spec is compared with the run of the same key there");
  }
  return earlier.results();
}

}  // namespace

void apply_baselines(std::vector<InputSpec>& inputs, const BaselineFlags& flags, const fs::path& root) {
  if (flags.run.empty() && flags.batch.empty()) {
    if (flags.allow_removed) throw std::runtime_error("--allow-removed needs --baseline or --baseline-batch");
    return;
  }
  if (!flags.run.empty() && !flags.batch.empty()) {
    throw std::runtime_error("--baseline and --baseline-batch exclude each other");
  }
  const std::string flag = flags.batch.empty() ? "--baseline" : "--baseline-batch";
  std::map<std::string, BatchResult> results;
  if (!flags.batch.empty()) results = results_of(root, flags.batch, inputs.size());
  for (InputSpec& input : inputs) {
    json& spec = run_spec_of(input.body);
    if (!spec.is_object() || spec.contains("baseline")) continue;  // its own baseline, or the daemon's 400
    if (!collects_junit(spec)) {
      throw std::runtime_error(input.where + ": " + flag + " needs collect.junit: the test cases are what is compared");
    }
    std::string run = flags.run;
    if (run.empty()) {
      const auto found = results.find(input.key);
      if (found == results.end()) {
        throw std::runtime_error(input.where + ": key '" + input.key + "' has no result in batch " + flags.batch);
      }
      const BatchResult& earlier = found->second;
      if (earlier.run_id.empty()) {
        throw std::runtime_error(input.where + ": key '" + input.key + "' ended " + earlier.state +
                                 " without a run in batch " + flags.batch +
                                 (earlier.reason.empty() ? "" : ": " + earlier.reason.substr(0, 200)));
      }
      run = earlier.run_id;
    }
    spec["baseline"] = {{"run", run}, {"allow_removed", flags.allow_removed}};
  }
}

}  // namespace capsule::client::batch
