// What api_roundtrip reads from /proc and the state dir: RSS and threads of capsuled, CPU time of processes,
// threads and the machine, the state dir's mount, log and ledger sizes. Plain readings, no interpretation.
#pragma once

#include <sys/types.h>

#include <filesystem>
#include <map>
#include <string>
#include <utility>

namespace capsule::bench::api_roundtrip {

// The text of a file, empty if it cannot be read (a /proc entry of a process that just ended, a missing log).
std::string read_text(const std::string& path);

// "<fstype> <options>" of the mount holding `path` (the longest matching mount point in /proc/mounts).
std::string mount_of(const std::string& path);

// VmRSS, RssAnon, RssFile (kB) and Threads of a process; dies without VmRSS.
std::map<std::string, long> proc_status(pid_t pid);

// utime + stime (clock ticks) of every thread of a process, by thread id.
std::map<int, long> thread_cpu_ticks(pid_t pid);
// The thread's name (/proc/<pid>/task/<tid>/comm: capsuled names its long-lived threads); "?" once it is gone.
std::string thread_name(pid_t pid, int tid);

// CPU time (ms) of a process plus its reaped children: for capsuled that includes every finished sandbox.
double process_tree_cpu_ms(pid_t pid);

// Regular files (symlinks not followed) and their bytes under a directory: the logs grow with every run.
std::pair<long, long long> dir_usage(const std::filesystem::path& dir);

// Bytes of the SQLite ledger with its WAL and shared-memory files.
long long ledger_bytes(const std::string& db);

}  // namespace capsule::bench::api_roundtrip
