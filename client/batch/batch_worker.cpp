// The batch worker: chunk locks, a shared queue drained by `concurrency` threads each streaming one run at a
// time (POST /v1/runs, ndjson: the id from "queued", the run from "finished"), and a signal thread that cancels
// the runs in flight when the worker is told to stop (scancel, `capsule batch cancel`, Ctrl-C).
#include "client/batch/batch_worker.h"

#include <signal.h>

#include <atomic>
#include <iostream>
#include <map>
#include <mutex>
#include <set>
#include <thread>

#include "client/batch/batch_input.h"
#include "client/cli_daemon.h"
#include "http/unix_client.h"
#include "store/digest.h"

namespace capsule::client::batch {

using nlohmann::json;
using namespace std::chrono_literals;

std::string node_socket_path(std::string socket) {
  const std::string node = node_name();
  for (auto at = socket.find("{node}"); at != std::string::npos; at = socket.find("{node}", at + node.size())) {
    socket.replace(at, 6, node);
  }
  return socket;
}

namespace {

fs::path object_path(const fs::path& root, const char* kind, const std::string& digest) {
  const auto parsed = store::Digest::try_parse(digest);
  if (!parsed) throw std::runtime_error(std::string(1, '\'').append(digest.substr(0, 80)) + "' is not a sha256 digest");
  return root / "objects" / kind / (parsed->hex() + ".tar");
}

}  // namespace

fs::path snapshot_object(const fs::path& root, const std::string& digest) {
  return object_path(root, "snapshots", digest);
}

fs::path image_object(const fs::path& root, const std::string& digest) {
  return object_path(root, "images", digest);
}

namespace {

// The spec's own labels (of a RunSpec, or of a stored run's "spec").
std::map<std::string, std::string> labels_of(const json& body) {
  const json& spec = body.contains("pinned") && body.contains("spec") ? body["spec"] : body;
  std::map<std::string, std::string> labels;
  if (!spec.contains("labels") || !spec["labels"].is_object()) return labels;
  for (const auto& [key, value] : spec["labels"].items()) {
    if (value.is_string()) labels[key] = value.get<std::string>();
  }
  return labels;
}

struct Job {
  std::size_t chunk;
  BatchSpec spec;
};

class Worker {
 public:
  Worker(const BatchDir& batch, const WorkOptions& options) : batch_(batch), client_(options.socket) {}

  int run(const WorkOptions& options);

 private:
  void drain();
  void handle(const Job& job);
  // Runs the spec; the result, or nullopt when it was not run to an end worth keeping.
  std::optional<BatchResult> run_spec(const Job& job);
  void import_what_the_node_lacks(const json& body);
  void write(std::size_t chunk, const BatchResult& result);
  void cancel_in_flight();
  void log(const std::string& line);

  const BatchDir& batch_;
  http::HttpClient client_;
  std::map<std::size_t, base::UniqueFd> chunk_fds_;
  std::vector<Job> queue_;
  std::size_t next_ = 0;
  std::mutex mutex_;                          // queue_, next_, in_flight_, on_node_, writes, the log
  std::map<std::string, std::string> in_flight_;  // run id -> key
  std::set<std::string> on_node_;                 // snapshot and image digests the node's capsuled has
  std::atomic<bool> stopping_{false};
  std::atomic<bool> undone_{false};
};

int Worker::run(const WorkOptions& options) {
  ensure_daemon(client_);
  const auto done = batch_.results(nullptr, options.chunk);  // a Slurm task reads its own chunk's results only
  std::vector<std::size_t> chunks;
  if (options.chunk) {
    if (*options.chunk >= batch_.meta().chunks()) {
      throw std::runtime_error("batch " + batch_.meta().id + " has " + std::to_string(batch_.meta().chunks()) +
                               " chunks, no chunk " + std::to_string(*options.chunk));
    }
    chunks.push_back(*options.chunk);
  } else {
    for (std::size_t i = 0; i < batch_.meta().chunks(); ++i) chunks.push_back(i);
  }
  const std::size_t chunk_size = batch_.meta().chunk_size;
  const std::size_t first = options.chunk ? *options.chunk * chunk_size : 0;  // one chunk: only its lines
  const std::vector<BatchSpec> specs = batch_.specs(first, options.chunk ? chunk_size : SIZE_MAX);
  for (std::size_t chunk : chunks) {
    std::optional<base::UniqueFd> fd = batch_.lock_chunk(chunk);
    if (!fd) {
      log("chunk " + std::to_string(chunk) + " is held by another worker; skipped");
      undone_ = true;
      continue;
    }
    chunk_fds_.emplace(chunk, std::move(*fd));
    const std::size_t begin = chunk * chunk_size - first;
    for (std::size_t i = begin; i < std::min(specs.size(), begin + chunk_size); ++i) {
      if (!done.count(specs[i].key)) queue_.push_back({chunk, specs[i]});
    }
  }
  log("node " + node_name() + ": " + std::to_string(queue_.size()) + " specs to do in " +
      std::to_string(chunk_fds_.size()) + " chunks");

  // Signals go to one thread, which cancels what runs; the run threads see stopping_ and take nothing more.
  sigset_t stop_signals;
  sigemptyset(&stop_signals);
  for (int s : {SIGTERM, SIGINT, SIGHUP}) sigaddset(&stop_signals, s);
  pthread_sigmask(SIG_BLOCK, &stop_signals, nullptr);
  std::atomic<bool> finished{false};
  std::thread watcher([&] {
    const timespec tick{0, 200'000'000};
    while (!finished) {
      const int signal = sigtimedwait(&stop_signals, nullptr, &tick);
      if (signal > 0) {
        log("signal " + std::to_string(signal) + ": cancelling the runs in flight");
        stopping_ = true;
        undone_ = true;
        cancel_in_flight();
      }
    }
  });
  std::vector<std::thread> threads;
  const int count = std::max(1, std::min<int>(batch_.meta().concurrency, static_cast<int>(queue_.size())));
  for (int i = 0; i < count; ++i) threads.emplace_back([this] { drain(); });
  for (std::thread& t : threads) t.join();
  finished = true;
  watcher.join();
  return undone_ ? 1 : 0;
}

void Worker::drain() {
  while (!stopping_) {
    Job job;
    {
      std::lock_guard lock(mutex_);
      if (next_ >= queue_.size()) return;
      job = queue_[next_++];
    }
    if (batch_.cancelled()) {
      stopping_ = true;
      undone_ = true;
      return;
    }
    try {
      handle(job);
    } catch (const http::ConnectError& e) {
      log(job.spec.key + ": " + e.what() + "; stopping");
      stopping_ = true;
      undone_ = true;
    } catch (const std::exception& e) {
      log(job.spec.key + ": " + e.what() + "; left without a result");
      undone_ = true;
    }
  }
}

void Worker::handle(const Job& job) {
  if (!batch_.meta().rerun) {
    if (std::optional<BatchResult> cached = batch_.cached(job.spec.manifest)) {
      BatchResult copy = *cached;  // the cache stores run results only: cached_from names the run itself
      copy.cached_from = json{{"key", cached->key}, {"run_id", cached->run_id}, {"node", cached->node},
                              {"finished", cached->finished}};
      copy.key = job.spec.key;
      copy.labels = labels_of(job.spec.spec);
      copy.finished = utc_now();
      write(job.chunk, copy);
      return;
    }
  }
  std::optional<BatchResult> result = run_spec(job);
  if (!result) {
    undone_ = true;
    return;
  }
  write(job.chunk, *result);
  if (is_result_state(result->state)) batch_.store_in_cache(*result);
}

std::optional<BatchResult> Worker::run_spec(const Job& job) {
  json body = job.spec.spec;
  json& spec = body.contains("pinned") ? body["spec"] : body;
  import_what_the_node_lacks(body);
  BatchResult result;
  result.key = job.spec.key;
  result.manifest = job.spec.manifest;
  result.node = node_name();
  result.labels = labels_of(body);
  spec["labels"]["capsule.batch"] = batch_.meta().id;
  spec["labels"]["capsule.batch.key"] = job.spec.key;

  for (int attempt = 0;; ++attempt) {
    std::string id;
    json run;
    const http::HttpResponse response = client_.stream_lines(
        "POST", "/v1/runs", body, {{"Accept", "application/x-ndjson"}}, [&](std::string_view line) {
          if (line.empty()) return;
          const json event = json::parse(line, nullptr, false);
          if (!event.is_object()) return;
          const std::string kind = event.value("event", "");
          if (kind == "queued") {
            id = event.value("id", "");
            std::lock_guard lock(mutex_);
            in_flight_[id] = job.spec.key;
            if (stopping_) client_.request("POST", "/v1/runs/" + http::url_encode(id) + "/cancel");
          } else if (kind == "finished") {
            run = event.value("run", json(nullptr));
          }
        });
    if (!id.empty()) {
      std::lock_guard lock(mutex_);
      in_flight_.erase(id);
    }
    if (response.status == 429 && !stopping_ && attempt < 600) {  // queue_full: capsuled is busy, not broken
      std::this_thread::sleep_for(500ms);
      continue;
    }
    if (response.status == 400 || response.status == 404 || response.status == 409) {
      try {
        http::throw_if_error(response);
      } catch (const http::ResponseError& e) {
        result.state = "rejected";
        result.reason = e.what();
      }
      result.finished = utc_now();
      return result;
    }
    http::throw_if_error(response);
    if (!run.is_object()) throw std::runtime_error("capsuled's stream ended without the finished run");
    result.run_id = run.value("id", id);
    result.state = run.value("state", "");
    const json results = run.value("result", json::object());
    if (results.contains("exit_code") && results["exit_code"].is_number_integer()) {
      result.exit_code = results["exit_code"].get<int>();
    }
    result.wall_ms = results.value("wall_ms", std::uint64_t{0});
    result.reason = results.value("reason", "");
    result.finished = utc_now();
    result.run = std::move(run);
    if (!is_result_state(result.state)) {
      log(job.spec.key + ": run " + result.run_id + " ended " + result.state + "; left without a result");
      return std::nullopt;
    }
    return result;
  }
}

// What the spec names by digest and this node's capsuled lacks, imported from the objects the submitter exported
// (images kept under the ref capsule-batch:sha256-<hex> so that gc leaves them). A digest found on the node, or
// imported, is remembered: a chunk's specs usually share their image, and each would ask again.
void Worker::import_what_the_node_lacks(const json& body) {
  const fs::path root = batch_.path().parent_path();
  const auto ensure = [&](const std::string& what, const std::string& digest, const std::string& info_path,
                          const fs::path& object, const std::string& import_path, const json& import_body) {
    {
      std::lock_guard lock(mutex_);
      if (on_node_.count(digest)) return;
    }
    if (client_.request("GET", info_path).status == 404) {
      std::error_code ec;
      if (!fs::exists(object, ec)) return;  // the run's own 404 names what is missing
      const json imported = http::request_json(client_, "POST", import_path, import_body);
      if (imported.value("digest", "") != digest) {
        throw std::runtime_error("the " + what + " object " + object.string() + " imports as " +
                                 imported.value("digest", "") + ", not " + digest);
      }
      log("imported " + what + " " + digest);
    }
    std::lock_guard lock(mutex_);
    on_node_.insert(digest);
  };
  for (const std::string& digest : snapshot_digests(body)) {
    if (!store::Digest::try_parse(digest)) continue;  // the run's own 400 names it
    const fs::path object = snapshot_object(root, digest);
    ensure("snapshot", digest, "/v1/snapshots/" + http::url_encode(digest) + "?info=true", object, "/v1/snapshots",
           {{"tar", object.string()}});
  }
  for (const std::string& digest : image_digests(body)) {
    if (!store::Digest::try_parse(digest)) continue;  // the run's own 400 names it
    const fs::path object = image_object(root, digest);
    ensure("image", digest, "/v1/images/" + http::url_encode(digest), object, "/v1/images",
           {{"source", object.string()}, {"format", "archive"}, {"ref", "capsule-batch:sha256-" + digest.substr(7)}});
  }
}

void Worker::write(std::size_t chunk, const BatchResult& result) {
  std::lock_guard lock(mutex_);
  BatchDir::append_result(chunk_fds_.at(chunk).get(), result);
}

void Worker::cancel_in_flight() {
  std::map<std::string, std::string> runs;
  {
    std::lock_guard lock(mutex_);
    runs = in_flight_;
  }
  for (const auto& [id, key] : runs) {
    try {
      client_.request("POST", "/v1/runs/" + http::url_encode(id) + "/cancel");
    } catch (const std::exception& e) {
      log(key + ": cannot cancel run " + id + ": " + e.what());
    }
  }
}

void Worker::log(const std::string& line) {
  std::lock_guard lock(mutex_);
  std::cerr << utc_now() << " capsule batch " << batch_.meta().id << ": " << line << std::endl;
}

}  // namespace

int work(const BatchDir& batch, const WorkOptions& options) {
  Worker worker(batch, options);
  return worker.run(options);
}

}  // namespace capsule::client::batch
