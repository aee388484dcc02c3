// Snapshot sources: the request body, and each source read as the caller: a directory through GNU tar, a
// repository through git rev-parse + git archive (no network, no system or global config), a tar file opened.
#include "daemon/snapshots/snapshot_sources.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <regex>
#include <vector>

#include "base/file_util.h"
#include "daemon/snapshots/caller_tool.h"
#include "http/response.h"

namespace capsule::daemon {
namespace fs = std::filesystem;
using nlohmann::json;

namespace {

constexpr const char* kTar = "/usr/bin/tar";
constexpr const char* kGit = "/usr/bin/git";
constexpr std::size_t kMaxRev = 256;

std::string string_field(const json& body, const char* key) {
  if (!body[key].is_string() || body[key].get<std::string>().empty()) {
    throw http::ApiError("invalid_request", std::string(key) + ": must be a non-empty string");
  }
  return body[key].get<std::string>();
}

// What a failed write to the staging dir is: 507 when the state filesystem is full, else capsule's own failure.
std::string storage_code(int error) { return base::is_out_of_space(error) ? "insufficient_storage" : "internal_error"; }

base::UniqueFd create_output(const fs::path& file) {
  base::UniqueFd fd(open(file.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600));
  if (!fd) throw http::ApiError(storage_code(errno), "creating " + file.string() + ": " + std::strerror(errno));
  return fd;
}

// A tool's failure as the API answers it: a refusal of the kernel is the caller's 403.
[[noreturn]] void tool_failed(const std::string& what, const ToolOutcome& outcome) {
  const std::string detail = what + " failed (exit " + std::to_string(outcome.exit_code) + ")" +
                             (outcome.stderr_tail.empty() ? "" : ": " + outcome.stderr_tail);
  if (outcome.stderr_tail.find("Permission denied") != std::string::npos) throw http::ApiError("forbidden", detail);
  throw http::ApiError("snapshot_source_failed", detail);
}

// git with no system or global configuration, no hooks, no fsmonitor, no transport, no line-ending conversion.
std::vector<std::string> git_command(std::vector<std::string> args) {
  std::vector<std::string> argv = {kGit};
  for (const char* setting : {"core.fsmonitor=", "core.hooksPath=/dev/null", "protocol.allow=never",
                              "core.attributesFile=/dev/null", "core.autocrlf=false", "core.eol=lf",
                              "core.sshCommand=false", "credential.helper="}) {
    argv.push_back("-c");
    argv.push_back(setting);
  }
  argv.insert(argv.end(), args.begin(), args.end());
  return argv;
}

// An empty directory the caller can read, for git's HOME; removed when this goes.
struct EmptyHome {
  fs::path dir = base::make_temp_dir("/tmp", "capsule-git-home-", "snapshot");
  EmptyHome() { chmod(dir.c_str(), 0555); }
  ~EmptyHome() {
    std::error_code ignored;
    fs::remove_all(dir, ignored);
  }
};

// The committer date of `commit` (seconds since the epoch): the date git archive gives every entry, and so the
// snapshot tree's mtime.
std::int64_t commit_time(const std::string& commit, const std::vector<std::string>& env, const OpenedHostPath& repo,
                         const fs::path& staging, const Caller& caller) {
  const fs::path time_file = staging / "commit-time";
  base::UniqueFd time_out = create_output(time_file);
  CallerTool show{git_command({"show", "-s", "--no-show-signature", "--format=%ct", commit}), env, repo.fd.get(),
                  time_out.get(), 64, "64 bytes of git show output", std::chrono::seconds(60)};
  const ToolOutcome shown = run_tool_as(caller, show);
  if (shown.exit_code != 0) tool_failed("git show of " + commit + " in '" + repo.path + "'", shown);
  std::string text = base::read_fd(base::open_regular_file(time_file, "snapshot").get(), 64, "snapshot", "commit time");
  while (!text.empty() && (text.back() == '\n' || text.back() == '\r')) text.pop_back();
  if (!std::regex_match(text, std::regex("-?[0-9]{1,18}"))) {
    throw http::ApiError("snapshot_source_failed", "git show gave '" + text + "', not a commit date");
  }
  return std::stoll(text);
}

PreparedSource snapshot_git(const SnapshotSourceRequest& request, const Caller& caller, const fs::path& staging,
                            const SnapshotLimits& limits) {
  const OpenedHostPath repo = open_as_caller(caller, request.path, HostAccess::kReadDir, "git", "invalid_request");
  const EmptyHome home;
  const std::vector<std::string> env = {"PATH=/usr/bin:/bin", "LC_ALL=C", "HOME=" + home.dir.string(),
                                        "GIT_CONFIG_NOSYSTEM=1", "GIT_CONFIG_GLOBAL=/dev/null", "GIT_TERMINAL_PROMPT=0",
                                        "GIT_ATTR_NOSYSTEM=1", "GIT_NO_REPLACE_OBJECTS=1", "GIT_OPTIONAL_LOCKS=0"};
  const fs::path commit_file = staging / "commit";
  base::UniqueFd commit_out = create_output(commit_file);
  CallerTool rev_parse{git_command({"rev-parse", "--verify", "--quiet", "--end-of-options", request.rev + "^{commit}"}),
                       env, repo.fd.get(), commit_out.get(), 1024, "1 KiB of rev-parse output", std::chrono::seconds(60)};
  const ToolOutcome resolved = run_tool_as(caller, rev_parse);
  if (resolved.exit_code != 0) {
    if (resolved.stderr_tail.find("not a git repository") != std::string::npos ||
        resolved.stderr_tail.find("dubious ownership") != std::string::npos) {
      tool_failed("git rev-parse in '" + request.path + "'", resolved);
    }
    throw http::ApiError("snapshot_source_failed", "rev: '" + request.rev + "' is not a commit in '" + request.path + "'" +
                                                       (resolved.stderr_tail.empty() ? "" : ": " + resolved.stderr_tail));
  }
  std::string commit = base::read_fd(base::open_regular_file(commit_file, "snapshot").get(), 1024, "snapshot", "commit");
  while (!commit.empty() && (commit.back() == '\n' || commit.back() == '\r')) commit.pop_back();
  if (!std::regex_match(commit, std::regex("[0-9a-f]{40}([0-9a-f]{24})?"))) {
    throw http::ApiError("snapshot_source_failed", "git rev-parse gave '" + commit + "', not a commit id");
  }
  PreparedSource prepared;
  prepared.mtime = commit_time(commit, env, repo, staging, caller);
  prepared.tar = staging / "source.tar";
  base::UniqueFd out = create_output(prepared.tar);
  CallerTool archive{git_command({"archive", "--format=tar", commit}), env, repo.fd.get(), out.get(),
                     limits.max_tar_bytes(), "max_bytes (" + std::to_string(limits.max_bytes) + ")"};
  const ToolOutcome archived = run_tool_as(caller, archive);
  if (archived.exit_code != 0) tool_failed("git archive of " + commit + " in '" + request.path + "'", archived);
  prepared.description = {{"git", request.path}, {"rev", request.rev}, {"commit", commit}};
  return prepared;
}

// The caller's tar file, at most limits.max_tar_bytes() of it (else 413), into `to`.
void copy_bounded(const OpenedHostPath& file, const fs::path& to, const SnapshotLimits& limits) {
  base::UniqueFd out(::open(to.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600));
  if (!out) throw http::ApiError(storage_code(errno), "snapshot: creating " + to.string() + ": " + std::strerror(errno));
  std::vector<char> buffer(1 << 16);
  std::uint64_t copied = 0;
  for (off_t offset = 0;;) {
    const ssize_t n = ::pread(file.fd.get(), buffer.data(), buffer.size(), offset);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) throw http::ApiError("invalid_request", "tar: reading '" + file.path + "': " + std::strerror(errno));
    if (n == 0) return;
    offset += n;
    if ((copied += static_cast<std::uint64_t>(n)) > limits.max_tar_bytes()) {
      throw http::ApiError("snapshot_too_large", "tar: '" + file.path + "' is larger than " +
                                                     std::to_string(limits.max_tar_bytes()) + " bytes (max_bytes plus headers)");
    }
    for (ssize_t done = 0; done < n;) {
      const ssize_t w = ::write(out.get(), buffer.data() + done, static_cast<std::size_t>(n - done));
      if (w < 0 && errno == EINTR) continue;
      if (w < 0) throw http::ApiError(storage_code(errno), "snapshot: writing " + to.string() + ": " + std::strerror(errno));
      done += w;
    }
  }
}

}  // namespace

SnapshotSourceRequest parse_snapshot_source(const json& body) {
  if (!body.is_object()) throw http::ApiError("invalid_request", "body: must be a JSON object");
  for (const auto& [key, value] : body.items()) {
    if (key != "dir" && key != "tar" && key != "git" && key != "rev") throw http::ApiError("invalid_request", key + ": unknown field");
  }
  const int kinds = static_cast<int>(body.contains("dir")) + body.contains("tar") + body.contains("git");
  if (kinds != 1) throw http::ApiError("invalid_request", "body: give exactly one of dir, tar or git");
  SnapshotSourceRequest request;
  const char* key = body.contains("dir") ? "dir" : body.contains("tar") ? "tar" : "git";
  request.kind = body.contains("dir") ? SnapshotSourceRequest::Kind::kDir
                 : body.contains("tar") ? SnapshotSourceRequest::Kind::kTar
                                        : SnapshotSourceRequest::Kind::kGit;
  request.path = string_field(body, key);
  if (request.path.front() != '/' || request.path.find('\0') != std::string::npos) {
    throw http::ApiError("invalid_request", std::string(key) + ": must be an absolute host path");
  }
  if (request.kind == SnapshotSourceRequest::Kind::kGit) {
    if (!body.contains("rev")) throw http::ApiError("invalid_request", "rev: is required with git");
    request.rev = string_field(body, "rev");
    if (request.rev.size() > kMaxRev || request.rev.front() == '-' ||
        !std::regex_match(request.rev, std::regex("[\\x21-\\x7e]+"))) {
      throw http::ApiError("invalid_request", "rev: '" + request.rev + "' is not a commit-ish");
    }
  } else if (body.contains("rev")) {
    throw http::ApiError("invalid_request", "rev: only with git");
  }
  return request;
}

fs::path tar_directory_as(const Caller& caller, const OpenedHostPath& dir, const fs::path& staging,
                          const SnapshotLimits& limits) {
  const fs::path tar = staging / "source.tar";
  base::UniqueFd out = create_output(tar);
  // GNU tar never follows symlinks (no -h), keeps hard links inside the tree as links, and skips sockets.
  CallerTool walk{{kTar, "--create", "--file=-", "--format=gnu", "--numeric-owner", "."},
                  {"PATH=/usr/bin:/bin", "LC_ALL=C"},
                  dir.fd.get(),
                  out.get(),
                  limits.max_tar_bytes(),
                  "max_bytes (" + std::to_string(limits.max_bytes) + ")"};
  const ToolOutcome outcome = run_tool_as(caller, walk);
  if (outcome.exit_code != 0) tool_failed("reading '" + dir.path + "' as " + caller.describe(), outcome);
  return tar;
}

PreparedSource prepare_snapshot_source(const SnapshotSourceRequest& request, const Caller& caller,
                                       const fs::path& staging, const SnapshotLimits& limits) {
  PreparedSource prepared;
  switch (request.kind) {
    case SnapshotSourceRequest::Kind::kDir: {
      const OpenedHostPath dir = open_as_caller(caller, request.path, HostAccess::kReadDir, "dir", "invalid_request");
      prepared.tar = tar_directory_as(caller, dir, staging, limits);
      prepared.description = {{"dir", request.path}};
      return prepared;
    }
    case SnapshotSourceRequest::Kind::kTar: {
      // Copied once into staging: the caller may rewrite its own file between the store's check and its unpack.
      const OpenedHostPath file = open_as_caller(caller, request.path, HostAccess::kReadFile, "tar", "invalid_request");
      prepared.tar = staging / "source.tar";
      copy_bounded(file, prepared.tar, limits);
      prepared.description = {{"tar", request.path}};
      return prepared;
    }
    case SnapshotSourceRequest::Kind::kGit:
      return snapshot_git(request, caller, staging, limits);
  }
  return prepared;
}

}  // namespace capsule::daemon
