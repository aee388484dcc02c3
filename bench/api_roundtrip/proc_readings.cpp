// api_roundtrip's readings of /proc and the state dir (see proc_readings.h). /proc/<pid>/stat fields are counted
// after the closing parenthesis of the command name, which may itself hold spaces.
#include "api_roundtrip/proc_readings.h"

#include <fcntl.h>
#include <sys/resource.h>
#include <unistd.h>

#include <cstdlib>
#include <fstream>
#include <iterator>
#include <sstream>
#include <string>
#include <vector>

#include "base/file_util.h"
#include "base/unique_fd.h"
#include "support/fail.h"

namespace capsule::bench::api_roundtrip {

namespace fs = std::filesystem;

std::string read_text(const std::string& path) {
  base::UniqueFd fd(open(path.c_str(), O_RDONLY | O_CLOEXEC));
  if (!fd) return {};
  try {
    return base::read_fd(fd.get(), 64ull << 20, "bench", path);  // a log of a run, at most
  } catch (const std::exception&) {  // a /proc file of a thread or process that ended meanwhile (ESRCH)
    return {};
  }
}

std::string mount_of(const std::string& path) {
  std::ifstream file("/proc/mounts");
  std::string best_dir, best;
  for (std::string device, dir, type, options, rest; file >> device >> dir >> type >> options && std::getline(file, rest);) {
    const bool under = path == dir || dir == "/" || path.rfind(dir + "/", 0) == 0;
    if (under && dir.size() >= best_dir.size()) {
      best_dir = dir;
      best = type + " " + options + " (" + device + " on " + dir + ")";
    }
  }
  return best;
}

std::map<std::string, long> proc_status(pid_t pid) {
  std::ifstream file("/proc/" + std::to_string(pid) + "/status");
  std::map<std::string, long> values;
  for (std::string line; std::getline(file, line);) {
    const auto colon = line.find(':');
    if (colon == std::string::npos) continue;
    const std::string key = line.substr(0, colon);
    if (key == "VmRSS" || key == "RssAnon" || key == "RssFile" || key == "Threads") {
      values[key] = std::strtol(line.c_str() + colon + 1, nullptr, 10);
    }
  }
  if (!values.count("VmRSS")) die("cannot read VmRSS of pid " + std::to_string(pid));
  return values;
}

std::map<int, long> thread_cpu_ticks(pid_t pid) {
  std::map<int, long> ticks;
  std::error_code ec;
  for (const auto& entry : fs::directory_iterator("/proc/" + std::to_string(pid) + "/task", ec)) {
    const std::string text = read_text(entry.path() / "stat");
    const auto paren = text.rfind(')');
    if (paren == std::string::npos) continue;
    std::istringstream fields(text.substr(paren + 2));  // field 3 (state) onwards
    std::vector<std::string> f((std::istream_iterator<std::string>(fields)), std::istream_iterator<std::string>());
    if (f.size() > 12) ticks[std::stoi(entry.path().filename())] = std::stol(f[11]) + std::stol(f[12]);
  }
  return ticks;
}

std::string thread_name(pid_t pid, int tid) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/task/" + std::to_string(tid) + "/comm");
  std::string name;
  return std::getline(in, name) ? name : "?";
}

double process_tree_cpu_ms(pid_t pid) {
  const std::string text = read_text("/proc/" + std::to_string(pid) + "/stat");
  const auto paren = text.rfind(')');
  if (paren == std::string::npos) die("cannot read /proc/" + std::to_string(pid) + "/stat");
  std::istringstream fields(text.substr(paren + 2));
  std::vector<std::string> f((std::istream_iterator<std::string>(fields)), std::istream_iterator<std::string>());
  if (f.size() < 15) die("short /proc/" + std::to_string(pid) + "/stat");
  const double ticks = std::stod(f[11]) + std::stod(f[12]) + std::stod(f[13]) + std::stod(f[14]);  // u, s, cu, cs
  return ticks * 1000.0 / static_cast<double>(sysconf(_SC_CLK_TCK));
}

std::pair<long, long long> dir_usage(const fs::path& dir) {
  long files = 0;
  long long bytes = 0;
  std::error_code ec;
  for (auto it = fs::recursive_directory_iterator(dir, fs::directory_options::skip_permission_denied, ec);
       it != fs::recursive_directory_iterator(); it.increment(ec)) {
    if (ec) break;
    if (it->symlink_status(ec).type() == fs::file_type::regular) {
      ++files;
      bytes += static_cast<long long>(it->file_size(ec));
    }
  }
  return {files, bytes};
}

long long ledger_bytes(const std::string& db) {
  long long bytes = 0;
  for (const char* suffix : {"", "-wal", "-shm"}) {
    std::error_code ec;
    const auto size = fs::file_size(db + suffix, ec);
    if (!ec) bytes += static_cast<long long>(size);
  }
  return bytes;
}

}  // namespace capsule::bench::api_roundtrip
