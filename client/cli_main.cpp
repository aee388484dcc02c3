// The command line of capsule and capsule-full: wires the subcommands and their flags (CLI11) to the cli_* files, one
// per command group; what follows the first "--" is the command of `capsule run`, `session exec` or `stack exec`.
#include <CLI/CLI.hpp>
#include <cstring>
#include <iostream>
#include <string_view>

#include "client/cli_args.h"
#include "client/cli_daemon.h"
#include "client/cli_images.h"
#include "client/cli_main.h"
#include "client/cli_replay.h"
#include "client/cli_run_bundle.h"
#include "client/cli_run.h"
#include "client/cli_runs.h"
#include "client/cli_runs_diff.h"
#include "client/cli_session.h"
#include "client/cli_snapshot.h"
#include "client/cli_stack.h"
#include "client/cli_toolchains.h"
#include "client/full_commands.h"
#include "client/run_view.h"

namespace capsule::client {
namespace {

constexpr const char* kAppDescription = "capsule: run commands in hermetic Linux sandboxes through capsuled";

// The top-level app with its own options (--version, --socket) and no subcommand yet.
void add_top_level(CLI::App& app, std::string& socket) {
  app.set_version_flag("--version", client_version());
  app.require_subcommand(1);
  app.fallthrough();  // --socket works before or after the subcommand
  app.add_option("--socket", socket, "capsuled's socket (default: " + default_socket_path() + ")")
      ->envname("CAPSULE_SOCKET");
}

CLI::App* add_run_command(CLI::App& app, RunOptions& options) {
  CLI::App* run = app.add_subcommand("run", "run a command in a new sandbox: capsule run [IMAGE] [FLAGS] -- CMD...");
  add_run_flags(*run, options);
  run->prefix_command();  // `capsule run IMAGE CMD ARGS...` also works without "--"
  run->footer(kExitCodeHelp);
  return run;
}

// The subcommand named first, when only --socket (and its value) comes before it; else empty.
std::string_view first_subcommand(int cut, char** argv) {
  for (int i = 1; i < cut; ++i) {
    const std::string_view arg = argv[i];
    if (arg == "--socket") {
      ++i;
    } else if (!arg.starts_with("--socket=")) {
      return arg.starts_with("-") ? std::string_view() : arg;
    }
  }
  return {};
}

// `capsule run` with only its own flags built: what harnesses call thousands of times, and CLI11 takes about a
// millisecond here to build every command's options. Parses and exits as cli_main does for a run.
int run_main(int cut, int argc, char** argv, const std::vector<std::string>& after_separator) {
  CLI::App app{kAppDescription};
  std::string socket;
  add_top_level(app, socket);
  RunOptions run_options;
  CLI::App* run = add_run_command(app, run_options);
  try {
    app.parse(cut, argv);
  } catch (const CLI::ParseError& e) {
    const int code = app.exit(e);
    return code == 0 ? 0 : run->parsed() ? kExitCapsuleFailed : 2;
  }
  if (socket.empty()) socket = default_socket_path();
  try {
    run_options.argv = command_argv(run->remaining(), cut < argc, after_separator);
    return cmd_run(socket, run_options);
  } catch (const std::exception& e) {
    std::cerr << "capsule: " << e.what() << "\n";
    return kExitCapsuleFailed;
  }
}

}  // namespace

int cli_main(int argc, char** argv) {
  int cut = argc;  // CLI11 sees the arguments before "--"; `run` takes the rest as its command
  for (int i = 1; i < argc; ++i) {
    if (std::strcmp(argv[i], "--") == 0) {
      cut = i;
      break;
    }
  }
  const std::vector<std::string> after_separator(argv + std::min(cut + 1, argc), argv + argc);
  if (first_subcommand(cut, argv) == "run") return run_main(cut, argc, argv, after_separator);

  CLI::App app{kAppDescription};
  std::string socket;
  add_top_level(app, socket);
  RunOptions run_options;
  CLI::App* run = add_run_command(app, run_options);

  ReplayOptions replay_options;
  CLI::App* replay = app.add_subcommand("replay", "run a finished run again from its spec and pins, the proxy "
                                                  "frozen to what it received; --repeat N: flakiness report");
  replay->add_option("id", replay_options.id, "run id")->required();
  replay->add_option("--repeat", replay_options.repeat, "replay N times (1 to 50) and report flip rates");
  replay->add_option("--vary", replay_options.vary, "on every other replay: cpus,memory,order (any of them)");
  replay->add_flag("--json", replay_options.json, "print the run object (or the report) as JSON");
  replay->add_option("--workspace", replay_options.workspace, "a host directory (or a snapshot sha256:...) instead "
                     "of the original's workspace, e.g. for a run imported from another machine");
  replay->footer(kExitCodeHelp);

  CLI::App* runs = app.add_subcommand("runs", "list, inspect and cancel runs");
  runs->require_subcommand(1);
  std::string state, label, after, id;
  std::optional<int> limit;
  bool as_json = false, stderr_stream = false, follow = false, with_probes = false;
  CLI::App* ls = runs->add_subcommand("ls", "list runs, newest first (without stacks' probe runs unless --all)");
  ls->add_option("--state", state, "only runs in this state (queued, running, succeeded, failed, ...)");
  ls->add_option("--label", label, "only runs with this label K=V");
  ls->add_option("--limit", limit, "at most this many runs");
  ls->add_option("--after", after, "continue after this run id (paging)");
  ls->add_flag("--json", as_json, "print the API's JSON instead of a table");
  ls->add_flag("--all", with_probes, "also list the runs of stacks' readiness probes (label capsule/probe)");
  CLI::App* show = runs->add_subcommand("show", "print one run object as JSON");
  show->add_option("id", id, "run id")->required();
  CLI::App* logs = runs->add_subcommand("logs", "print a run's full output (or its last lines)");
  logs->add_option("id", id, "run id")->required();
  std::optional<int> tail;
  logs->add_option("--tail,-n", tail, "only the last N lines (1 to 10000, at most 1 MiB of them), as the daemon "
                   "cuts them");
  logs->add_flag("--stderr", stderr_stream, "print stderr instead of stdout");
  logs->add_flag("--follow,-f", follow, "keep printing until the run ends");
  CLI::App* cancel = runs->add_subcommand("cancel", "cancel a queued or running run");
  cancel->add_option("id", id, "run id")->required();
  std::vector<std::string> rm_ids;
  CLI::App* runs_rm = runs->add_subcommand("rm", "delete finished runs: their records and logs");
  runs_rm->add_option("ids", rm_ids, "run ids")->required();
  std::string diff_a, diff_b;
  bool allow_removed = false;
  CLI::App* runs_diff = runs->add_subcommand("diff", "how two finished runs differ: verdict, tests, output, "
                                                     "dependencies, files, pins, timings");
  runs_diff->add_option("a", diff_a, "run id")->required();
  runs_diff->add_option("b", diff_b, "run id")->required();
  runs_diff->add_flag("--json", as_json, "print the API's JSON instead of a summary");
  runs_diff->add_flag("--allow-removed", allow_removed, "list test cases b lost (removed, newly skipped) without "
                                                       "failing for them");
  BundleCommands bundle_commands;
  add_bundle_commands(*runs, bundle_commands);
  std::string cp_source, cp_destination, commit_ref;
  CLI::App* runs_cp = runs->add_subcommand("cp", "copy a file or directory a finished run wrote (its kept outputs)");
  runs_cp->add_option("source", cp_source, "ID:PATH (relative: under /workspace; absolute: in the root filesystem)")
      ->required();
  runs_cp->add_option("dest", cp_destination, "local file or directory")->required();
  CLI::App* runs_commit = runs->add_subcommand("commit", "make an image of a finished run's root filesystem changes");
  runs_commit->add_option("id", id, "run id")->required();
  runs_commit->add_option("ref", commit_ref, "name:tag of the new image")->required();

  SessionCommands sessions;
  add_session_commands(app, sessions);
  StackCommands stacks;
  add_stack_commands(app, stacks);

  CLI::App* images = app.add_subcommand("images", "import, list, inspect, remove, save and collect images");
  images->require_subcommand(1);
  ImageImportOptions import_options;
  std::string ref, out;
  CLI::App* import = images->add_subcommand("import", "import an OCI layout, an oci-archive or a rootfs (dir or tar)");
  import->add_option("source", import_options.source, "path of the layout, archive or rootfs")->required();
  import->add_option("ref", import_options.ref, "name[:tag] to give the image")->required();
  import->add_option("--format", import_options.format, "layout, archive or rootfs (default: guessed)")
      ->check(CLI::IsMember({"layout", "archive", "rootfs"}));
  import->add_option("--label", import_options.labels, "K=V label of a rootfs import, e.g. "
                     "org.capsule.toolchain.python=3.11.2 (wins over --labels-file)");
  import->add_option("--labels-file", import_options.labels_file, "JSON object of string labels of a rootfs import, "
                     "e.g. the labels.json an images/recipes script writes");
  import->add_flag("--quiet,-q", import_options.quiet, "no progress line");
  add_sharing_flags(*import, import_options.sharing);
  CLI::App* images_ls = images->add_subcommand("ls", "list images");
  images_ls->add_flag("--json", as_json, "print the API's JSON instead of a table");
  CLI::App* inspect = images->add_subcommand("inspect", "print one image as JSON");
  inspect->add_option("ref", ref, "name[:tag], name@sha256:... or sha256:...")->required();
  ImageSharing sharing;
  CLI::App* share = images->add_subcommand("share", "say who besides you may use your image ref");
  share->add_option("ref", ref, "name[:tag]")->required();
  add_sharing_flags(*share, sharing);
  CLI::App* rm = images->add_subcommand("rm", "remove an image ref (blobs stay until gc)");
  rm->add_option("ref", ref, "name[:tag], name@sha256:... or sha256:...")->required();
  CLI::App* save = images->add_subcommand("save", "write an image as an oci-archive (.tar) or OCI layout dir");
  save->add_option("ref", ref, "image to save")->required();
  save->add_option("--output,-o", out, "OUT.tar or a new directory")->required();
  CLI::App* gc = images->add_subcommand("gc", "remove blobs and layers no image uses");

  ToolchainCommands toolchains;
  add_toolchain_commands(app, toolchains);
  SnapshotCommands snapshots;
  add_snapshot_commands(app, snapshots);

  CLI::App* proxy = app.add_subcommand("proxy", "the date-masked package proxy for PyPI and Maven");
  proxy->require_subcommand(1);
  ProxyServeOptions serve_options;
  CLI::App* serve = proxy->add_subcommand("serve", "serve /pypi/snapshot/{cutoff}/simple/ and "
                                                   "/maven/snapshot/{cutoff}/ on a loopback port");
  serve->add_option("--listen", serve_options.listen, "loopback ADDRESS:PORT (port 0: any free port)")
      ->capture_default_str();
  serve->add_option("--config", serve_options.config_file, "JSON file with the keys of capsuled's \"proxy\" config");
  serve->add_option("--cache-dir", serve_options.cache_dir, "blob and page cache (shared by all cutoffs)");
  serve->add_option("--pypi-index-url", serve_options.pypi_index_url, "upstream simple index (default: pypi.org)");
  serve->add_option("--pypi-mirror", serve_options.pypi_mirror, "local PEP 691 tree instead of an upstream index");
  serve->add_option("--maven-url", serve_options.maven_url, "upstream repository (default: Maven Central)");
  serve->add_option("--maven-mirror", serve_options.maven_mirror, "local repository tree (repeatable, in order)");
  serve->add_option("--maven-publish-times", serve_options.maven_publish_times,
                    "'g:a:v RFC3339' lines giving the local trees' publish times");
  serve->add_flag("--offline", serve_options.offline, "serve from the cache only; never connect upstream");
  serve->add_flag("--include-undated", serve_options.include_undated, "show files that have no publish time");
  serve->add_option("--as-of-package", serve_options.as_of_packages,
                    "NAME=DATE (repeatable): date package NAME by its own cutoff instead of the URL's, newer (a "
                    "fixed release let through) or older (held back), its pages, metadata and files alike; NAME a "
                    "PyPI project or a Maven groupId:artifactId, DATE as a spec's as_of takes it (YYYY-MM-DD, "
                    "RFC 3339, or a span back from today: \"30 days\", P2W)")
      ->allow_extra_args(false);

  BatchCommands batch_commands;
  add_batch_commands(app, batch_commands);

  CLI::App* version = app.add_subcommand("version", "print the client and daemon versions");
  CLI::App* daemon = app.add_subcommand("daemon", "run capsuled in the foreground");
  std::string state_dir;
  CLI::Option* state_dir_option = daemon->add_option(
      "--state-dir", state_dir, "capsuled's state directory (default: " + default_state_dir() +
                                    ", only with the default socket or $CAPSULE_STATE_DIR)");

  // After every subcommand was added: CLI11 copies a parent's footer into the subcommands made after it is set.
  app.footer(kOtherExitCodesHelp);
  runs_diff->footer(kRunsDiffExitHelp);

  try {
    app.parse(cut, argv);
  } catch (const CLI::ParseError& e) {
    const int code = app.exit(e);
    const bool exits_as_a_run = run->parsed() || replay->parsed() || sessions.exec->parsed() ||
                                sessions.attach->parsed() || stacks.exec->parsed();
    return code == 0 ? 0 : exits_as_a_run ? kExitCapsuleFailed : 2;
  }
  const bool socket_given = !socket.empty();
  if (socket.empty()) socket = default_socket_path();

  try {
    if (run->parsed()) return run_main(cut, argc, argv, after_separator);  // a spelling first_subcommand missed
    if (replay->parsed()) return cmd_replay(socket, replay_options);
    const FullCommands full{serve, &serve_options, &batch_commands, &stacks, &sessions, runs_cp, &cp_source,
                            &cp_destination};
    if (full.parsed() && after_separator.empty()) return run_full_command(argv, socket, socket_given, full);
    if (sessions.session->parsed()) return cmd_session(socket, sessions, cut < argc, after_separator);
    if (stacks.group->parsed()) return cmd_stack(socket, stacks, cut < argc, after_separator);
    if (!after_separator.empty()) {
      std::cerr << "capsule: unexpected arguments after --\n";
      return 2;
    }
    if (ls->parsed()) return cmd_runs_ls(socket, state, label, limit, after, with_probes, as_json);
    if (show->parsed()) return cmd_runs_show(socket, id);
    if (logs->parsed()) return cmd_runs_logs(socket, id, stderr_stream, follow, tail);
    if (cancel->parsed()) return cmd_runs_cancel(socket, id);
    if (runs_rm->parsed()) return cmd_runs_rm(socket, rm_ids);
    if (runs_diff->parsed()) return cmd_runs_diff(socket, diff_a, diff_b, as_json, allow_removed);
    if (bundle_command_parsed(bundle_commands)) return cmd_runs_bundle(socket, bundle_commands);
    if (runs_commit->parsed()) return cmd_runs_commit(socket, id, commit_ref);
    if (import->parsed()) return cmd_images_import(socket, import_options);
    if (images_ls->parsed()) return cmd_images_ls(socket, as_json);
    if (inspect->parsed()) return cmd_images_inspect(socket, ref);
    if (share->parsed()) return cmd_images_share(socket, ref, sharing);
    if (rm->parsed()) return cmd_images_rm(socket, ref);
    if (save->parsed()) return cmd_images_save(socket, ref, out);
    if (gc->parsed()) return cmd_images_gc(socket);
    if (toolchains.group->parsed()) return cmd_toolchains(socket, toolchains);
    if (snapshots.group->parsed()) return cmd_snapshot(socket, snapshots);
    if (version->parsed()) return cmd_version(socket);
    if (daemon->parsed()) {
      if (state_dir_option->count() == 0) state_dir = state_dir_for(socket);
      if (state_dir.empty()) throw std::runtime_error(unknown_state_dir_message(socket));
      return cmd_daemon(socket, state_dir);
    }
  } catch (const std::exception& e) {
    std::cerr << "capsule: " << e.what() << "\n";
    return run->parsed() || replay->parsed() ? kExitCapsuleFailed : runs_diff->parsed() ? kExitDiffTrouble : 1;
  }
  return 2;
}

}  // namespace capsule::client
