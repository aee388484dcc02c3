// `capsule batch --engine slurm` on a real single-node Slurm cluster (slurmctld, slurmd and munge from Debian,
// started by tests/support/slurm_cluster.sh in the test's dir and stopped after): the same results as the local
// engine for 200 specs, a task cancelled mid-batch (its run cancelled by its worker) and resumed, a second
// submission that runs nothing, a workspace snapshot and an image carried to a node whose own capsuled lacks
// them, and two slurmd nodes whose capsuleds share one proxy cache and fetch each upstream file once.
#include <fcntl.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <set>
#include <sstream>

#include "tests/support/capsuled_fixture.h"

namespace capsule::testing {
namespace {

const std::string kClusterScript = std::string(CAPSULE_SOURCE_DIR) + "/tests/support/slurm_cluster.sh";

// Runs a shell command; its stdout, and its exit status in *code.
std::string shell(const std::string& command, int* code) {
  std::string out;
  FILE* pipe = ::popen(command.c_str(), "r");
  if (!pipe) return out;
  char buffer[4096];
  while (std::size_t n = std::fread(buffer, 1, sizeof buffer, pipe)) out.append(buffer, n);
  const int status = ::pclose(pipe);
  *code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  return out;
}

class CapsuledBatchSlurm : public Capsuled {
 protected:
  void SetUp() override {
    Capsuled::SetUp();
    root_ = dir_ / "batches";
    cluster_ = dir_ / "slurm";
    int code = 0;
    const std::string out = shell(shell_quoted(kClusterScript) + " start " + shell_quoted(cluster_.string()) + " " +
                                      std::to_string(nodes_), &code);
    ASSERT_EQ(code, 0) << "the Slurm test cluster did not start:\n" << out;
    const auto at = out.find("export SLURM_CONF=");
    ASSERT_NE(at, std::string::npos) << out;
    slurm_conf_ = out.substr(at + 18, out.find('\n', at) - at - 18);
  }
  void TearDown() override {
    int code = 0;
    const std::string out = shell(shell_quoted(kClusterScript) + " stop " + shell_quoted(cluster_.string()), &code);
    EXPECT_EQ(code, 0) << out;
    Capsuled::TearDown();
  }
  Cli capsule(std::vector<std::string> args) {
    args.insert(args.begin(), {"--socket", socket_});
    return run_capsule_cli(dir_, args, {"CAPSULE_BATCH_ROOT=" + root_.string(), "SLURM_CONF=" + slurm_conf_});
  }
  std::string submit(const fs::path& file, std::vector<std::string> flags) {
    flags.insert(flags.begin(), {"batch", "submit", file.string()});
    const Cli submitted = capsule(flags);
    EXPECT_EQ(submitted.code, 0) << submitted.err;
    return submitted.out.substr(0, submitted.out.find('\n'));
  }
  std::map<std::string, json> results(const std::string& id) {
    const Cli listed = capsule({"batch", "results", id});
    EXPECT_EQ(listed.code, 0) << listed.err;
    std::map<std::string, json> out;
    std::istringstream lines(listed.out);
    for (std::string line; std::getline(lines, line);) {
      json r = json::parse(line);
      out[r["key"]] = r;
    }
    return out;
  }
  std::size_t runs_labelled(const std::string& label) { return list("?label=" + label + "&limit=500").size(); }
  std::string slurm_logs(const std::string& id) {
    std::string text;
    for (const auto& entry : fs::directory_iterator(root_ / id / "logs")) text += slurp(entry.path());
    return text;
  }

  int nodes_ = 1;  // slurmd instances: n1, n2, ...
  fs::path root_, cluster_;
  std::string slurm_conf_;
};

TEST_F(CapsuledBatchSlurm, TwoHundredSpecsGiveTheLocalResultsAndASecondSubmissionRunsNothing) {
  start();
  std::string text;
  for (int i = 0; i < 200; ++i) {
    text += json{{"key", "spec-" + std::to_string(i)},
                 {"argv", {"sh", "-c", "echo " + std::to_string(i) + "; exit " + std::to_string(i % 7 == 0 ? 7 : 0)}},
                 {"labels", {{"mod3", std::to_string(i % 3)}}}}.dump() + "\n";
  }
  write_file(dir_ / "specs.jsonl", text);

  const std::string local = submit(dir_ / "specs.jsonl", {"--engine", "local", "--concurrency", "4"});
  ASSERT_EQ(capsule({"batch", "wait", local}).code, 0);
  const std::string slurm = submit(dir_ / "specs.jsonl", {"--engine", "slurm", "--partition", "test", "--rerun",
                                                          "--chunk-size", "20", "--concurrency", "4"});
  const Cli waited = capsule({"batch", "wait", slurm, "--timeout", "600"});
  ASSERT_EQ(waited.code, 0) << waited.out << waited.err << slurm_logs(slurm);

  const auto by_local = results(local), by_slurm = results(slurm);
  ASSERT_EQ(by_local.size(), 200u);
  ASSERT_EQ(by_slurm.size(), 200u);
  for (const auto& [key, r] : by_local) {
    const json& s = by_slurm.at(key);
    EXPECT_EQ(s["state"], r["state"]) << key;
    EXPECT_EQ(s["exit_code"], r["exit_code"]) << key;
    EXPECT_EQ(s["manifest"], r["manifest"]) << key;
    EXPECT_FALSE(s.contains("cached_from")) << key;  // --rerun: every spec ran in a Slurm task
    EXPECT_NE(s["run_id"], r["run_id"]) << key;
  }
  EXPECT_EQ(runs_labelled("capsule.batch=" + slurm), 200u);
  // One array task per chunk of 20, each with its log.
  const json launches = json::parse(slurp(root_ / slurm / "launches.json"));
  ASSERT_EQ(launches.size(), 1u);
  EXPECT_FALSE(launches[0]["slurm_job"].get<std::string>().empty());
  std::size_t task_logs = 0;
  for (const auto& entry : fs::directory_iterator(root_ / slurm / "logs")) task_logs += entry.path().filename().string().rfind("slurm-", 0) == 0;
  EXPECT_EQ(task_logs, 10u);

  // The same batch again through Slurm: every manifest has a result, nothing runs.
  const std::string again = submit(dir_ / "specs.jsonl", {"--engine", "slurm", "--partition", "test"});
  ASSERT_EQ(capsule({"batch", "wait", again, "--timeout", "600"}).code, 0) << slurm_logs(again);
  EXPECT_EQ(runs_labelled("capsule.batch=" + again), 0u);
  const auto by_again = results(again);
  ASSERT_EQ(by_again.size(), 200u);
  for (const auto& [key, r] : by_again) {
    EXPECT_TRUE(r.contains("cached_from")) << key;
    EXPECT_EQ(r["state"], by_local.at(key)["state"]) << key;
  }
}

TEST_F(CapsuledBatchSlurm, ATaskCancelledMidBatchIsResumedWithoutRerunningFinishedKeys) {
  start();
  std::string text;
  for (int i = 0; i < 6; ++i) {
    text += json{{"key", "k" + std::to_string(i)}, {"argv", {"sh", "-c", "sleep 1; echo " + std::to_string(i)}}}.dump() + "\n";
  }
  text += json{{"key", "long"}, {"argv", {"sh", "-c", "sleep 8; echo long"}}}.dump() + "\n";
  write_file(dir_ / "specs.jsonl", text);
  // Chunks of 2 (k0 k1 | k2 k3 | k4 k5 | long); one run at a time per task, two tasks at a time on 2 CPUs.
  const std::string id = submit(dir_ / "specs.jsonl", {"--engine", "slurm", "--partition", "test", "--chunk-size", "2",
                                                       "--concurrency", "1"});
  ASSERT_TRUE(eventually([&] { return results(id).size() == 6 && runs_labelled("capsule.batch.key=long") == 1; }, 120s))
      << slurm_logs(id);
  const std::string job = json::parse(slurp(root_ / id / "launches.json"))[0]["slurm_job"];
  int code = 0;
  const std::string cancelled = shell("SLURM_CONF=" + shell_quoted(slurm_conf_) + " scancel " + job + "_3 2>&1", &code);
  ASSERT_EQ(code, 0) << cancelled;
  const std::string long_run = list("?label=capsule.batch.key=long")[0]["id"];
  EXPECT_EQ(wait_finished(long_run)["state"], "cancelled") << slurm_logs(id);  // the task's worker cancelled it
  Cli waited = capsule({"batch", "wait", id, "--timeout", "120"});
  EXPECT_EQ(waited.code, 1) << waited.out;
  EXPECT_NE(waited.out.find("incomplete, 6 of 7 done"), std::string::npos) << waited.out;
  const auto before = results(id);

  // Resume: only chunk 3 goes to Slurm again.
  const Cli resumed = capsule({"batch", "resume", id});
  ASSERT_EQ(resumed.code, 0) << resumed.err;
  const json launches = json::parse(slurp(root_ / id / "launches.json"));
  ASSERT_EQ(launches.size(), 2u);
  waited = capsule({"batch", "wait", id, "--timeout", "300"});
  EXPECT_EQ(waited.code, 0) << waited.out << slurm_logs(id);
  const auto after = results(id);
  ASSERT_EQ(after.size(), 7u);
  EXPECT_EQ(after.at("long")["state"], "succeeded");
  for (const auto& [key, r] : before) EXPECT_EQ(after.at(key)["run_id"], r["run_id"]) << "re-ran " << key;
  EXPECT_EQ(runs_labelled("capsule.batch.key=long"), 2u);
  for (int i = 0; i < 6; ++i) EXPECT_EQ(runs_labelled("capsule.batch.key=k" + std::to_string(i)), 1u);
}

// A capsuled playing another node: its own state dir and socket (DIR/NAME.sock), nothing of the submitter's; with
// a config file when one is given.
class NodeDaemon {
 public:
  explicit NodeDaemon(const fs::path& dir, const std::string& name = "node", const fs::path& config = {})
      : socket_((dir / (name + ".sock")).string()) {
    const std::string capsuled = std::string(CAPSULE_BIN_DIR) + "/capsuled", state = (dir / (name + "-state")).string();
    std::vector<std::string> args = {capsuled, "--socket", socket_, "--state-dir", state};
    if (!config.empty()) args.insert(args.end(), {"--config", config.string()});
    std::vector<char*> argv;
    for (auto& arg : args) argv.push_back(arg.data());
    argv.push_back(nullptr);
    const std::string log_path = (dir / (name + "-capsuled.log")).string();
    pid_ = ::fork();
    if (pid_ == 0) {  // async-signal-safe calls only: the test has threads
      const int log = ::open(log_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
      ::dup2(log, STDOUT_FILENO);
      ::dup2(log, STDERR_FILENO);
      ::execv(argv[0], argv.data());
      ::_exit(127);
    }
  }
  ~NodeDaemon() {
    ::kill(pid_, SIGTERM);
    int status = 0;
    ::waitpid(pid_, &status, 0);
    EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << "the node's capsuled did not stop cleanly";
  }
  bool up() const {
    return eventually([&] {
      try {
        return HttpClient(socket_).request("GET", "/v1/health").status == 200;
      } catch (const std::exception&) {
        return false;
      }
    });
  }
  const std::string& socket() const { return socket_; }

 private:
  std::string socket_;
  pid_t pid_ = -1;
};

TEST_F(CapsuledBatchSlurm, AWorkspaceAndAnImageTravelToANodeWhoseCapsuledLacksThem) {
  start();  // the submitting machine's capsuled
  NodeDaemon node(dir_);
  ASSERT_TRUE(node.up());
  const fs::path workspace = make_dir("ws");
  write_file(workspace / "a.txt", "from the submitter\n");
  // An image only the submitter has: a shell and cat, and a marker.
  const fs::path rootfs = make_dir("rootfs");
  for (const char* binary : {"/bin/sh", "/bin/cat"}) copy_with_libraries(binary, rootfs);
  if (fs::exists("/lib64")) fs::create_directories(rootfs / "lib64");
  write_file(rootfs / "marker", "from the image\n");
  const HttpResponse imported =
      call("POST", "/v1/images", {{"source", rootfs.string()}, {"format", "rootfs"}, {"ref", "travel/image:1"},
                                  {"labels", {{"org.capsule.toolchain.java", "17.0.99"}}}});
  ASSERT_EQ(imported.status, 201) << imported.body;
  const std::string image = body_json(imported)["digest"];
  ASSERT_EQ(HttpClient(node.socket()).request("GET", "/v1/images/" + http::url_encode(image)).status, 404);
  write_file(dir_ / "specs.jsonl",
             json{{"key", "read"}, {"argv", {"cat", "/workspace/a.txt"}},
                  {"workspace", {{"path", workspace.string()}}}}.dump() + "\n" +
             json{{"key", "image"}, {"image", "travel/image:1"}, {"argv", {"/bin/cat", "/marker"}}}.dump() + "\n" +
             json{{"key", "toolchain"}, {"toolchains", {{"java", "17"}}}, {"argv", {"/bin/cat", "/marker"}}}.dump() +
                 "\n");
  const std::string id = submit(dir_ / "specs.jsonl", {"--engine", "slurm", "--partition", "test", "--node-socket",
                                                       node.socket()});
  const Cli waited = capsule({"batch", "wait", id, "--timeout", "300"});
  ASSERT_EQ(waited.code, 0) << waited.out << slurm_logs(id);
  const json r = results(id).at("read");
  EXPECT_EQ(r["state"], "succeeded") << r.dump();
  EXPECT_NE(r["run"]["result"]["stdout"].dump().find("from the submitter"), std::string::npos) << r.dump();
  // The node ran it, from the snapshot the submitter exported and the node imported (same digest).
  EXPECT_EQ(HttpClient(node.socket()).request("GET", "/v1/runs/" + r["run_id"].get<std::string>()).status, 200);
  EXPECT_EQ(call("GET", "/v1/runs/" + r["run_id"].get<std::string>()).status, 404);
  const std::string digest = r["run"]["spec"]["workspace"]["snapshot"];
  EXPECT_TRUE(fs::exists(root_ / "objects" / "snapshots" / (digest.substr(7) + ".tar")));
  EXPECT_EQ(HttpClient(node.socket()).request("GET", "/v1/snapshots/" + digest + "?info=true").status, 200);
  EXPECT_NE(slurm_logs(id).find("imported snapshot " + digest), std::string::npos) << slurm_logs(id);

  // The image went as an oci-archive and came in with its digest, under a ref gc leaves.
  const json i = results(id).at("image");
  EXPECT_EQ(i["state"], "succeeded") << i.dump();
  EXPECT_EQ(i["run"]["result"]["stdout"]["head"], "from the image\n") << i.dump();
  EXPECT_EQ(i["run"]["pinned"]["image_digests"], json::array({image})) << i.dump();
  EXPECT_TRUE(fs::exists(root_ / "objects" / "images" / (image.substr(7) + ".tar")));
  EXPECT_NE(slurm_logs(id).find("imported image " + image), std::string::npos) << slurm_logs(id);
  const HttpResponse on_node = HttpClient(node.socket()).request("GET", "/v1/images/" + http::url_encode(image));
  ASSERT_EQ(on_node.status, 200) << on_node.body;
  EXPECT_NE(on_node.body.find("capsule-batch:sha256-" + image.substr(7)), std::string::npos) << on_node.body;

  // A toolchain spec runs the image the submitter's capsuled chose, pinned at submit, not one the node picks.
  const json t = results(id).at("toolchain");
  EXPECT_EQ(t["state"], "succeeded") << t.dump();
  EXPECT_EQ(t["run"]["result"]["stdout"]["head"], "from the image\n") << t.dump();
  EXPECT_EQ(t["run"]["pinned"]["image_digests"], json::array({image})) << t.dump();
  EXPECT_EQ(t["run"]["pinned"]["toolchains"]["java"], "17.0.99") << t.dump();
  EXPECT_EQ(t["run"]["spec"]["toolchains"], json({{"java", "17"}})) << t.dump();
}

// The fixture package upstream served over HTTP on loopback (tests/proxy/fixtures/package_upstream.py --serve),
// counting the requests it gets per path; killed with the test.
class ServedUpstream {
 public:
  explicit ServedUpstream(const fs::path& dir) {
    const fs::path ready = dir / "upstream.json";
    std::vector<std::string> args = {"python3", std::string(CAPSULE_SOURCE_DIR) + "/tests/proxy/fixtures/package_upstream.py",
                                     (dir / "upstream").string(), "--serve"};
    std::vector<char*> argv;
    for (auto& arg : args) argv.push_back(arg.data());
    argv.push_back(nullptr);
    pid_ = ::fork();
    if (pid_ == 0) {
      const int out = ::open(ready.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
      ::dup2(out, STDOUT_FILENO);
      ::execvp(argv[0], argv.data());
      ::_exit(127);
    }
    if (eventually([&] { return slurp(ready).find('\n') != std::string::npos; })) {
      port_ = json::parse(slurp(ready)).at("port").get<int>();
    }
  }
  ~ServedUpstream() {
    ::kill(pid_, SIGKILL);
    ::waitpid(pid_, nullptr, 0);
  }
  int port() const { return port_; }
  std::string url(const std::string& path) const { return "http://127.0.0.1:" + std::to_string(port_) + path; }
  // "GET /path" -> how many times the upstream was asked for it.
  json stats() const {
    int code = 0;
    const std::string out = shell("python3 -c 'import sys, urllib.request; "
                                  "sys.stdout.write(urllib.request.urlopen(sys.argv[1]).read().decode())' " +
                                      shell_quoted(url("/_stats")), &code);
    return code == 0 ? json::parse(out) : json::object();
  }

 private:
  pid_t pid_ = -1;
  int port_ = 0;
};

// Two slurmd (n1, n2) on this host, each with its own capsuled (DIR/n1.sock, DIR/n2.sock: distinct state dirs),
// both configured with one proxy cache directory and the same HTTP upstream.
class CapsuledBatchTwoNodes : public CapsuledBatchSlurm {
 protected:
  CapsuledBatchTwoNodes() { nodes_ = 2; }
};

TEST_F(CapsuledBatchTwoNodes, NodesSharingOneProxyCacheFetchEachObjectOnceUpstream) {
  start();  // the submitting machine's capsuled: pins the specs
  ServedUpstream upstream(dir_);
  ASSERT_NE(upstream.port(), 0) << "the fixture upstream did not start";
  const json config{{"proxy",
                     {{"cache_dir", (dir_ / "shared-proxy-cache").string()},
                      {"pypi_index_url", upstream.url("/simple/")},
                      {"maven_url", upstream.url("/maven/")}}}};
  write_file(dir_ / "node-config.json", config.dump());
  NodeDaemon n1(dir_, "n1", dir_ / "node-config.json"), n2(dir_, "n2", dir_ / "node-config.json");
  ASSERT_TRUE(n1.up());
  ASSERT_TRUE(n2.up());

  // Eight specs that each resolve and download the same packages through their run's proxy; one per chunk, so
  // the array's tasks spread over both nodes (2 CPUs each) and download at the same time.
  std::string text;
  for (int i = 0; i < 8; ++i) {
    json spec = {{"key", "pip-" + std::to_string(i)},
                 {"argv", {"sh", "-c", "cd /tmp && python3 -m pip download -q --no-cache-dir -d dl alpha beta gamma-pkg >&2"
                                       " && ls dl && echo " + std::to_string(i)}},
                 {"network", "proxy"},
                 {"as_of", "2022-07-01"}};
    text += spec.dump() + "\n";
  }
  write_file(dir_ / "specs.jsonl", text);
  const std::string id = submit(dir_ / "specs.jsonl", {"--engine", "slurm", "--partition", "test", "--chunk-size", "1",
                                                       "--node-socket", (dir_ / "{node}.sock").string()});
  const Cli waited = capsule({"batch", "wait", id, "--timeout", "600"});
  ASSERT_EQ(waited.code, 0) << waited.out << slurm_logs(id) << slurp(dir_ / "n1-capsuled.log");

  const auto by_key = results(id);
  ASSERT_EQ(by_key.size(), 8u);
  std::set<std::string> nodes;
  for (const auto& [key, r] : by_key) {
    EXPECT_EQ(r["state"], "succeeded") << key << ": " << r.dump();
    EXPECT_EQ(r["run"]["result"]["stdout"]["head"].get<std::string>().rfind(
                  "alpha-1.1-py3-none-any.whl\nbeta-0.9-py3-none-any.whl\ngamma_pkg-0.2-py3-none-any.whl\n", 0), 0u)
        << key << ": " << r["run"]["result"].dump();
    nodes.insert(r["node"].get<std::string>());
    // The run is in the ledger of the node that ran it, and only there.
    const std::string run_path = "/v1/runs/" + r["run_id"].get<std::string>();
    const int on_n1 = HttpClient(n1.socket()).request("GET", run_path).status;
    const int on_n2 = HttpClient(n2.socket()).request("GET", run_path).status;
    EXPECT_EQ(on_n1 == 200 ? "n1" : on_n2 == 200 ? "n2" : "neither", r["node"]) << key;
  }
  EXPECT_EQ(nodes, (std::set<std::string>{"n1", "n2"})) << "the array did not spread over both nodes";

  // Every file the runs downloaded was fetched upstream once between the two daemons; index pages are each
  // daemon's own (documented), so only files count.
  const json stats = upstream.stats();
  std::size_t files = 0;
  for (const auto& [request, count] : stats.items()) {
    if (request.find("/simple/") != std::string::npos) continue;
    ++files;
    EXPECT_EQ(count.get<int>(), 1) << request << " fetched " << count << " times upstream: " << stats.dump();
  }
  EXPECT_GE(files, 3u) << stats.dump();  // alpha, beta and gamma-pkg's wheels at least
}

}  // namespace
}  // namespace capsule::testing
