// Escape attempts (sandbox/testcases/*.c) run inside real sandboxes: each must fail with the exact errno the
// kernel and policies/default.json give, and nothing on the host (files, sockets, processes, mounts) may change.
#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <stddef.h>
#include <sys/ipc.h>
#include <sys/prctl.h>
#include <sys/shm.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <set>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "sandbox/launcher.h"
#include "tests/support/test_support.h"

namespace capsule::sandbox {
namespace {

using capsule::testing::host_spec;
using capsule::testing::shared_launcher;
using capsule::testing::testcase;
namespace fs = std::filesystem;
using namespace std::chrono_literals;

constexpr const char* kBaitPrefix = "/var/tmp/capsule-hostile-";  // + owning test pid + "-" + random
constexpr key_t kShmKeyBase = 0x43500000;                            // SysV keys 0x435xxxxx, low bits = pid
constexpr key_t kShmKeyEnd = 0x43600000;
constexpr const char* kMarkerText = "capsule hostile-test marker: the host's own file\n";

using capsule::testing::describe;
using capsule::testing::slurp;

int listen_nonblocking(int domain, const sockaddr* address, socklen_t length) {
  int fd = socket(domain, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  if (fd < 0 || bind(fd, address, length) != 0 || listen(fd, 16) != 0) {
    ADD_FAILURE() << "host listener: " << std::strerror(errno);
  }
  return fd;
}

// Everything on the host the hostile programs aim at. Created per test suite, torn down after it.
struct HostBait {
  std::string dir;     // under /var/tmp: the sandbox shadows /tmp with its own tmpfs, which would hide a leak
  std::string marker;  // a file only the host can see
  int tcp_fd = -1;
  int tcp_port = 0;
  int abstract_fd = -1;
  std::string abstract_name;
  int unix_fd = -1;
  std::string unix_path;
  pid_t victim = -1;  // a host process running as the sandbox root's host uid: only the pid ns protects it
  int victim_pidfd = -1;
  key_t shm_key = 0;
  int shm_id = -1;

  HostBait() {
    remove_stale_bait();
    std::string tmpl = kBaitPrefix + std::to_string(getpid()) + "-XXXXXX";
    if (mkdtemp(tmpl.data()) == nullptr) ADD_FAILURE() << "mkdtemp: " << std::strerror(errno);
    dir = tmpl;
    marker = dir + "/marker";
    std::ofstream(marker) << kMarkerText;

    sockaddr_in tcp{};
    tcp.sin_family = AF_INET;
    tcp.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    tcp_fd = listen_nonblocking(AF_INET, reinterpret_cast<sockaddr*>(&tcp), sizeof tcp);
    socklen_t length = sizeof tcp;
    getsockname(tcp_fd, reinterpret_cast<sockaddr*>(&tcp), &length);
    tcp_port = ntohs(tcp.sin_port);

    abstract_name = fs::path(dir).filename().string();
    sockaddr_un abstract{};
    abstract.sun_family = AF_UNIX;
    std::memcpy(abstract.sun_path + 1, abstract_name.data(), abstract_name.size());
    abstract_fd = listen_nonblocking(
        AF_UNIX, reinterpret_cast<sockaddr*>(&abstract),
        static_cast<socklen_t>(offsetof(sockaddr_un, sun_path) + 1 + abstract_name.size()));

    unix_path = dir + "/host.sock";
    sockaddr_un path_address{};
    path_address.sun_family = AF_UNIX;
    std::strncpy(path_address.sun_path, unix_path.c_str(), sizeof path_address.sun_path - 1);
    unix_fd = listen_nonblocking(AF_UNIX, reinterpret_cast<sockaddr*>(&path_address), sizeof path_address);
    chmod(unix_path.c_str(), 0777);  // only the namespaces may stand in the way, not permissions
    chmod(dir.c_str(), 0755);

    start_victim();

    for (key_t key = kShmKeyBase | (getpid() & 0xffff); shm_id < 0 && key < kShmKeyEnd; key += 0x10000) {
      shm_id = shmget(key, 4096, IPC_CREAT | IPC_EXCL | 0666);
      if (shm_id >= 0) shm_key = key;
    }
    if (shm_id < 0) ADD_FAILURE() << "shmget: " << std::strerror(errno);
  }

  // Bait of test processes that died without cleaning up (a killed run): their directories and segments.
  static void remove_stale_bait() {
    std::error_code ec;
    for (const auto& entry : fs::directory_iterator("/var/tmp", ec)) {
      const std::string name = entry.path().string();
      if (name.rfind(kBaitPrefix, 0) != 0) continue;
      const pid_t owner = static_cast<pid_t>(std::atoi(name.c_str() + std::strlen(kBaitPrefix)));
      if (owner > 0 && kill(owner, 0) != 0 && errno == ESRCH) fs::remove_all(entry.path(), ec);
    }
    std::ifstream segments("/proc/sysvipc/shm");  // key shmid perms size cpid ...
    std::string header;
    std::getline(segments, header);
    for (long long key, id, perms, size, cpid; segments >> key >> id >> perms >> size >> cpid;) {
      segments.ignore(1 << 20, '\n');
      if (key < kShmKeyBase || key >= kShmKeyEnd) continue;
      if (kill(static_cast<pid_t>(cpid), 0) != 0 && errno == ESRCH) shmctl(static_cast<int>(id), IPC_RMID, nullptr);
    }
  }

  void start_victim() {
    const uid_t sandbox_root = shared_launcher().options().host_id_base;  // sandbox uid 0, seen from the host
    pid_t parent = getpid();
    victim = fork();
    if (victim == 0) {
      // Raw syscalls only: the test process may have threads. The death signal goes last: changing
      // credentials clears it.
      syscall(SYS_setgroups, 0, nullptr);
      syscall(SYS_setresgid, sandbox_root, sandbox_root, sandbox_root);
      syscall(SYS_setresuid, sandbox_root, sandbox_root, sandbox_root);
      syscall(SYS_prctl, PR_SET_PDEATHSIG, SIGKILL, 0, 0, 0);
      if (syscall(SYS_getppid) != parent) syscall(SYS_exit_group, 0);
      for (;;) syscall(SYS_pause);
    }
    if (victim < 0) ADD_FAILURE() << "fork: " << std::strerror(errno);
    victim_pidfd = static_cast<int>(syscall(SYS_pidfd_open, victim, 0));
    if (victim_pidfd < 0) ADD_FAILURE() << "pidfd_open: " << std::strerror(errno);
  }

  // The victim runs as the sandbox root's host uid: without a pid namespace, kill() from inside would work.
  bool victim_has_sandbox_uid() const {
    const uid_t sandbox_root = shared_launcher().options().host_id_base;
    struct stat st {};
    for (int i = 0; i < 100; ++i) {
      if (stat(("/proc/" + std::to_string(victim)).c_str(), &st) == 0 && st.st_uid == sandbox_root) return true;
      std::this_thread::sleep_for(10ms);
    }
    return false;
  }

  bool victim_alive() const {
    pollfd p{victim_pidfd, POLLIN, 0};
    return poll(&p, 1, 0) == 0;  // a pidfd turns readable when the process exits
  }

  ~HostBait() {
    if (victim > 0) {
      kill(victim, SIGKILL);
      waitpid(victim, nullptr, 0);
    }
    for (int fd : {tcp_fd, abstract_fd, unix_fd, victim_pidfd}) {
      if (fd >= 0) close(fd);
    }
    if (shm_id >= 0) shmctl(shm_id, IPC_RMID, nullptr);
    std::error_code ignored;
    fs::remove_all(dir, ignored);
  }

  // "{marker}" etc. in a program's arguments become the bait's coordinates.
  std::string expand(const std::string& arg) const {
    if (arg == "{marker}") return marker;
    if (arg == "{port}") return std::to_string(tcp_port);
    if (arg == "{abstract}") return abstract_name;
    if (arg == "{unix}") return unix_path;
    if (arg == "{victim}") return std::to_string(victim);
    if (arg == "{shmkey}") return std::to_string(shm_key);
    return arg;
  }
};

bool starts_with_dir(const std::string& path, const std::string& dir) {
  return path == dir || path.rfind(dir + "/", 0) == 0;
}

// The host's mount table, less what other test processes mount and unmount meanwhile in their own temp dirs (their
// daemons' scratch and disks): a mount point under /tmp or /var/tmp counts only under `own_dirs`.
std::vector<std::string> mountinfo_lines(const std::vector<std::string>& own_dirs) {
  std::vector<std::string> lines;
  std::ifstream in("/proc/self/mountinfo");
  for (std::string line; std::getline(in, line);) {
    std::istringstream fields(line);
    std::string id, parent, devices, root, mount_point;
    fields >> id >> parent >> devices >> root >> mount_point;
    const bool in_temp = starts_with_dir(mount_point, "/tmp") || starts_with_dir(mount_point, "/var/tmp");
    const bool own = std::any_of(own_dirs.begin(), own_dirs.end(),
                                 [&](const std::string& dir) { return starts_with_dir(mount_point, dir); });
    if (!in_temp || own) lines.push_back(line);
  }
  std::sort(lines.begin(), lines.end());
  return lines;
}

std::string host_name() {
  char name[256] = {};
  gethostname(name, sizeof name - 1);
  return name;
}

std::set<std::string> listing(const std::string& dir) {
  std::set<std::string> names;
  for (const auto& entry : fs::directory_iterator(dir)) names.insert(entry.path().filename().string());
  return names;
}

// Expects no connection is waiting on a non-blocking listener.
void expect_no_connection(int fd, const char* what) {
  int conn = accept4(fd, nullptr, nullptr, SOCK_CLOEXEC);
  int err = errno;
  if (conn >= 0) close(conn);
  EXPECT_TRUE(conn < 0 && (err == EAGAIN || err == EWOULDBLOCK)) << what << " accepted a connection from a sandbox";
}

class HostileTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() { bait_ = new HostBait(); }
  static void TearDownTestSuite() {
    delete bait_;
    bait_ = nullptr;
  }

  // What the host looks like before each attempt; TearDown proves none of it changed.
  void SetUp() override {
    ASSERT_NE(bait_, nullptr);
    ASSERT_TRUE(bait_->victim_alive());
    ASSERT_TRUE(bait_->victim_has_sandbox_uid());
    mounts_before_ = mountinfo_lines(own_dirs());
    hostname_before_ = host_name();
    ASSERT_EQ(stat(bait_->marker.c_str(), &marker_before_), 0);
    listing_before_ = listing(bait_->dir);
  }

  void TearDown() override {
    // Mounts from concurrent test processes come and go; one the sandbox leaked on the host would stay.
    auto mounts = mountinfo_lines(own_dirs());
    for (int i = 0; i < 20 && mounts != mounts_before_; ++i) {
      std::this_thread::sleep_for(100ms);
      mounts = mountinfo_lines(own_dirs());
    }
    EXPECT_EQ(mounts.size(), mounts_before_.size()) << "host mount table changed";
    EXPECT_EQ(mounts, mounts_before_);
    EXPECT_EQ(host_name(), hostname_before_);
    struct stat st;
    ASSERT_EQ(stat(bait_->marker.c_str(), &st), 0);
    EXPECT_EQ(st.st_ino, marker_before_.st_ino);
    EXPECT_EQ(st.st_mode, marker_before_.st_mode);
    EXPECT_EQ(st.st_uid, marker_before_.st_uid);
    EXPECT_EQ(st.st_size, marker_before_.st_size);
    EXPECT_EQ(st.st_mtim.tv_sec, marker_before_.st_mtim.tv_sec);
    EXPECT_EQ(st.st_mtim.tv_nsec, marker_before_.st_mtim.tv_nsec);
    EXPECT_EQ(slurp(bait_->marker), kMarkerText);
    EXPECT_EQ(listing(bait_->dir), listing_before_);
    expect_no_connection(bait_->tcp_fd, "host TCP listener");
    expect_no_connection(bait_->abstract_fd, "host abstract Unix listener");
    expect_no_connection(bait_->unix_fd, "host Unix socket");
    EXPECT_TRUE(bait_->victim_alive()) << "the host process was killed";
    shmid_ds shm{};
    ASSERT_EQ(shmctl(bait_->shm_id, IPC_STAT, &shm), 0) << "host shm segment vanished";
    EXPECT_EQ(shm.shm_nattch, 0u);
    EXPECT_EQ(shm.shm_lpid, 0);
  }

  // Runs a program from sandbox/testcases with its "{...}" arguments expanded.
  static Result run_program(const std::string& name, const std::vector<std::string>& args = {},
                            const std::function<void(SandboxSpec&)>& adjust = {}) {
    std::vector<std::string> argv{testcase(name)};
    for (const auto& arg : args) argv.push_back(bait_->expand(arg));
    SandboxSpec spec = host_spec(argv);
    if (adjust) adjust(spec);
    return shared_launcher().run(spec);
  }

  // The program exited 0 (every attempt failed) and printed exactly `line`.
  static void expect_blocked(const Result& r, const std::string& line) {
    EXPECT_EQ(r.status, Status::kSucceeded) << describe(r);
    EXPECT_EQ(r.exit_code, 0) << describe(r);
    EXPECT_EQ(r.stdout_capture.head, line + "\n") << describe(r);
  }

  static HostBait* bait_;
  // Where this process's sandboxes and bait live: mounts there count even in a temp dir.
  static std::vector<std::string> own_dirs() { return {shared_launcher().options().scratch_dir, bait_->dir}; }

  std::vector<std::string> mounts_before_;
  std::string hostname_before_;
  struct stat marker_before_ {};
  std::set<std::string> listing_before_;
};

HostBait* HostileTest::bait_ = nullptr;

struct Case {
  const char* program;
  std::vector<std::string> args;  // "{marker}", "{port}", "{abstract}", "{unix}", "{victim}", "{shmkey}"
  const char* expected;
};

std::ostream& operator<<(std::ostream& os, const Case& c) { return os << c.program; }

class HostileEscape : public HostileTest, public ::testing::WithParamInterface<Case> {};

TEST_P(HostileEscape, IsBlocked) {
  const Case& c = GetParam();
  expect_blocked(run_program(c.program, c.args), c.expected);
}

// Expected lines, by reasoning about the kernel and policies/default.json (default action EPERM):
// seccomp answers first for denied syscalls; allowed ones fail in the kernel for want of a capability
// (EPERM), of ptrace access to the non-dumpable init (EACCES), or on a read-only mount (EROFS).
const Case kCases[] = {
    // Mount table: mount/umount2/fsopen family are all outside the allowlist.
    {"mount_proc", {}, "mount_proc: errno=EPERM"},
    {"mount_tmpfs", {}, "mount_tmpfs: errno=EPERM"},
    {"mount_bind", {}, "mount_bind: bind=EPERM remount=EPERM"},
    {"umount_proc", {}, "umount_proc: proc=EPERM masked=EPERM proc_sys=EPERM"},
    {"new_mount_api", {},
     "new_mount_api: fsopen=EPERM open_tree=EPERM move_mount=EPERM mount_setattr=EPERM fspick=EPERM"},
    // Namespaces: unshare/setns denied; clone's flag argument filtered; clone3 answered ENOSYS.
    {"unshare_user", {}, "unshare_user: errno=EPERM"},
    {"unshare_ns", {}, "unshare_ns: mnt=EPERM net=EPERM pid=EPERM ipc=EPERM uts=EPERM cgroup=EPERM time=EPERM"},
    // Opening /proc/1/ns/* needs ptrace-read access to init (non-dumpable, we hold no caps): EACCES.
    {"setns_init", {}, "setns_init: user=EACCES mnt=EACCES pid=EACCES net=EACCES self=EPERM"},
    {"clone_newuser", {}, "clone_newuser: newuser=EPERM newns=EPERM newnet=EPERM newpid=EPERM"},
    {"clone3", {}, "clone3: plain=ENOSYS newuser=ENOSYS"},
    // Other processes: ptrace, process_vm_readv and pidfd_getfd are denied; pidfd_open itself is allowed.
    {"ptrace_attach", {}, "ptrace_attach: attach=EPERM seize=EPERM"},
    {"ptrace_traceme", {}, "ptrace_traceme: errno=EPERM"},
    {"process_vm_readv", {}, "process_vm_readv: errno=EPERM"},
    {"pidfd_getfd", {}, "pidfd_getfd: pidfd_open=ok getfd=EPERM"},
    {"proc1_environ", {}, "proc1_environ: errno=EACCES"},
    {"proc1_access", {}, "proc1_access: cwd=EACCES exe=EACCES fd3=EACCES mem=EACCES maps=EACCES"},
    {"proc1_root", {"{marker}"}, "proc1_root: init=EACCES self=ENOENT direct=ENOENT"},
    {"kill_host_pid", {"{victim}"}, "kill_host_pid: probe=ESRCH kill=ESRCH"},
    {"kill_all", {}, "kill_all: errno=ESRCH"},  // only init (exempt) and the caller live in the pid ns
    // Kernel-wide facilities.
    {"keyctl", {}, "keyctl: errno=EPERM"},
    {"add_key", {}, "add_key: errno=EPERM"},
    {"request_key", {}, "request_key: errno=EPERM"},
    {"bpf_prog_load", {}, "bpf_prog_load: errno=EPERM"},
    {"perf_event_open", {}, "perf_event_open: errno=EPERM"},
    {"io_uring_setup", {}, "io_uring_setup: errno=EPERM"},
    {"userfaultfd", {}, "userfaultfd: errno=EPERM"},
    {"kexec_load", {}, "kexec_load: load=EPERM file_load=EPERM"},
    {"init_module", {}, "init_module: init=EPERM finit=EPERM delete=EPERM"},
    {"reboot", {}, "reboot: errno=EPERM"},
    {"swapon", {}, "swapon: swapon=EPERM swapoff=EPERM"},
    {"settime", {}, "settime: clock_settime=EPERM settimeofday=EPERM"},
    {"syslog_read", {}, "syslog_read: klogctl=EPERM kmsg=ENOENT"},
    {"ioport", {}, "ioport: iopl=EPERM ioperm=EPERM"},
    {"acct", {}, "acct: errno=EPERM"},
    {"personality", {}, "personality: query=ok errno=EPERM"},
    // Terminals: TIOCSTI is filtered on the request's low 32 bits, whatever the descriptor.
    {"tiocsti_pty", {}, "tiocsti_pty: ctty=ok master=EPERM slave=EPERM slave_hi32=EPERM"},
    {"tiocsti_stdin", {}, "tiocsti_stdin: fd0=EPERM fd1=EPERM fd2=EPERM hi32=EPERM"},
    // File handles: both calls are denied outright.
    {"open_by_handle_at", {}, "open_by_handle_at: errno=EPERM"},
    {"name_to_handle_at", {}, "name_to_handle_at: handle=EPERM"},
    // Privileges: set*id/capset/mknod/socket pass the filter and fail in the kernel for want of a capability.
    {"setuid_change", {}, "setuid_change: setuid=EPERM setgid=EPERM setgroups=EPERM"},
    {"capset_regain", {}, "capset_regain: capset=EPERM ambient=EPERM"},
    {"proc_status", {},
     "proc_status: CapInh=0000000000000000 CapPrm=0000000000000000 CapEff=0000000000000000 "
     "CapBnd=0000000000000000 CapAmb=0000000000000000 NoNewPrivs=1 Seccomp=2"},
    {"sethostname", {}, "sethostname: hostname=EPERM domainname=EPERM"},
    {"mknod_device", {}, "mknod_device: chr=EPERM blk=EPERM"},
    {"raw_socket", {}, "raw_socket: packet=EPERM inet=EPERM inet6=EPERM"},
    // Read-only and masked kernel interfaces. sysfs is a read-only superblock: EROFS before any permission
    // check. /proc/sys files are checked against the *global* root uid first (EACCES for userns root), so
    // the read-only bind shows only in the mount flags (ro=yes).
    {"sys_write", {}, "sys_write: kernel=EROFS lo_mtu=EROFS"},
    {"proc_sys_write", {}, "proc_sys_write: hostname=EACCES ip_forward=EACCES ro=yes"},
    {"masked_paths", {}, "masked_paths: ok"},
    {"dev_nodes", {}, "dev_nodes: ok"},
    {"fd_leak", {}, "fd_leak: none"},
    // Files: read-only binds (idmapped, so permission passes as owner and the mount says EROFS).
    {"write_ro_bind", {}, "write_ro_bind: create=EROFS open=EROFS chmod=EROFS unlink=EROFS"},
    {"write_usr", {}, "write_usr: create=EROFS open=EROFS"},
    {"chroot_escape", {"{marker}"}, "chroot_escape: chroot=EPERM marker=ENOENT"},
    // Network and IPC: the sandbox has its own loopback, abstract socket namespace and SysV IPC.
    {"tcp_connect_host", {"{port}"}, "tcp_connect_host: errno=ECONNREFUSED"},
    {"abstract_unix", {"{abstract}"}, "abstract_unix: errno=ECONNREFUSED"},
    {"unix_path", {"{unix}"}, "unix_path: errno=ENOENT"},
    {"ipc_shm", {"{shmkey}"}, "ipc_shm: errno=ENOENT"},
    {"net_ifaces", {}, "net_ifaces: if=lo sys=lo"},
};

INSTANTIATE_TEST_SUITE_P(Hostile, HostileEscape, ::testing::ValuesIn(kCases),
                         [](const ::testing::TestParamInfo<Case>& param) { return std::string(param.param.program); });

// Masked /proc files: a /dev/null bind where this kernel has the file, absent (ENOENT) where it has not.
TEST_F(HostileTest, SysrqTriggerIsMasked) {
  const bool present = fs::exists("/proc/sysrq-trigger");
  expect_blocked(run_program("sysrq_trigger"), present ? "sysrq_trigger: masked" : "sysrq_trigger: errno=ENOENT");
}

TEST_F(HostileTest, KcoreIsMasked) {
  const bool present = fs::exists("/proc/kcore");
  expect_blocked(run_program("proc_kcore"), present ? "proc_kcore: masked" : "proc_kcore: errno=ENOENT");
}

// Whether this kernel runs i386 syscalls (int 0x80) from a 64-bit process: probed in a child on the host.
bool host_runs_int80() {
  pid_t pid = fork();
  if (pid == 0) {
    long ret;
    __asm__ volatile("int $0x80" : "=a"(ret) : "a"(20L /* i386 getpid */) : "memory", "r8", "r9", "r10", "r11");
    _exit(ret > 0 ? 0 : 1);
  }
  int status = 0;
  waitpid(pid, &status, 0);
  return WIFEXITED(status) && WEXITSTATUS(status) == 0;
}

// The filter covers only the x86_64 ABI: i386 (int 0x80) and x32 numbers hit the bad-arch action, which
// kills the process (SIGSYS). Kernels without IA32 emulation fault int 0x80 before seccomp sees it (SIGSEGV).
TEST_F(HostileTest, CompatSyscallAbisAreKilled) {
  const std::string i386 = host_runs_int80() ? "SIGSYS" : "SIGSEGV";
  expect_blocked(run_program("compat_syscall"), "compat_syscall: i386=" + i386 + " x32=SIGSYS");
}

TEST_F(HostileTest, ForkBombHitsThePidsLimit) {
  Result r = run_program("fork_bomb", {"2000"}, [](SandboxSpec& s) { s.limits.pids = 32; });
  expect_blocked(r, "fork_bomb: errno=EAGAIN");
}

TEST_F(HostileTest, WritesUnderUsrNeverReachTheHost) {
  expect_blocked(run_program("write_usr"), "write_usr: create=EROFS open=EROFS");
  EXPECT_FALSE(fs::exists("/usr/hostile-probe"));
  EXPECT_FALSE(fs::exists(std::string(CAPSULE_TESTCASES_DIR) + "/hostile-created"));
}

// A writable idmapped bind maps sandbox root to host root: whatever set-id bits the sandbox can set there
// must not produce a root-owned set-uid/set-gid file on the host.
TEST_F(HostileTest, NoSetIdRootFilePlantedThroughAWritableBind) {
  std::string tmpl = kBaitPrefix + std::to_string(getpid()) + "-rw-XXXXXX";
  ASSERT_NE(mkdtemp(tmpl.data()), nullptr);
  const std::string dir = tmpl;
  chmod(dir.c_str(), 0755);
  // A user's workspace: sandbox root is mapped to its owner, so what it plants is the owner's, not root's.
  ASSERT_EQ(chown(dir.c_str(), 1000, 1000), 0);
  Result r = run_program("setuid_plant", {"/rw"},
                         [&](SandboxSpec& s) { s.mounts.push_back(BindMount{dir, "/rw", false, true}); });
  EXPECT_EQ(r.status, Status::kSucceeded) << describe(r);
  EXPECT_EQ(r.stdout_capture.head.rfind("setuid_plant: create=ok", 0), 0u) << describe(r);
  struct stat st {};
  ASSERT_EQ(stat((dir + "/planted").c_str(), &st), 0) << describe(r);
  EXPECT_EQ(st.st_uid, 1000u);
  EXPECT_FALSE(st.st_uid == 0 && (st.st_mode & S_ISUID) != 0)
      << "the sandbox planted a set-uid root file on the host: mode " << std::oct << st.st_mode << " uid "
      << std::dec << st.st_uid << " (" << r.stdout_capture.head << ")";
  EXPECT_FALSE(st.st_gid == 0 && (st.st_mode & S_ISGID) != 0 && (st.st_mode & S_IXGRP) != 0)
      << "the sandbox planted a set-gid root file on the host: mode " << std::oct << st.st_mode;
  std::error_code ignored;
  fs::remove_all(dir, ignored);
}

}  // namespace
}  // namespace capsule::sandbox
