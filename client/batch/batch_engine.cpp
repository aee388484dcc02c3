// The engines: a detached local worker (own session, output to logs/local-N.log, found again by pid and start
// time) and Slurm (sbatch --array over the unfinished chunks, squeue to watch, scancel to stop).
#include "client/batch/batch_engine.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <fstream>
#include <sstream>
#include <stdexcept>

#include "base/unique_fd.h"

namespace capsule::client::batch {

namespace {

std::string this_executable() {
  std::error_code ec;
  const fs::path exe = fs::read_symlink("/proc/self/exe", ec);
  if (ec) throw std::runtime_error("cannot find the capsule binary: " + ec.message());
  return exe;
}

// Field 22 of /proc/<pid>/stat (the start time in ticks since boot); empty when there is no such process.
std::string start_time_of(int pid) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/stat");
  std::string stat;
  if (!std::getline(in, stat)) return "";
  const auto close = stat.rfind(')');  // the command name may hold spaces and parentheses
  if (close == std::string::npos) return "";
  std::istringstream fields(stat.substr(close + 2));
  std::string field;
  for (int i = 3; i <= 22 && fields >> field; ++i) {
    if (i == 3 && field == "Z") return "";  // a zombie is not a worker
  }
  return field;
}

bool same_process(const Launch& launch) {
  return launch.pid > 0 && !launch.start_time.empty() && start_time_of(launch.pid) == launch.start_time;
}

std::string shell_quote(const std::string& arg) {
  std::string out = "'";
  for (char c : arg) out += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return out + "'";
}

// Runs argv, its stdout captured (at most 1 MiB) and stderr passed through; throws naming the program when it
// cannot run or exits non-zero.
std::string run_captured(const std::vector<std::string>& argv) {
  int out[2];
  if (::pipe2(out, O_CLOEXEC) != 0) throw std::runtime_error(std::string("pipe: ") + std::strerror(errno));
  base::UniqueFd read_end(out[0]);
  const pid_t pid = ::fork();
  if (pid < 0) throw std::runtime_error(std::string("fork: ") + std::strerror(errno));
  if (pid == 0) {
    ::dup2(out[1], STDOUT_FILENO);
    std::vector<char*> args;
    for (const std::string& a : argv) args.push_back(const_cast<char*>(a.c_str()));
    args.push_back(nullptr);
    ::execvp(args[0], args.data());
    std::fprintf(stderr, "capsule: cannot run %s: %s\n", args[0], std::strerror(errno));
    ::_exit(127);
  }
  ::close(out[1]);
  std::string text;
  char buffer[4096];
  for (;;) {
    const ssize_t n = ::read(read_end.get(), buffer, sizeof buffer);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    if (text.size() < (1u << 20)) text.append(buffer, static_cast<std::size_t>(n));
  }
  int status = 0;
  while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
    throw std::runtime_error(argv[0] + " failed (" +
                             (WIFEXITED(status) ? "exit " + std::to_string(WEXITSTATUS(status))
                                                : "signal " + std::to_string(WTERMSIG(status))) + ")");
  }
  return text;
}

// "0-3,7,9-10": Slurm's --array list.
std::string array_ranges(const std::vector<std::size_t>& chunks) {
  std::string out;
  for (std::size_t i = 0; i < chunks.size();) {
    std::size_t j = i;
    while (j + 1 < chunks.size() && chunks[j + 1] == chunks[j] + 1) ++j;
    out += (out.empty() ? "" : ",") + std::to_string(chunks[i]) + (j > i ? "-" + std::to_string(chunks[j]) : "");
    i = j + 1;
  }
  return out;
}

std::vector<std::string> work_argv(const BatchDir& batch, const std::string& socket) {
  std::vector<std::string> argv = {this_executable()};
  if (!socket.empty()) argv.insert(argv.end(), {"--socket", socket});
  argv.insert(argv.end(), {"batch", "work", batch.meta().id, "--root", batch.path().parent_path().string()});
  return argv;
}

Launch launch_local(const BatchDir& batch, const std::string& socket) {
  const std::vector<std::string> argv = work_argv(batch, socket);
  const fs::path log = batch.logs_dir() / ("local-" + std::to_string(batch.launches().size()) + ".log");
  const pid_t pid = ::fork();
  if (pid < 0) throw std::runtime_error(std::string("fork: ") + std::strerror(errno));
  if (pid == 0) {
    ::setsid();  // its own session: the shell's Ctrl-C and hang-up do not reach it
    const int null = ::open("/dev/null", O_RDONLY | O_CLOEXEC);
    const int out = ::open(log.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
    if (null < 0 || out < 0) ::_exit(125);
    ::dup2(null, STDIN_FILENO);
    ::dup2(out, STDOUT_FILENO);
    ::dup2(out, STDERR_FILENO);
    std::vector<char*> args;
    for (const std::string& a : argv) args.push_back(const_cast<char*>(a.c_str()));
    args.push_back(nullptr);
    ::execv(args[0], args.data());
    ::_exit(127);
  }
  Launch launch;
  launch.engine = "local";
  launch.pid = pid;
  launch.start_time = start_time_of(pid);
  launch.launched = utc_now();
  return launch;
}

Launch launch_slurm(const BatchDir& batch, const std::string& socket, const std::vector<std::size_t>& chunks) {
  std::string wrap;
  for (const std::string& arg : work_argv(batch, socket)) wrap += shell_quote(arg) + " ";
  wrap += "--chunk \"$SLURM_ARRAY_TASK_ID\"";
  std::vector<std::string> argv = {"sbatch", "--parsable", "--array=" + array_ranges(chunks),
                                   "--job-name=capsule-" + batch.meta().id,
                                   "--output=" + (batch.logs_dir() / "slurm-%A_%a.log").string()};
  if (!batch.meta().partition.empty()) argv.push_back("--partition=" + batch.meta().partition);
  argv.insert(argv.end(), {"--wrap", wrap});
  std::string out = run_captured(argv);
  out = out.substr(0, out.find_first_of(";\n"));  // --parsable: "jobid[;cluster]"
  if (out.empty() || out.find_first_not_of("0123456789") != std::string::npos) {
    throw std::runtime_error("sbatch answered '" + out + "', not a job id");
  }
  Launch launch;
  launch.engine = "slurm";
  launch.slurm_job = out;
  launch.launched = utc_now();
  return launch;
}

}  // namespace

std::vector<std::size_t> unfinished_chunks(const BatchDir& batch) {
  const auto results = batch.results();
  const std::vector<BatchSpec> specs = batch.specs();
  std::vector<std::size_t> out;
  for (std::size_t i = 0; i < specs.size(); ++i) {
    const std::size_t chunk = i / batch.meta().chunk_size;
    if (!results.count(specs[i].key) && (out.empty() || out.back() != chunk)) out.push_back(chunk);
  }
  return out;
}

Launch launch_workers(const BatchDir& batch, const std::string& socket) {
  const std::vector<std::size_t> chunks = unfinished_chunks(batch);
  if (chunks.empty()) throw std::runtime_error("batch " + batch.meta().id + " has a result for every spec");
  const Launch launch = batch.meta().engine == "slurm" ? launch_slurm(batch, socket, chunks) : launch_local(batch, socket);
  batch.add_launch(launch);
  return launch;
}

bool workers_alive(const BatchDir& batch) {
  for (const Launch& launch : batch.launches()) {
    if (launch.engine == "local" && same_process(launch)) return true;
    if (launch.engine == "slurm" && !launch.slurm_job.empty()) {
      try {
        const std::string listed = run_captured({"squeue", "--noheader", "--jobs=" + launch.slurm_job, "--format=%i"});
        if (listed.find_first_not_of(" \n") != std::string::npos) return true;
      } catch (const std::exception&) {
        // squeue refuses a job it has forgotten: not alive
      }
    }
  }
  for (std::size_t i = 0; i < batch.meta().chunks(); ++i) {
    if (batch.chunk_locked(i)) return true;
  }
  return false;
}

void cancel_workers(const BatchDir& batch) {
  batch.mark_cancelled(true);
  for (const Launch& launch : batch.launches()) {
    if (launch.engine == "local" && same_process(launch)) ::kill(launch.pid, SIGTERM);
    if (launch.engine == "slurm" && !launch.slurm_job.empty()) run_captured({"scancel", launch.slurm_job});
  }
}

}  // namespace capsule::client::batch
