// The batch subcommands' CLI11 rows, apart from what they do (cli_batch.cpp): the lean `capsule` parses every
// command, while only capsule-full links the batch engine and its libraries (OpenSSL for digests).
#include "client/batch/batch_dir.h"
#include "client/cli_batch.h"

namespace capsule::client {

using namespace batch;

void add_batch_commands(CLI::App& app, BatchCommands& c) {
  c.group = app.add_subcommand("batch", "many run specs through local workers or a Slurm job array, results by key");
  c.group->require_subcommand(1);
  c.group->add_option("--root", c.root, "where batches live (default: " + default_batch_root() + ")")
      ->envname("CAPSULE_BATCH_ROOT");
  c.submit = c.group->add_subcommand("submit", "pin FILE's specs (JSONL, or a directory of .json/.jsonl) and start them; prints the batch id");
  c.submit->add_option("input", c.input, "a JSONL file of run specs, or a directory of them")->required();
  c.submit->add_option("--engine", c.engine, "local (this machine's capsuled), slurm (a job array) or none (start "
                                             "nothing: run `capsule batch work ID --chunk N` yourself, e.g. a "
                                             "Kubernetes Indexed Job)")
      ->check(CLI::IsMember({"local", "slurm", "none"}));
  c.submit->add_option("--partition", c.partition, "the Slurm partition");
  c.submit->add_option("--node-socket", c.node_socket, "the capsuled socket workers use on each node, {node} standing "
                                                       "for its name (default: --socket when given, else each node's default)");
  c.submit->add_option("--concurrency", c.concurrency, "runs at once per worker (per node with slurm)")
      ->check(CLI::Range(1, 256));
  c.submit->add_option("--chunk-size", c.chunk_size, "specs per chunk, the unit of a Slurm array task (default 20; local 100)")
      ->check(CLI::Range(1, 100000));
  c.submit->add_flag("--rerun", c.rerun, "run specs even when the cache holds a result for their manifest");
  c.submit->add_flag("--wait", c.wait_after, "wait for the batch and print its summary");
  CLI::Option* baseline_batch = c.submit->add_option(
      "--baseline-batch", c.baseline_batch,
      "compare each spec's test cases with the run of the same key in batch ID (under --root): a spec that loses "
      "cases that run had (removed, or newly skipped) fails its verdict (record.baseline). ID must hold as many "
      "specs, each key with a result that has a run; every spec needs collect.junit");
  CLI::Option* baseline = c.submit->add_option(
      "--baseline", c.baseline, "compare every spec's test cases with run RUN instead (needs collect.junit)");
  baseline->excludes(baseline_batch);
  c.submit->add_flag("--allow-removed", c.allow_removed,
                     "with --baseline(-batch): list removed or newly skipped cases without failing for them. A spec's "
                     "own \"baseline\" is kept as it is, whatever these flags say");
  c.status = c.group->add_subcommand("status", "counts so far, and whether workers still run");
  c.wait = c.group->add_subcommand("wait", "wait until every spec has a result or no worker is left");
  c.wait->add_option("--timeout", c.timeout_s, "give up after this many seconds (exit 124)");
  c.results = c.group->add_subcommand("results", "print the results as JSONL, in the input's order");
  c.summary = c.group->add_subcommand("summary", "counts by state and label, durations, failures");
  c.summary->add_option("--format", c.format, "text, json or html")->check(CLI::IsMember({"text", "json", "html"}));
  c.summary->add_option("-o,--output", c.out, "write to this file instead of stdout");
  c.cancel = c.group->add_subcommand("cancel", "stop the workers and cancel the runs in flight");
  c.resume = c.group->add_subcommand("resume", "start workers again for the specs that have no result");
  c.ls = c.group->add_subcommand("ls", "list the batches under the root");
  c.work = c.group->add_subcommand("work", "run a batch's specs here (what the engines start)");
  c.work->add_option("--chunk", c.chunk, "only this chunk (a Slurm array task's index)");
  for (CLI::App* command : {c.status, c.wait, c.results, c.summary, c.cancel, c.resume, c.work}) {
    command->add_option("id", c.id, "the batch id")->required();
  }
  for (CLI::App* command : {c.submit, c.status, c.ls}) command->add_flag("--json", c.json, "print JSON");
}

}  // namespace capsule::client

