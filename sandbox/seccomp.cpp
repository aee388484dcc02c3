// Seccomp profiles in the OCI / Docker JSON format: parsing (rules resolved for this host and for a sandbox
// without capabilities), compilation to raw BPF with libseccomp, and installation of the compiled program.
#include "sandbox/seccomp.h"

#include <linux/audit.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <seccomp.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <stddef.h>
#include <sys/utsname.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <initializer_list>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <string_view>

#include "sandbox/error.h"
#include "base/unique_fd.h"

namespace capsule::sandbox {
namespace {

using nlohmann::json;

constexpr const char* kSeccompStep = "seccomp";
constexpr std::uint64_t kMaxErrno = 4095;
constexpr unsigned kMaxArgIndex = 5;

// Names this host answers to in includes/excludes "arches", and the extra ABIs its kernel can execute
// (the only non-native entries of "architectures" that can ever match a syscall here).
struct ArchToken {
  std::string_view name;
  std::uint32_t token;
};
#if defined(__x86_64__)
constexpr const char* kNativeArch = "SCMP_ARCH_X86_64";
constexpr std::array<std::string_view, 3> kNativeAliases = {"amd64", "x86_64", "SCMP_ARCH_X86_64"};
constexpr std::array<ArchToken, 2> kCompatArches = {
    {{"SCMP_ARCH_X86", SCMP_ARCH_X86}, {"SCMP_ARCH_X32", SCMP_ARCH_X32}}};
#elif defined(__aarch64__)
constexpr const char* kNativeArch = "SCMP_ARCH_AARCH64";
constexpr std::array<std::string_view, 3> kNativeAliases = {"arm64", "aarch64", "SCMP_ARCH_AARCH64"};
constexpr std::array<ArchToken, 1> kCompatArches = {{{"SCMP_ARCH_ARM", SCMP_ARCH_ARM}}};
#else
#error "capsule's seccomp support covers x86_64 and aarch64 hosts"
#endif

constexpr std::array<std::string_view, 7> kActions = {"SCMP_ACT_ALLOW",       "SCMP_ACT_ERRNO", "SCMP_ACT_KILL",
                                                      "SCMP_ACT_KILL_THREAD", "SCMP_ACT_KILL_PROCESS",
                                                      "SCMP_ACT_TRAP",        "SCMP_ACT_LOG"};
constexpr std::array<std::string_view, 4> kFlags = {"SECCOMP_FILTER_FLAG_TSYNC", "SECCOMP_FILTER_FLAG_LOG",
                                                    "SECCOMP_FILTER_FLAG_SPEC_ALLOW",
                                                    "SECCOMP_FILTER_FLAG_WAIT_KILLABLE_RECV"};
struct OpName { std::string_view name; scmp_compare op; };
constexpr std::array<OpName, 7> kOps = {{{"SCMP_CMP_NE", SCMP_CMP_NE},
                                         {"SCMP_CMP_LT", SCMP_CMP_LT},
                                         {"SCMP_CMP_LE", SCMP_CMP_LE},
                                         {"SCMP_CMP_EQ", SCMP_CMP_EQ},
                                         {"SCMP_CMP_GE", SCMP_CMP_GE},
                                         {"SCMP_CMP_GT", SCMP_CMP_GT},
                                         {"SCMP_CMP_MASKED_EQ", SCMP_CMP_MASKED_EQ}}};

template <typename Range>
bool contains(const Range& range, std::string_view value) {
  return std::find(std::begin(range), std::end(range), value) != std::end(range);
}

[[noreturn]] void bad(const std::string& field, const std::string& detail) { throw_error(kSeccompStep, field, detail); }

std::string join(const std::string& where, const std::string& key) { return where.empty() ? key : where + "." + key; }

// ---- typed JSON access; a null value counts as absent, as in Docker's Go decoder ----

void check_object(const json& value, const std::string& where, std::initializer_list<std::string_view> keys) {
  if (!value.is_object()) bad(where, "expected an object");
  for (const auto& item : value.items())
    if (!contains(keys, item.key())) bad(join(where, item.key()), "unknown key");
}

const json* find(const json& object, const char* key) {
  auto it = object.find(key);
  return it == object.end() || it->is_null() ? nullptr : &*it;
}

std::optional<std::string> opt_string(const json& object, const std::string& where, const char* key) {
  const json* value = find(object, key);
  if (value == nullptr) return std::nullopt;
  if (!value->is_string()) bad(join(where, key), "expected a string");
  return value->get<std::string>();
}

std::optional<std::uint64_t> opt_uint(const json& object, const std::string& where, const char* key,
                                      std::uint64_t max) {
  const json* value = find(object, key);
  if (value == nullptr) return std::nullopt;
  if (!value->is_number_unsigned()) bad(join(where, key), "expected a non-negative integer");
  auto number = value->get<std::uint64_t>();
  if (number > max) bad(join(where, key), "must be at most " + std::to_string(max));
  return number;
}

std::vector<std::string> string_list(const json& object, const std::string& where, const char* key) {
  std::vector<std::string> out;
  const json* value = find(object, key);
  if (value == nullptr) return out;
  if (!value->is_array()) bad(join(where, key), "expected an array of strings");
  for (std::size_t i = 0; i < value->size(); ++i) {
    if (!(*value)[i].is_string()) bad(join(where, key) + "[" + std::to_string(i) + "]", "expected a string");
    out.push_back((*value)[i].get<std::string>());
  }
  return out;
}

// ---- kernel versions ("4.8", "5.10.2"; uname's "6.1.0-18-amd64") ----

using Version = std::array<unsigned, 3>;

// Reads up to three dot-separated numbers; returns how many characters were consumed (0 on failure).
std::size_t read_version(std::string_view text, Version& out, int& parts) {
  out = {0, 0, 0};
  parts = 0;
  std::size_t pos = 0;
  while (parts < 3) {
    std::size_t start = pos;
    unsigned number = 0;
    while (pos < text.size() && text[pos] >= '0' && text[pos] <= '9' && number < 100000)
      number = number * 10 + static_cast<unsigned>(text[pos++] - '0');
    if (pos == start) return 0;
    out[static_cast<std::size_t>(parts++)] = number;
    if (parts == 3 || pos >= text.size() || text[pos] != '.' || pos + 1 >= text.size()) break;
    ++pos;
  }
  return pos;
}

Version parse_min_kernel(const std::string& text, const std::string& field) {
  Version version{};
  int parts = 0;
  if (read_version(text, version, parts) != text.size() || parts < 2)
    bad(field, "expected a kernel version like \"5.8\", got \"" + text + "\"");
  return version;
}

const Version& running_kernel() {
  static const Version version = [] {
    Version v{};
    int parts = 0;
    utsname name{};
    if (uname(&name) != 0 || read_version(name.release, v, parts) == 0) throw_errno(kSeccompStep, "", "uname");
    return v;
  }();
  return version;
}

// ---- profile parsing ----

struct Filter {  // includes / excludes of a Docker rule
  std::vector<std::string> caps;
  std::vector<std::string> arches;
  std::optional<Version> min_kernel;
};

Filter parse_filter(const json& rule, const std::string& where, const char* key) {
  Filter filter;
  const json* value = find(rule, key);
  if (value == nullptr) return filter;
  const std::string field = join(where, key);
  check_object(*value, field, {"caps", "arches", "minKernel"});
  filter.caps = string_list(*value, field, "caps");
  filter.arches = string_list(*value, field, "arches");
  if (auto text = opt_string(*value, field, "minKernel"))
    filter.min_kernel = parse_min_kernel(*text, field + ".minKernel");
  return filter;
}

bool names_this_host(const std::vector<std::string>& arches) {
  return std::any_of(arches.begin(), arches.end(), [](const std::string& a) { return contains(kNativeAliases, a); });
}

// Sandboxes hold no capabilities: a rule that needs one never applies, and excludes.caps never excludes.
bool applies_here(const Filter& includes, const Filter& excludes) {
  if (!includes.caps.empty()) return false;
  if (!includes.arches.empty() && !names_this_host(includes.arches)) return false;
  if (names_this_host(excludes.arches)) return false;
  if (includes.min_kernel && running_kernel() < *includes.min_kernel) return false;
  if (excludes.min_kernel && running_kernel() >= *excludes.min_kernel) return false;
  return true;
}

std::string parse_action(const std::string& action, const std::string& field) {
  if (action == "SCMP_ACT_NOTIFY" || action == "SCMP_ACT_TRACE")
    bad(field, action + " is not supported: sandboxes have no seccomp supervisor or tracer");
  if (!contains(kActions, action)) bad(field, "unknown action \"" + action + "\"");
  return action;
}

SeccompArg parse_arg(const json& value, const std::string& where) {
  check_object(value, where, {"index", "value", "valueTwo", "op"});
  SeccompArg arg;
  arg.index = static_cast<unsigned>(opt_uint(value, where, "index", kMaxArgIndex).value_or(0));
  arg.value = opt_uint(value, where, "value", UINT64_MAX).value_or(0);
  arg.value_two = opt_uint(value, where, "valueTwo", UINT64_MAX).value_or(0);
  auto op = opt_string(value, where, "op");
  if (!op) bad(join(where, "op"), "is required");
  if (std::none_of(kOps.begin(), kOps.end(), [&](const OpName& o) { return o.name == *op; }))
    bad(join(where, "op"), "unknown operator \"" + *op + "\"");
  arg.op = *op;
  return arg;
}

// Returns the rule when it applies to this host, after validating all of it either way.
std::optional<SeccompRule> parse_rule(const json& value, const std::string& where) {
  check_object(value, where, {"names", "name", "action", "errnoRet", "args", "comment", "includes", "excludes"});
  SeccompRule rule;
  rule.names = string_list(value, where, "names");
  if (auto name = opt_string(value, where, "name")) {
    if (!rule.names.empty()) bad(join(where, "name"), "use either \"name\" or \"names\", not both");
    rule.names.push_back(*name);
  }
  if (rule.names.empty()) bad(join(where, "names"), "at least one syscall name is required");

  auto action = opt_string(value, where, "action");
  if (!action) bad(join(where, "action"), "is required");
  rule.action = parse_action(*action, join(where, "action"));
  if (auto errno_ret = opt_uint(value, where, "errnoRet", kMaxErrno)) {
    if (rule.action != "SCMP_ACT_ERRNO") bad(join(where, "errnoRet"), "only valid with SCMP_ACT_ERRNO");
    rule.errno_ret = static_cast<std::uint32_t>(*errno_ret);
    rule.has_errno_ret = true;
  }
  if (const json* args = find(value, "args")) {
    if (!args->is_array()) bad(join(where, "args"), "expected an array");
    for (std::size_t i = 0; i < args->size(); ++i)
      rule.args.push_back(parse_arg((*args)[i], join(where, "args") + "[" + std::to_string(i) + "]"));
  }
  opt_string(value, where, "comment");
  Filter includes = parse_filter(value, where, "includes");
  Filter excludes = parse_filter(value, where, "excludes");
  if (!applies_here(includes, excludes)) return std::nullopt;
  return rule;
}

std::string parse_arch(const std::string& name, const std::string& field) {
  if (name.rfind("SCMP_ARCH_", 0) != 0) bad(field, "expected an SCMP_ARCH_* name, got \"" + name + "\"");
  return name;
}

// "architectures" is taken as written; with "archMap", the entry for this host gives native + sub-arches.
std::vector<std::string> parse_architectures(const json& doc) {
  std::vector<std::string> out;
  auto listed = string_list(doc, "", "architectures");
  for (std::size_t i = 0; i < listed.size(); ++i)
    out.push_back(parse_arch(listed[i], "architectures[" + std::to_string(i) + "]"));
  const json* map = find(doc, "archMap");
  if (map == nullptr) return out;
  if (!out.empty()) bad("archMap", "use either \"architectures\" or \"archMap\", not both");
  if (!map->is_array()) bad("archMap", "expected an array");
  for (std::size_t i = 0; i < map->size(); ++i) {
    const std::string where = "archMap[" + std::to_string(i) + "]";
    check_object((*map)[i], where, {"architecture", "subArchitectures"});
    auto arch = opt_string((*map)[i], where, "architecture");
    if (!arch) bad(join(where, "architecture"), "is required");
    parse_arch(*arch, join(where, "architecture"));
    auto subs = string_list((*map)[i], where, "subArchitectures");
    for (std::size_t j = 0; j < subs.size(); ++j)
      parse_arch(subs[j], join(where, "subArchitectures") + "[" + std::to_string(j) + "]");
    if (*arch != kNativeArch || !out.empty()) continue;
    out.push_back(*arch);
    out.insert(out.end(), subs.begin(), subs.end());
  }
  return out;
}

// ---- compilation ----

struct ReleaseFilter {
  void operator()(void* ctx) const { seccomp_release(ctx); }
};
using FilterCtx = std::unique_ptr<void, ReleaseFilter>;

void check_rc(int rc, const std::string& field, const std::string& detail) {
  if (rc < 0) throw SandboxError(base::Cause{kSeccompStep, field, -rc, detail});
}

std::uint32_t action_value(const std::string& action, std::uint32_t errno_ret) {
  if (action == "SCMP_ACT_ALLOW") return SCMP_ACT_ALLOW;
  if (action == "SCMP_ACT_ERRNO") return SCMP_ACT_ERRNO(errno_ret);
  if (action == "SCMP_ACT_KILL" || action == "SCMP_ACT_KILL_THREAD") return SCMP_ACT_KILL_THREAD;
  if (action == "SCMP_ACT_KILL_PROCESS") return SCMP_ACT_KILL_PROCESS;
  if (action == "SCMP_ACT_TRAP") return SCMP_ACT_TRAP;
  if (action == "SCMP_ACT_LOG") return SCMP_ACT_LOG;
  bad("action", "unsupported action \"" + action + "\"");
}

// libseccomp lets an unconditional rule silently win over conditional rules for the same syscall, so a
// profile mixing them with different actions would not mean what it says; refuse it instead.
struct SyscallActions {
  std::optional<std::uint32_t> unconditional;
  std::vector<std::uint32_t> conditional;
};

void check_consistent(SyscallActions& seen, const std::string& name, std::uint32_t action, bool has_args) {
  auto differs = [&](std::uint32_t other) { return other != action; };
  bool conflict = (seen.unconditional && differs(*seen.unconditional)) ||
                  (!has_args && std::any_of(seen.conditional.begin(), seen.conditional.end(), differs));
  if (conflict) bad(name, "rules with different actions, at least one without args: the unconditional one would win");
  if (has_args) seen.conditional.push_back(action);
  else seen.unconditional = action;
}

void add_rule(void* ctx, const SeccompRule& rule, std::uint32_t default_action,
              std::map<int, SyscallActions>& seen) {
  const std::uint32_t action = action_value(rule.action, rule.has_errno_ret ? rule.errno_ret : EPERM);

  std::vector<scmp_arg_cmp> conditions;
  std::array<int, kMaxArgIndex + 1> per_index{};
  bool repeated_index = false;
  for (const auto& arg : rule.args) {
    auto op = std::find_if(kOps.begin(), kOps.end(), [&](const OpName& o) { return o.name == arg.op; });
    if (op == kOps.end() || arg.index > kMaxArgIndex) bad("args", "invalid comparison for " + rule.names.front());
    conditions.push_back(scmp_arg_cmp{arg.index, op->op, arg.value, arg.value_two});
    repeated_index |= ++per_index[arg.index] > 1;
  }
  for (const auto& name : rule.names) {
    const int nr = seccomp_syscall_resolve_name(name.c_str());
    if (nr == __NR_SCMP_ERROR) continue;  // unknown to this libseccomp: skipped, as Docker does
    check_consistent(seen[nr], name, action, !conditions.empty());
    if (action == default_action) continue;  // a no-op, and libseccomp refuses rules that repeat the default
    // libseccomp cannot AND two comparisons of one argument; like runc, such a rule means "any of them".
    if (repeated_index) {
      for (const auto& condition : conditions)
        check_rc(seccomp_rule_add_array(ctx, action, nr, 1, &condition), name, "adding a rule");
    } else {
      check_rc(seccomp_rule_add_array(ctx, action, nr, static_cast<unsigned>(conditions.size()), conditions.data()),
               name, "adding a rule");
    }
  }
}

std::vector<std::uint8_t> export_program(void* ctx) {
  base::UniqueFd fd(memfd_create("capsule-seccomp", MFD_CLOEXEC));
  if (!fd) throw_errno(kSeccompStep, "", "memfd_create for the BPF export");
  check_rc(seccomp_export_bpf(ctx, fd.get()), "", "seccomp_export_bpf");
  const off_t size = lseek(fd.get(), 0, SEEK_END);
  if (size < 0) throw_errno(kSeccompStep, "", "sizing the BPF export");
  std::vector<std::uint8_t> program(static_cast<std::size_t>(size));
  std::size_t done = 0;
  while (done < program.size()) {
    ssize_t n = pread(fd.get(), program.data() + done, program.size() - done, static_cast<off_t>(done));
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) throw_errno(kSeccompStep, "", "reading the BPF export");
    done += static_cast<std::size_t>(n);
  }
  if (program.empty() || program.size() % sizeof(sock_filter) != 0) bad("", "libseccomp exported a malformed program");
  return program;
}

}  // namespace

SeccompProfile parse_seccomp_profile(const std::string& json_text) {
  json doc;
  try {
    doc = json::parse(json_text);
  } catch (const json::parse_error& e) {
    bad("", std::string("invalid JSON: ") + e.what());
  }
  check_object(doc, "", {"defaultAction", "defaultErrnoRet", "architectures", "archMap", "syscalls", "flags",
                         "listenerPath", "listenerMetadata"});
  SeccompProfile profile;
  auto action = opt_string(doc, "", "defaultAction");
  if (!action) bad("defaultAction", "is required");
  profile.default_action = parse_action(*action, "defaultAction");
  if (auto errno_ret = opt_uint(doc, "", "defaultErrnoRet", kMaxErrno)) {
    if (profile.default_action != "SCMP_ACT_ERRNO") bad("defaultErrnoRet", "only valid with SCMP_ACT_ERRNO");
    profile.default_errno_ret = static_cast<std::uint32_t>(*errno_ret);
  }
  profile.architectures = parse_architectures(doc);

  // Flags only tune how a filter is loaded; the launcher always installs with none (no SPEC_ALLOW, no TSYNC).
  auto flags = string_list(doc, "", "flags");
  for (std::size_t i = 0; i < flags.size(); ++i)
    if (!contains(kFlags, flags[i])) bad("flags[" + std::to_string(i) + "]", "unknown flag \"" + flags[i] + "\"");
  // Listener settings only matter for SCMP_ACT_NOTIFY, which is rejected above.
  opt_string(doc, "", "listenerPath");
  opt_string(doc, "", "listenerMetadata");

  if (const json* calls = find(doc, "syscalls")) {
    if (!calls->is_array()) bad("syscalls", "expected an array");
    for (std::size_t i = 0; i < calls->size(); ++i)
      if (auto rule = parse_rule((*calls)[i], "syscalls[" + std::to_string(i) + "]"))
        profile.syscalls.push_back(std::move(*rule));
  }
  return profile;
}

std::vector<std::uint8_t> compile_seccomp(const SeccompProfile& profile) {
  const std::uint32_t default_action = action_value(profile.default_action, profile.default_errno_ret);
  FilterCtx ctx(seccomp_init(default_action));
  if (!ctx) bad("defaultAction", "seccomp_init rejected " + profile.default_action);
  // The exported program is raw BPF: the launcher sets no_new_privs itself before installing it.
  check_rc(seccomp_attr_set(ctx.get(), SCMP_FLTATR_CTL_NNP, 0), "", "clearing the NNP attribute");
  // A syscall from an ABI the filter does not cover (int 0x80, x32) kills the whole process.
  check_rc(seccomp_attr_set(ctx.get(), SCMP_FLTATR_ACT_BADARCH, SCMP_ACT_KILL_PROCESS), "", "setting bad-arch action");
  check_rc(seccomp_attr_set(ctx.get(), SCMP_FLTATR_CTL_OPTIMIZE, 2), "", "enabling binary-tree dispatch");

  // The native arch is always present; add the other ABIs this kernel runs when listed. Foreign arches
  // (e.g. s390x on an x86_64 host) can never match a syscall here and are left out.
  for (const auto& arch : profile.architectures) {
    auto compat = std::find_if(kCompatArches.begin(), kCompatArches.end(),
                               [&](const ArchToken& a) { return a.name == arch; });
    if (compat == kCompatArches.end()) continue;
    int rc = seccomp_arch_add(ctx.get(), compat->token);
    if (rc != -EEXIST) check_rc(rc, "architectures", "adding " + arch);
  }
  std::map<int, SyscallActions> seen;
  for (const auto& rule : profile.syscalls) add_rule(ctx.get(), rule, default_action, seen);
  return export_program(ctx.get());
}

int install_seccomp_program(const std::vector<std::uint8_t>& program) {
  const std::size_t count = program.size() / sizeof(sock_filter);
  if (count == 0 || count > BPF_MAXINSNS || program.size() % sizeof(sock_filter) != 0) return EINVAL;
  sock_fprog fprog{};
  fprog.len = static_cast<unsigned short>(count);
  fprog.filter = reinterpret_cast<sock_filter*>(const_cast<std::uint8_t*>(program.data()));
  if (prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, &fprog, 0, 0) != 0) return errno;
  return 0;
}

namespace {

#if defined(__x86_64__)
constexpr std::uint32_t kNativeAuditArch = AUDIT_ARCH_X86_64;
#elif defined(__aarch64__)
constexpr std::uint32_t kNativeAuditArch = AUDIT_ARCH_AARCH64;
#else
constexpr std::uint32_t kNativeAuditArch = 0;
#endif

// The 32-bit word of seccomp_data at `offset` for `call`, when it is known.
std::optional<std::uint32_t> word_of(const ExpectedCall& call, std::uint32_t offset) {
  if (offset == offsetof(seccomp_data, nr)) return static_cast<std::uint32_t>(call.nr);
  if (offset == offsetof(seccomp_data, arch)) return kNativeAuditArch;
  const std::uint32_t args = offsetof(seccomp_data, args);
  if (offset < args || offset >= args + call.args.size() * 8 || offset % 4 != 0) return std::nullopt;
  const std::uint64_t value = call.args[(offset - args) / 8];
  // Little-endian (the only arches kNativeAuditArch names): the low word first.
  return static_cast<std::uint32_t>((offset - args) % 8 == 0 ? value : value >> 32);
}

// Follows the program for one call, as the kernel's seccomp_is_const_allow does: only loads of what is known of
// the call, constant jumps and ANDs; anything else (the instruction pointer, unknown arguments) is "not known".
bool allows_call(const sock_filter* program, std::size_t count, const ExpectedCall& call) {
  std::uint32_t a = 0;
  for (std::size_t pc = 0; pc < count; ++pc) {
    const sock_filter& insn = program[pc];
    std::size_t skip = 0;
    switch (insn.code) {
      case BPF_LD | BPF_W | BPF_ABS:
        if (const std::optional<std::uint32_t> word = word_of(call, insn.k)) {
          a = *word;
        } else {
          return false;
        }
        break;
      case BPF_RET | BPF_K:
        return insn.k == SECCOMP_RET_ALLOW;
      case BPF_JMP | BPF_JA:
        skip = insn.k;
        break;
      case BPF_JMP | BPF_JEQ | BPF_K:
        skip = a == insn.k ? insn.jt : insn.jf;
        break;
      case BPF_JMP | BPF_JGE | BPF_K:
        skip = a >= insn.k ? insn.jt : insn.jf;
        break;
      case BPF_JMP | BPF_JGT | BPF_K:
        skip = a > insn.k ? insn.jt : insn.jf;
        break;
      case BPF_JMP | BPF_JSET | BPF_K:
        skip = (a & insn.k) != 0 ? insn.jt : insn.jf;
        break;
      case BPF_ALU | BPF_AND | BPF_K:
        a &= insn.k;
        break;
      default:
        return false;
    }
    if (skip >= count - pc) return false;  // past the end: the kernel would not have loaded it
    pc += skip;
  }
  return false;
}

}  // namespace

bool allows_calls(const std::vector<std::uint8_t>& program, const std::vector<ExpectedCall>& calls) {
  const std::size_t count = program.size() / sizeof(sock_filter);
  if (kNativeAuditArch == 0 || count == 0 || program.size() % sizeof(sock_filter) != 0) return false;
  // Read in place, as install_seccomp_program hands it to the kernel.
  const auto* insns = reinterpret_cast<const sock_filter*>(program.data());
  return std::all_of(calls.begin(), calls.end(),
                     [&](const ExpectedCall& call) { return call.nr >= 0 && allows_call(insns, count, call); });
}

}  // namespace capsule::sandbox
