// The batch directory's files: batch.json (the meta), specs.jsonl, results/chunk-N.jsonl (appended with one
// write per line under a flock, so a crash leaves at most one torn last line), launches.json, the root's cache.
#include "client/batch/batch_dir.h"

#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <fstream>
#include <random>
#include <regex>
#include <stdexcept>

#include "base/file_util.h"

namespace capsule::client::batch {

using nlohmann::json;

namespace {

template <typename T>
T field(const json& body, const char* name, const T& fallback) {
  if (!body.contains(name) || body[name].is_null()) return fallback;
  try {
    return body[name].get<T>();
  } catch (const json::exception&) {
    throw std::runtime_error(std::string("batch file: \"") + name + "\" has the wrong type");
  }
}

std::string read_text(const fs::path& file, std::uint64_t max_bytes) {
  const base::UniqueFd fd = base::open_regular_file(file, "batch: read");
  return base::read_fd(fd.get(), max_bytes, "batch: read", file.string());
}

// Calls on_line for each line of a JSONL file (skipping empty ones); a line longer than max_bytes is passed
// as an empty string (corrupt), and never held in memory whole: at most max_bytes of a line are kept.
template <typename OnLine>
void for_each_line(const fs::path& file, std::size_t max_bytes, OnLine on_line) {
  std::ifstream in(file, std::ios::binary);
  std::string line;
  bool too_long = false;
  const auto end_line = [&] {
    if (too_long) on_line(std::string());
    else if (!line.empty()) on_line(line);
    line.clear();
    too_long = false;
  };
  std::vector<char> block(64 * 1024);
  while (in.read(block.data(), static_cast<std::streamsize>(block.size())) || in.gcount() > 0) {
    const std::string_view data(block.data(), static_cast<std::size_t>(in.gcount()));
    std::size_t start = 0;
    while (start < data.size()) {
      const std::size_t newline = data.find('\n', start);
      const std::string_view piece = data.substr(start, newline == std::string_view::npos ? std::string_view::npos : newline - start);
      if (!too_long && line.size() + piece.size() > max_bytes) {
        too_long = true;
        line.clear();
        line.shrink_to_fit();
      }
      if (!too_long) line.append(piece);
      if (newline == std::string_view::npos) break;
      end_line();
      start = newline + 1;
    }
  }
  end_line();  // a last line without its newline (a torn append) is passed too; parsing it decides
}

// The cache decides what does not run: one another user could write to would let them choose results.
void require_own_private_dir(const fs::path& dir) {
  struct stat st {};
  if (::lstat(dir.c_str(), &st) != 0 || !S_ISDIR(st.st_mode) || st.st_uid != ::geteuid() || (st.st_mode & 022) != 0) {
    throw std::runtime_error("batch: " + dir.string() + " must be a directory of your own that no one else may write to");
  }
}

// The current time, broken down in UTC.
std::tm utc_tm() {
  const std::time_t now = std::time(nullptr);
  std::tm tm{};
  ::gmtime_r(&now, &tm);
  return tm;
}

std::string chunk_file(std::size_t index) { return "chunk-" + std::to_string(index) + ".jsonl"; }

std::string manifest_hex(const std::string& manifest) {
  static const std::regex digest("sha256:[0-9a-f]{64}");
  if (!std::regex_match(manifest, digest)) throw std::runtime_error("batch: not a manifest digest: " + manifest);
  return manifest.substr(7);
}

}  // namespace

json to_json(const BatchMeta& m) {
  return {{"id", m.id}, {"engine", m.engine}, {"created", m.created}, {"specs", m.specs},
          {"chunk_size", m.chunk_size}, {"concurrency", m.concurrency}, {"partition", m.partition},
          {"socket", m.socket}, {"rerun", m.rerun}, {"source", m.source}};
}

BatchMeta parse_meta(const json& body) {
  if (!body.is_object()) throw std::runtime_error("batch.json is not an object");
  BatchMeta m;
  m.id = field<std::string>(body, "id", "");
  m.engine = field<std::string>(body, "engine", "local");
  m.created = field<std::string>(body, "created", "");
  m.specs = field<std::size_t>(body, "specs", 0);
  m.chunk_size = std::max<std::size_t>(1, field<std::size_t>(body, "chunk_size", 1));
  m.concurrency = std::max(1, field<int>(body, "concurrency", 1));
  m.partition = field<std::string>(body, "partition", "");
  m.socket = field<std::string>(body, "socket", "");
  m.rerun = field<bool>(body, "rerun", false);
  m.source = field<std::string>(body, "source", "");
  return m;
}

json to_json(const BatchResult& r) {
  json j = {{"key", r.key}, {"manifest", r.manifest}, {"node", r.node}, {"run_id", r.run_id},
            {"state", r.state}, {"exit_code", r.exit_code ? json(*r.exit_code) : json(nullptr)},
            {"wall_ms", r.wall_ms}, {"reason", r.reason}, {"finished", r.finished}, {"labels", r.labels}};
  if (r.cached_from) j["cached_from"] = *r.cached_from;
  j["run"] = r.run;
  return j;
}

BatchResult parse_result(const json& body) {
  if (!body.is_object()) throw std::runtime_error("a result is not an object");
  BatchResult r;
  r.key = field<std::string>(body, "key", "");
  if (r.key.empty()) throw std::runtime_error("a result has no key");
  r.manifest = field<std::string>(body, "manifest", "");
  r.node = field<std::string>(body, "node", "");
  r.run_id = field<std::string>(body, "run_id", "");
  r.state = field<std::string>(body, "state", "");
  if (body.contains("exit_code") && body["exit_code"].is_number_integer()) r.exit_code = body["exit_code"].get<int>();
  r.wall_ms = field<std::uint64_t>(body, "wall_ms", 0);
  r.reason = field<std::string>(body, "reason", "");
  r.finished = field<std::string>(body, "finished", "");
  r.labels = field<std::map<std::string, std::string>>(body, "labels", {});
  if (body.contains("cached_from") && body["cached_from"].is_object()) r.cached_from = body["cached_from"];
  r.run = body.value("run", json(nullptr));
  return r;
}

json to_json(const Launch& l) {
  return {{"engine", l.engine}, {"pid", l.pid}, {"start_time", l.start_time}, {"slurm_job", l.slurm_job},
          {"launched", l.launched}};
}

Launch parse_launch(const json& body) {
  Launch l;
  l.engine = field<std::string>(body, "engine", "");
  l.pid = field<int>(body, "pid", 0);
  l.start_time = field<std::string>(body, "start_time", "");
  l.slurm_job = field<std::string>(body, "slurm_job", "");
  l.launched = field<std::string>(body, "launched", "");
  return l;
}

std::string default_batch_root() {
  if (const char* root = std::getenv("CAPSULE_BATCH_ROOT"); root && *root) return root;
  if (const char* data = std::getenv("XDG_DATA_HOME"); data && *data) return std::string(data) + "/capsule/batches";
  const char* home = std::getenv("HOME");
  return std::string(home && *home ? home : "/root") + "/.local/share/capsule/batches";
}

std::string utc_now() {
  const std::tm tm = utc_tm();
  char text[32];
  std::strftime(text, sizeof text, "%Y-%m-%dT%H:%M:%SZ", &tm);
  return text;
}

std::string new_batch_id() {
  std::random_device random;
  char suffix[16];
  std::snprintf(suffix, sizeof suffix, "%08x", random());
  const std::tm tm = utc_tm();
  char stamp[32];
  std::strftime(stamp, sizeof stamp, "%Y%m%d-%H%M%S", &tm);
  return std::string("b-") + stamp + "-" + suffix;
}

std::string node_name() {
  if (const char* slurm_node = std::getenv("SLURMD_NODENAME"); slurm_node && *slurm_node) return slurm_node;
  char name[256] = {};
  if (::gethostname(name, sizeof name - 1) != 0) return "unknown";
  return name;
}

bool is_result_state(const std::string& state) {
  return state == "succeeded" || state == "failed" || state == "timed_out" || state == "oom_killed" ||
         state == "signaled" || state == "setup_failed";
}

BatchDir::BatchDir(fs::path root, fs::path dir, BatchMeta meta)
    : root_(std::move(root)), dir_(std::move(dir)), meta_(std::move(meta)) {}

BatchDir::BatchDir(const fs::path& root, const std::string& id) {
  static const std::regex shape("b-[0-9]{8}-[0-9]{6}-[0-9a-f]{8}");
  if (!std::regex_match(id, shape)) throw std::runtime_error("not a batch id: '" + id + "' (b-YYYYMMDD-HHMMSS-XXXXXXXX)");
  root_ = root;
  dir_ = root / id;
  std::error_code ec;
  if (!fs::is_regular_file(dir_ / "batch.json", ec)) {
    throw std::runtime_error("no batch " + id + " in " + root.string());
  }
  meta_ = parse_meta(json::parse(read_text(dir_ / "batch.json", 1u << 20)));
}

BatchDir BatchDir::create(const fs::path& root, const BatchMeta& meta, const std::vector<BatchSpec>& specs) {
  fs::create_directories(root);  // an existing root keeps its mode (a shared one may be group-writable)
  if (fs::create_directory(root / "cache")) fs::permissions(root / "cache", fs::perms::owner_all);
  require_own_private_dir(root / "cache");
  const fs::path staging = base::make_temp_dir(root, "." + meta.id + ".", "batch: create");
  try {
    // 0700 like make_temp_dir made it: results hold the runs' output, the caller's alone.
    std::string lines;
    for (const BatchSpec& s : specs) {
      lines += json{{"key", s.key}, {"manifest", s.manifest}, {"spec", s.spec}}.dump() + "\n";
    }
    base::write_file_atomic(staging / "specs.jsonl", lines, "batch: write specs.jsonl");
    base::write_file_atomic(staging / "batch.json", to_json(meta).dump(2) + "\n", "batch: write batch.json");
    base::make_dir(staging / "results", 0755, "batch: create results");
    base::make_dir(staging / "logs", 0755, "batch: create logs");
    fs::rename(staging, root / meta.id);
  } catch (...) {
    std::error_code ignored;
    fs::remove_all(staging, ignored);
    throw;
  }
  return BatchDir(root, root / meta.id, meta);
}

std::vector<BatchSpec> BatchDir::specs(std::size_t first, std::size_t count) const {
  std::vector<BatchSpec> out;
  std::size_t index = 0;
  for_each_line(dir_ / "specs.jsonl", 2 * kMaxSpecBytes, [&](const std::string& line) {
    if (index++ - first >= count) return;  // outside [first, first + count): counted, not parsed
    const json j = json::parse(line);  // written by create(): a failure here is a damaged batch, reported
    out.push_back({j.at("key").get<std::string>(), j.at("spec"), j.at("manifest").get<std::string>()});
  });
  if (index != meta_.specs) {
    throw std::runtime_error("batch " + meta_.id + ": specs.jsonl holds " + std::to_string(index) +
                             " specs, batch.json says " + std::to_string(meta_.specs));
  }
  return out;
}

std::map<std::string, BatchResult> BatchDir::results(std::size_t* corrupt, std::optional<std::size_t> chunk) const {
  std::map<std::string, BatchResult> out;
  std::size_t bad = 0;
  for (std::size_t i = chunk.value_or(0); i < (chunk ? *chunk + 1 : meta_.chunks()); ++i) {
    std::error_code ec;
    const fs::path file = dir_ / "results" / chunk_file(i);
    if (!fs::exists(file, ec)) continue;
    for_each_line(file, kMaxResultBytes, [&](const std::string& line) {
      try {
        BatchResult r = parse_result(json::parse(line));
        out[r.key] = std::move(r);
      } catch (const std::exception&) {
        ++bad;
      }
    });
  }
  if (corrupt) *corrupt = bad;
  return out;
}

std::optional<base::UniqueFd> BatchDir::lock_chunk(std::size_t index) const {
  const fs::path file = dir_ / "results" / chunk_file(index);
  base::UniqueFd fd(::open(file.c_str(), O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0644));
  if (!fd) throw std::runtime_error("batch: open " + file.string() + ": " + std::strerror(errno));
  if (::flock(fd.get(), LOCK_EX | LOCK_NB) != 0) {
    if (errno == EWOULDBLOCK) return std::nullopt;
    throw std::runtime_error("batch: lock " + file.string() + ": " + std::strerror(errno));
  }
  return fd;
}

bool BatchDir::chunk_locked(std::size_t index) const {
  const fs::path file = dir_ / "results" / chunk_file(index);
  base::UniqueFd fd(::open(file.c_str(), O_RDONLY | O_CLOEXEC | O_NOFOLLOW));
  if (!fd) return false;
  if (::flock(fd.get(), LOCK_SH | LOCK_NB) != 0) return errno == EWOULDBLOCK;
  return false;
}

void BatchDir::append_result(int fd, const BatchResult& result) {
  std::string line = to_json(result).dump(-1, ' ', false, json::error_handler_t::replace) + "\n";
  if (line.size() > kMaxResultBytes) {  // keep the line readable: the run object is in the ledger anyway
    BatchResult small = result;
    small.run = json(nullptr);
    line = to_json(small).dump(-1, ' ', false, json::error_handler_t::replace) + "\n";
  }
  base::write_all(fd, line.data(), line.size(), "batch: append a result", "results");
  ::fdatasync(fd);
}

std::optional<BatchResult> BatchDir::cached(const std::string& manifest) const {
  const fs::path file = cache_dir() / (manifest_hex(manifest) + ".json");
  require_own_private_dir(cache_dir());
  std::error_code ec;
  if (!fs::exists(file, ec)) return std::nullopt;
  try {
    BatchResult r = parse_result(json::parse(read_text(file, kMaxResultBytes)));
    if (r.manifest != manifest || !is_result_state(r.state)) return std::nullopt;
    return r;
  } catch (const std::exception&) {
    return std::nullopt;  // a damaged entry is a miss; the run's result replaces it
  }
}

void BatchDir::store_in_cache(const BatchResult& result) const {
  std::string text = to_json(result).dump(-1, ' ', false, json::error_handler_t::replace);
  if (text.size() > kMaxResultBytes) {
    BatchResult small = result;
    small.run = json(nullptr);
    text = to_json(small).dump(-1, ' ', false, json::error_handler_t::replace);
  }
  base::write_file_atomic(cache_dir() / (manifest_hex(result.manifest) + ".json"), text, "batch: cache a result");
}

std::vector<Launch> BatchDir::launches() const {
  std::vector<Launch> out;
  std::error_code ec;
  if (!fs::exists(dir_ / "launches.json", ec)) return out;
  for (const json& j : json::parse(read_text(dir_ / "launches.json", 1u << 20))) out.push_back(parse_launch(j));
  return out;
}

void BatchDir::add_launch(const Launch& launch) const {
  json all = json::array();
  for (const Launch& l : launches()) all.push_back(to_json(l));
  all.push_back(to_json(launch));
  base::write_file_atomic(dir_ / "launches.json", all.dump(2) + "\n", "batch: write launches.json");
}

bool BatchDir::cancelled() const {
  std::error_code ec;
  return fs::exists(dir_ / "cancelled", ec);
}

void BatchDir::mark_cancelled(bool cancelled) const {
  if (cancelled) {
    base::write_file_atomic(dir_ / "cancelled", utc_now() + "\n", "batch: mark cancelled");
  } else {
    std::error_code ignored;
    fs::remove(dir_ / "cancelled", ignored);
  }
}

}  // namespace capsule::client::batch
