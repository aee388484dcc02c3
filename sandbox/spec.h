// SandboxSpec: one fully resolved sandbox, as the launcher consumes it.
// Names (images, policies, workspaces) are resolved before this point; nothing here is looked up again.
#pragma once

#include <chrono>
#include <cstdint>
#include <optional>
#include <utility>
#include <string>
#include <vector>

namespace capsule::sandbox {

// A host path made visible inside the sandbox.
struct BindMount {
  std::string source;      // absolute host path
  std::string target;      // absolute path inside the sandbox
  bool read_only = true;
  // Read-only: host owners show as-is inside (host root as sandbox root) through an idmapped mount.
  // Writable: sandbox root is mapped to the directory's owner, never to host root (see Launcher).
  bool idmap = true;
  friend bool operator==(const BindMount&, const BindMount&) = default;
};

// A copy-on-write view at `target`: read-only layers (host dirs, idmapped) under a writable upper dir.
// Changes land in upper_dir (overlayfs format, kept after the run); the layers are never written.
struct OverlayMount {
  std::vector<std::string> layers;  // host dirs, topmost first
  std::string upper_dir;            // host dir, created if missing, owned by sandbox root afterwards
  std::string work_dir;             // host dir on the same filesystem as upper_dir, emptied by overlayfs
  std::string target;               // absolute path inside the sandbox
  // Unset: the layers show host owners as they are (host root as sandbox root). Set (uid, gid): they are
  // idmapped as a writable bind is, this host owner as sandbox root and every other id unmapped, so the
  // sandbox reads them with that owner's rights (a non-root caller's own tree).
  std::optional<std::pair<std::uint32_t, std::uint32_t>> layers_owner{};
  // A host dir whose contents (copy_tree_contents: whiteouts and xattrs kept) become the upper's before the box
  // starts, on whichever disk the upper lives: how a session returns to a checkpoint. Empty: none.
  std::string seed_dir{};
  friend bool operator==(const OverlayMount&, const OverlayMount&) = default;
};

enum class NetworkMode { kNone };  // a new network namespace with only loopback

struct Limits {
  std::chrono::milliseconds wall_time{0};       // 0: unlimited
  std::chrono::milliseconds cpu_time{0};        // whole-sandbox CPU (user+sys); 0: unlimited
  std::chrono::milliseconds kill_grace{2000};   // SIGTERM -> SIGKILL delay on timeout/cancel
  std::uint64_t memory_bytes = 0;               // 0: unlimited
  std::uint64_t pids = 0;                       // 0: unlimited
  double cpus = 0;                              // CPU bandwidth in cores; 0: unlimited
  std::uint64_t tmp_size_bytes = 256ull << 20;  // tmpfs /tmp (and /dev/shm)
  std::uint64_t nofile = 4096;                  // RLIMIT_NOFILE
  std::uint64_t fsize_bytes = 0;                // RLIMIT_FSIZE; 0: unlimited
  std::uint64_t stack_bytes = 8ull << 20;       // RLIMIT_STACK
  std::uint64_t output_cap_bytes = 1ull << 20;  // per stream kept in memory (head + tail)
  // Every writable layer (rootfs upper, overlays' uppers) on a disk of the sandbox's own (sandbox/quota.h):
  // writes past it fail with ENOSPC inside. 0: the layers live on the scratch dir's filesystem, unlimited.
  std::uint64_t disk_bytes = 0;
  std::uint64_t disk_inodes = 0;                // with disk_bytes; 0: one per 16 KiB of disk_bytes
  friend bool operator==(const Limits&, const Limits&) = default;
};

struct SandboxSpec {
  std::vector<std::string> argv;                // argv[0] is resolved through PATH from env
  std::vector<std::string> env;                 // exactly the environment the command gets
  std::string cwd = "/";
  std::vector<std::string> rootfs_layers;       // read-only overlay lower dirs, topmost first
  std::string upper_dir;                        // writable overlay upper; empty: a fresh temp dir, removed after
  std::vector<OverlayMount> overlays;           // after the rootfs, before the binds
  std::vector<BindMount> mounts;                // applied in order, after the rootfs and overlays
  bool readonly_rootfs = false;                 // remount the overlay read-only (binds keep their mode)
  Limits limits;
  NetworkMode network = NetworkMode::kNone;
  // TCP ports on 127.0.0.1 inside the sandbox's network namespace, listening before the command starts; the
  // caller serves them (StartedSandbox::take_listeners). Nothing else is reachable from the sandbox.
  std::vector<std::uint16_t> loopback_listeners;
  std::string seccomp_profile;                  // OCI/Docker JSON text; empty: no filter
  std::uint32_t uid = 0;                        // ids inside the sandbox
  std::uint32_t gid = 0;
  std::string hostname = "capsule";
  std::vector<std::string> protect;             // EnvironmentSpec::protect and protect_base
  std::string protect_base = "/";
  std::optional<std::string> stdin_data;        // absent: stdin is /dev/null-like (closed pipe)
  std::string stdout_spill_path;                // non-empty: the full stream is also written here
  std::string stderr_spill_path;
};

// What a sandbox is, apart from what runs in it (sandbox2's environment, crun's create): the filesystem,
// network, filter and the whole-box limits. Launcher::create() makes one; Sandbox::exec() runs processes in it.
struct EnvironmentSpec {
  std::vector<std::string> rootfs_layers;
  std::string upper_dir;
  std::vector<OverlayMount> overlays;
  std::vector<BindMount> mounts;
  bool readonly_rootfs = false;
  NetworkMode network = NetworkMode::kNone;
  // A network namespace file to join (NetworkNamespace::path: a stack's private network, loopback already up)
  // instead of a new namespace of the box's own. Empty: a new one.
  std::string network_namespace;
  std::vector<std::uint16_t> loopback_listeners;
  std::string seccomp_profile;
  std::string hostname = "capsule";
  // Whole-box: memory_bytes, pids, cpus, tmp_size_bytes, disk_bytes, disk_inodes (the rest is per process).
  Limits limits;
  // Paths made read-only for every process (a read-only bind over each match, its parent directories pinned
  // as mount points so they cannot be renamed or removed). Globs: "*" within a name, "**" across directories;
  // relative ones are taken from protect_base. Matched once, when the sandbox is created.
  std::vector<std::string> protect;
  std::string protect_base = "/";
  // A session lives until destroyed: its init outlives each process, and kills everything and exits when
  // the launcher's end of the control channel closes (the daemon is gone). A one-shot box ends with its process.
  bool session = false;
  // Equal environments make boxes that cannot be told apart (BoxPool keeps them ready by this).
  friend bool operator==(const EnvironmentSpec&, const EnvironmentSpec&) = default;
};

// What runs in a sandbox (sandbox2's executor, crun's exec): one process tree, in a cgroup of its own below
// the sandbox's, confined like every other (ids, no capabilities, no_new_privs, rlimits, the seccomp filter).
struct ProcessSpec {
  std::vector<std::string> argv;                // argv[0] is resolved through PATH from env
  std::vector<std::string> env;
  std::string cwd = "/";
  std::uint32_t uid = 0;
  std::uint32_t gid = 0;
  std::optional<std::string> stdin_data;        // absent: stdin is at EOF (unless keep_stdin_open)
  // Stdin stays open after stdin_data for Exec::write_stdin until Exec::close_stdin.
  bool keep_stdin_open = false;
  // A terminal: stdin, stdout and stderr are one pty (the box's own devpts), the process its session leader
  // with it as controlling tty; output comes as stdout; Exec::resize sets its size. Ctrl-C typed reaches it.
  bool pty = false;
  std::uint16_t rows = 24;
  std::uint16_t cols = 80;
  // Per process: wall_time, cpu_time (of its own cgroup), kill_grace, output_cap_bytes, nofile, fsize, stack.
  Limits limits;
  std::chrono::milliseconds idle_timeout{0};    // no output on either stream for this long ends it; 0: none
  std::string stdout_spill_path;
  std::string stderr_spill_path;
};

// The two halves of a one-shot SandboxSpec.
EnvironmentSpec environment_of(const SandboxSpec& spec);
ProcessSpec process_of(const SandboxSpec& spec);

// Throw SandboxError (step "spec", path = the field) for the first problem found.
void validate_spec(const SandboxSpec& spec, std::uint32_t id_count);
void validate_environment(const EnvironmentSpec& spec);
void validate_process(const ProcessSpec& spec, std::uint32_t id_count);

}  // namespace capsule::sandbox
