// The batch subcommands: submit pins every spec through this machine's capsuled, writes the batch directory
// and starts its workers; the others read that directory (and ask the engine whether workers still run).
#include "client/cli_batch.h"

#include <unistd.h>

#include <chrono>
#include <fstream>
#include <iostream>
#include <set>
#include <thread>

#include "client/batch/batch_baseline.h"
#include "client/batch/batch_engine.h"
#include "client/batch/batch_input.h"
#include "client/batch/batch_summary.h"
#include "client/batch/batch_worker.h"
#include "client/cli_args.h"
#include "client/cli_daemon.h"
#include "client/cli_snapshot.h"

namespace capsule::client {

using nlohmann::json;
using namespace batch;

namespace {

int wait_for(const BatchDir& dir, int timeout_s, bool quiet) {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(timeout_s);
  std::chrono::milliseconds pause(25);  // doubling up to 500 ms: a short batch is seen ending soon after it does
  for (;;) {
    const bool alive = workers_alive(dir);
    const json summary = summarize(dir, alive);
    if (summary["state"] != "running") {
      if (!quiet) std::cout << summary_text(summary);
      return summary["state"] == "finished" ? 0 : 1;
    }
    if (timeout_s > 0 && std::chrono::steady_clock::now() >= deadline) {
      std::cerr << "capsule: batch " << dir.meta().id << " still runs after " << timeout_s << " s\n";
      return 124;
    }
    std::this_thread::sleep_for(pause);
    pause = std::min(pause * 2, std::chrono::milliseconds(500));
  }
}

// The image as an oci-archive, written by capsuled as the caller and renamed into place once whole (the
// partial name ends in .tar: save writes an OCI layout directory to any other name).
void export_image(const http::HttpClient& client, const std::string& digest, const fs::path& out) {
  fs::path partial = out;
  partial.replace_extension(".partial.tar");
  try {
    http::request_json(client, "POST", "/v1/images/" + http::url_encode(digest) + "/save", {{"path", partial.string()}});
  } catch (...) {
    std::error_code ec;
    fs::remove_all(partial, ec);
    throw;
  }
  fs::rename(partial, out);
}

int submit(const std::string& socket, bool socket_given, const BatchCommands& c, const std::string& root) {
  std::vector<InputSpec> inputs;
  try {
    inputs = read_input(c.input);
    apply_baselines(inputs, {c.baseline, c.baseline_batch, c.allow_removed}, root);
  } catch (const std::runtime_error& e) {
    std::cerr << "capsule: " << e.what() << "\n";
    return 2;
  }
  const http::HttpClient client(socket);
  ensure_daemon(client);
  std::vector<BatchSpec> specs;
  specs.reserve(inputs.size());
  std::set<std::string> snapshots, images;
  PinCache pins;
  pins.progress = &std::cerr;  // snapshots may take a while: each is reported as it is made or found
  pins.snapshots_total = workspace_snapshots(inputs);
  for (const InputSpec& input : inputs) {
    json pinned = pin_spec(client, input, pins);
    for (const std::string& digest : snapshot_digests(pinned)) snapshots.insert(digest);
    for (const std::string& digest : image_digests(pinned)) images.insert(digest);
    specs.push_back({input.key, pinned, manifest_digest(pinned)});
  }
  BatchMeta meta;
  meta.id = new_batch_id();
  meta.engine = c.engine;
  meta.created = utc_now();
  meta.specs = specs.size();
  meta.chunk_size = c.chunk_size ? c.chunk_size : c.engine == "slurm" ? 20 : 100;
  meta.concurrency = c.concurrency;
  meta.partition = c.partition;
  meta.socket = !c.node_socket.empty() ? c.node_socket : socket_given ? socket : "";
  meta.rerun = c.rerun;
  meta.source = absolute_path(c.input);
  if (c.engine != "local") {  // other nodes import what their capsuled lacks from here, each object once
    const auto export_missing = [&](const fs::path& object, auto export_to) {
      std::error_code ec;
      if (fs::exists(object, ec)) return;
      fs::create_directories(object.parent_path());
      export_to(object);
    };
    for (const std::string& digest : snapshots) {
      export_missing(snapshot_object(root, digest), [&](const fs::path& out) { export_snapshot(client, digest, out); });
    }
    for (const std::string& digest : images) {
      export_missing(image_object(root, digest), [&](const fs::path& out) { export_image(client, digest, out); });
    }
  }
  const BatchDir dir = BatchDir::create(root, meta, specs);
  if (meta.engine != "none") launch_workers(dir, meta.socket);
  if (c.json) {
    std::cout << json{{"id", meta.id}, {"dir", dir.path().string()}, {"specs", meta.specs},
                      {"chunks", meta.chunks()}}.dump() << "\n";
  } else {
    std::cout << meta.id << "\n";
  }
  return c.wait_after ? wait_for(dir, 0, false) : 0;
}

}  // namespace

int cmd_batch(const std::string& socket, bool socket_given, const BatchCommands& c) {
  const std::string root = absolute_path(c.root.empty() ? default_batch_root() : c.root);
  if (c.submit->parsed()) return submit(socket, socket_given, c, root);
  if (c.ls->parsed()) {
    json list = json::array();
    std::error_code ec;
    for (const auto& entry : fs::directory_iterator(root, ec)) {
      const std::string name = entry.path().filename();
      if (name.rfind("b-", 0) != 0) continue;
      try {
        const BatchDir dir(root, name);
        list.push_back(summarize(dir, workers_alive(dir)));
        list.back().erase("failures");
      } catch (const std::exception&) {
        // not a batch (a damaged or foreign directory): not listed
      }
    }
    if (c.json) {
      std::cout << list.dump(2) << "\n";
    } else {
      for (const json& s : list) {
        std::cout << s["id"].get<std::string>() << "  " << s["engine"].get<std::string>() << "  "
                  << s["state"].get<std::string>() << "  " << s["done"] << "/" << s["specs"] << "\n";
      }
    }
    return 0;
  }
  const BatchDir dir(root, c.id);
  if (c.work->parsed()) return work(dir, {node_socket_path(socket), c.chunk});
  if (c.status->parsed()) {
    const json summary = summarize(dir, workers_alive(dir));
    std::cout << (c.json ? summary.dump(2) + "\n" : summary_text(summary));
    return 0;
  }
  if (c.wait->parsed()) return wait_for(dir, c.timeout_s, false);
  if (c.results->parsed()) {
    const auto results = dir.results();
    for (const BatchSpec& spec : dir.specs()) {
      if (const auto it = results.find(spec.key); it != results.end()) {
        std::cout << to_json(it->second).dump(-1, ' ', false, json::error_handler_t::replace) << "\n";
      }
    }
    return 0;
  }
  if (c.summary->parsed()) {
    const json summary = summarize(dir, workers_alive(dir));
    const std::string text = c.format == "json" ? summary.dump(2) + "\n"
                             : c.format == "html" ? summary_html(summary) : summary_text(summary);
    if (c.out.empty()) {
      std::cout << text;
    } else {
      std::ofstream file(c.out, std::ios::binary | std::ios::trunc);
      file << text;
      file.close();
      if (!file) throw std::runtime_error("cannot write " + c.out);
    }
    return 0;
  }
  if (c.cancel->parsed()) {
    cancel_workers(dir);
    std::cout << "cancelled " << dir.meta().id << "\n";
    return 0;
  }
  if (c.resume->parsed()) {
    if (workers_alive(dir)) {
      std::cerr << "capsule: batch " << dir.meta().id << " still has workers; cancel it or wait\n";
      return 1;
    }
    if (dir.meta().engine == "none") {
      std::cerr << "capsule: batch " << dir.meta().id << " was submitted with --engine none: run `capsule batch work "
                << dir.meta().id << " --chunk N` for its " << unfinished_chunks(dir).size() << " unfinished chunks\n";
      return 1;
    }
    dir.mark_cancelled(false);
    launch_workers(dir, socket_given ? socket : dir.meta().socket);
    std::cout << dir.meta().id << "\n";
    return 0;
  }
  return 2;
}

}  // namespace capsule::client
