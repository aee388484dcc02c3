// `capsule batch` with the local engine against a real capsuled: results by key in the input's order, a second
// submission served from the manifest cache (nothing runs), --rerun, a worker killed mid-batch and resumed
// without re-running finished keys, cancel, workspaces pinned at submit, bad input refused by line, and a batch
// compared key by key with an earlier one (--baseline-batch) or with one run (--baseline).
#include <signal.h>

#include <fstream>

#include "tests/support/capsuled_fixture.h"

namespace capsule::testing {
namespace {

class CapsuledBatch : public Capsuled {
 protected:
  void SetUp() override {
    Capsuled::SetUp();
    root_ = dir_ / "batches";
  }
  Cli capsule(std::vector<std::string> args) {
    args.insert(args.begin(), {"--socket", socket_});
    return run_capsule_cli(dir_, args, {"CAPSULE_BATCH_ROOT=" + root_.string()});
  }
  fs::path write_specs(const std::string& name, const std::vector<json>& specs) {
    std::string text;
    for (const json& spec : specs) text += spec.dump() + "\n";
    write_file(dir_ / name, text);
    return dir_ / name;
  }
  std::string submit(const fs::path& file, std::vector<std::string> flags = {}) {
    flags.insert(flags.begin(), {"batch", "submit", file.string()});
    const Cli submitted = capsule(flags);
    EXPECT_EQ(submitted.code, 0) << submitted.err;
    return submitted.out.substr(0, submitted.out.find('\n'));
  }
  // The results JSONL, one object per line.
  std::vector<json> results(const std::string& id) {
    const Cli listed = capsule({"batch", "results", id});
    EXPECT_EQ(listed.code, 0) << listed.err;
    std::vector<json> out;
    std::istringstream lines(listed.out);
    for (std::string line; std::getline(lines, line);) out.push_back(json::parse(line));
    return out;
  }
  json status(const std::string& id) {
    const Cli shown = capsule({"batch", "status", id, "--json"});
    EXPECT_EQ(shown.code, 0) << shown.err;
    return json::parse(shown.out);
  }
  // Runs capsuled knows of for a label filter ("k=v").
  std::size_t runs_labelled(const std::string& label) { return list("?label=" + label + "&limit=500").size(); }

  fs::path root_;
};

json keyed(const std::string& key, const std::string& script, const json& labels = json::object()) {
  json spec = sh(script);
  spec["key"] = key;
  if (!labels.empty()) spec["labels"] = labels;
  return spec;
}

TEST_F(CapsuledBatch, ResultsByKeyAndASecondSubmissionRunsNothing) {
  start();
  std::vector<json> specs;
  for (int i = 0; i < 20; ++i) {
    const std::string fails = i % 4 == 3 ? "printf 'e1\\ne2\\ne3\\ne4\\ne5\\ne6\\ne7\\n' >&2; exit 3" : "exit 0";
    specs.push_back(keyed("k" + std::to_string(i), "echo out-" + std::to_string(i) + "; " + fails,
                          {{"group", i % 2 ? "odd" : "even"}}));
  }
  const fs::path file = write_specs("specs.jsonl", specs);
  const std::string id = submit(file, {"--concurrency", "3"});
  ASSERT_EQ(capsule({"batch", "wait", id}).code, 0);

  const std::vector<json> first = results(id);
  ASSERT_EQ(first.size(), 20u);
  for (int i = 0; i < 20; ++i) {
    const json& r = first[static_cast<std::size_t>(i)];
    EXPECT_EQ(r["key"], "k" + std::to_string(i));
    EXPECT_EQ(r["state"], i % 4 == 3 ? "failed" : "succeeded") << r.dump();
    EXPECT_EQ(r["exit_code"], i % 4 == 3 ? 3 : 0);
    EXPECT_FALSE(r["node"].get<std::string>().empty());
    EXPECT_EQ(r["labels"]["group"], i % 2 ? "odd" : "even");
    EXPECT_FALSE(r.contains("cached_from"));
    // The run is capsuled's, labelled with the batch and the key, and the record is the one it stores.
    const json run = get_run(r["run_id"]);
    EXPECT_EQ(run["labels"]["capsule.batch"], id);
    EXPECT_EQ(run["labels"]["capsule.batch.key"], r["key"]);
    EXPECT_EQ(run["result"]["exit_code"], r["exit_code"]);
    EXPECT_NE(r["run"]["result"]["stdout"].dump().find("out-" + std::to_string(i)), std::string::npos);
  }
  EXPECT_EQ(runs_labelled("capsule.batch=" + id), 20u);
  json summary = status(id);
  EXPECT_EQ(summary["state"], "finished");
  EXPECT_EQ(summary["by_state"], (json{{"succeeded", 15}, {"failed", 5}}));
  EXPECT_EQ(summary["by_label"]["group=odd"], (json{{"succeeded", 5}, {"failed", 5}}));
  EXPECT_EQ(summary["failures"].size(), 5u);
  EXPECT_EQ(summary["duration_ms"]["count"], 20);
  // Each failure with the last lines of its stderr, from the run's record, not only "exited with code 3".
  EXPECT_EQ(summary["failures"][0]["output_tail"], (json{{"stream", "stderr"}, {"lines", {"e3", "e4", "e5", "e6", "e7"}}}))
      << summary["failures"][0].dump();
  const Cli text = capsule({"batch", "summary", id});
  EXPECT_NE(text.out.find("  k3: failed (exit 3)"), std::string::npos) << text.out;
  EXPECT_NE(text.out.find("    stderr| e7\n"), std::string::npos) << text.out;

  // The same specs again: every manifest has a result, so nothing runs and the verdicts are the same.
  const std::string again = submit(file);
  ASSERT_EQ(capsule({"batch", "wait", again}).code, 0);
  const std::vector<json> second = results(again);
  ASSERT_EQ(second.size(), 20u);
  for (std::size_t i = 0; i < 20; ++i) {
    EXPECT_EQ(second[i]["key"], first[i]["key"]);
    EXPECT_EQ(second[i]["state"], first[i]["state"]);
    EXPECT_EQ(second[i]["exit_code"], first[i]["exit_code"]);
    EXPECT_EQ(second[i]["cached_from"]["run_id"], first[i]["run_id"]);
  }
  EXPECT_EQ(runs_labelled("capsule.batch=" + again), 0u);
  EXPECT_EQ(status(again)["cached"], 20);

  // --rerun runs them all again; a changed label alone does not change a manifest, a changed command does.
  const std::string rerun = submit(file, {"--rerun", "--concurrency", "4"});
  ASSERT_EQ(capsule({"batch", "wait", rerun}).code, 0);
  EXPECT_EQ(runs_labelled("capsule.batch=" + rerun), 20u);
  const std::string changed = submit(write_specs("changed.jsonl", {keyed("a", "echo out-0; exit 0", {{"x", "y"}}),
                                                                    keyed("b", "echo other")}));
  ASSERT_EQ(capsule({"batch", "wait", changed}).code, 0);
  const std::vector<json> mixed = results(changed);
  ASSERT_EQ(mixed.size(), 2u);
  EXPECT_TRUE(mixed[0].contains("cached_from")) << mixed[0].dump();
  EXPECT_EQ(mixed[0]["labels"], (json{{"x", "y"}}));  // the spec's own labels, not the cached run's
  EXPECT_FALSE(mixed[1].contains("cached_from"));

  const Cli html = capsule({"batch", "summary", id, "--format", "html", "-o", (dir_ / "s.html").string()});
  EXPECT_EQ(html.code, 0) << html.err;
  const std::string page = slurp(dir_ / "s.html");
  EXPECT_NE(page.find("<svg"), std::string::npos);
  EXPECT_NE(page.find("group=odd failed"), std::string::npos);
  const Cli ls = capsule({"batch", "ls"});
  EXPECT_NE(ls.out.find(id + "  local  finished  20/20"), std::string::npos) << ls.out;
}

TEST_F(CapsuledBatch, AWorkerKilledMidBatchIsResumedWithoutRerunningFinishedKeys) {
  start();
  std::vector<json> specs;
  for (int i = 0; i < 4; ++i) specs.push_back(keyed("quick" + std::to_string(i), "echo quick " + std::to_string(i)));
  specs.push_back(keyed("slow", "sleep 3; echo slow"));
  for (int i = 0; i < 3; ++i) specs.push_back(keyed("after" + std::to_string(i), "echo after " + std::to_string(i)));
  const std::string id = submit(write_specs("specs.jsonl", specs), {"--concurrency", "1"});

  // Kill the worker (as a crashed node would be) while "slow" runs.
  ASSERT_TRUE(eventually([&] { return runs_labelled("capsule.batch.key=slow") == 1; }));
  const json launches = json::parse(slurp(root_ / id / "launches.json"));
  ASSERT_EQ(launches.size(), 1u);
  ASSERT_EQ(::kill(launches[0]["pid"].get<int>(), SIGKILL), 0);
  Cli waited = capsule({"batch", "wait", id});
  EXPECT_EQ(waited.code, 1);
  EXPECT_NE(waited.out.find("incomplete, 4 of 8 done"), std::string::npos) << waited.out;
  std::map<std::string, std::string> before;
  for (const json& r : results(id)) before[r["key"]] = r["run_id"];
  EXPECT_EQ(before.size(), 4u);

  const Cli resumed = capsule({"batch", "resume", id});
  ASSERT_EQ(resumed.code, 0) << resumed.err;
  waited = capsule({"batch", "wait", id});
  EXPECT_EQ(waited.code, 0) << waited.out;
  const std::vector<json> after = results(id);
  ASSERT_EQ(after.size(), 8u);
  for (const json& r : after) {
    if (before.count(r["key"])) {
      EXPECT_EQ(r["run_id"], before[r["key"]]) << "re-ran " << r["key"];
    }
    EXPECT_EQ(r["state"], "succeeded") << r.dump();
  }
  for (int i = 0; i < 4; ++i) EXPECT_EQ(runs_labelled("capsule.batch.key=quick" + std::to_string(i)), 1u);
  EXPECT_EQ(runs_labelled("capsule.batch.key=slow"), 2u);  // the killed worker's run had no result
  EXPECT_EQ(capsule({"batch", "resume", id}).code, 1);    // nothing left to do
  wait_finished(list("?label=capsule.batch.key=slow")[1]["id"]);
}

TEST_F(CapsuledBatch, CancelStopsTheWorkerAndItsRunAndResumeFinishes) {
  start();
  const std::string id =
      submit(write_specs("specs.jsonl", {keyed("long", "sleep 60"), keyed("next", "true")}), {"--concurrency", "1"});
  ASSERT_TRUE(eventually([&] {
    const json runs = list("?label=capsule.batch.key=long");
    return runs.size() == 1 && runs[0]["state"] == "running";
  }));
  const std::string run_id = list("?label=capsule.batch.key=long")[0]["id"];
  const Cli cancelled = capsule({"batch", "cancel", id});
  EXPECT_EQ(cancelled.code, 0) << cancelled.err;
  EXPECT_EQ(wait_finished(run_id)["state"], "cancelled");
  const Cli waited = capsule({"batch", "wait", id});
  EXPECT_EQ(waited.code, 1);
  EXPECT_EQ(status(id)["state"], "cancelled");
  EXPECT_EQ(status(id)["done"], 0);  // a cancelled run is no result, and "next" was never started
  EXPECT_EQ(runs_labelled("capsule.batch.key=next"), 0u);
}

TEST_F(CapsuledBatch, AWorkspaceIsPinnedAtSubmitAndTheManifestFollowsItsBytes) {
  start();
  const fs::path workspace = make_dir("ws");
  write_file(workspace / "a.txt", "one\n");
  json spec = keyed("read", "cat /workspace/a.txt");
  spec["workspace"] = {{"path", workspace.string()}};
  const fs::path file = write_specs("specs.jsonl", {spec});
  const std::string id = submit(file);
  const json pinned = json::parse(slurp(root_ / id / "specs.jsonl"));
  EXPECT_EQ(pinned["spec"]["workspace"]["snapshot"].get<std::string>().rfind("sha256:", 0), 0u) << pinned.dump();
  write_file(workspace / "a.txt", "two\n");  // after submit: the batch runs what was submitted
  ASSERT_EQ(capsule({"batch", "wait", id}).code, 0);
  EXPECT_NE(results(id)[0]["run"]["result"]["stdout"].dump().find("one"), std::string::npos);

  const std::string again = submit(file);  // new bytes, new manifest: it runs
  ASSERT_EQ(capsule({"batch", "wait", again}).code, 0);
  const json r = results(again)[0];
  EXPECT_FALSE(r.contains("cached_from"));
  EXPECT_NE(r["run"]["result"]["stdout"].dump().find("two"), std::string::npos);
  EXPECT_NE(r["manifest"], results(id)[0]["manifest"]);
}

TEST_F(CapsuledBatch, BadInputIsRefusedByLineAndARefusedSpecIsAResult) {
  start();
  write_file(dir_ / "bad.jsonl", "{\"argv\": [\"true\"]}\n# a comment\n\n{\"argv\": [\"true\"\n");
  Cli refused = capsule({"batch", "submit", (dir_ / "bad.jsonl").string()});
  EXPECT_EQ(refused.code, 2);
  EXPECT_NE(refused.err.find("bad.jsonl:4: not JSON"), std::string::npos) << refused.err;
  write_file(dir_ / "dup.jsonl", "{\"key\": \"x\", \"argv\": [\"true\"]}\n{\"key\": \"x\", \"argv\": [\"true\"]}\n");
  refused = capsule({"batch", "submit", (dir_ / "dup.jsonl").string()});
  EXPECT_EQ(refused.code, 2);
  EXPECT_NE(refused.err.find("dup.jsonl:2: key 'x' is also the key of dup.jsonl:1"), std::string::npos) << refused.err;
  write_file(dir_ / "key.jsonl", "{\"key\": \"a b\", \"argv\": [\"true\"]}\n[1]\n");
  refused = capsule({"batch", "submit", (dir_ / "key.jsonl").string()});
  EXPECT_EQ(refused.code, 2);
  EXPECT_NE(refused.err.find("key.jsonl:1: \"key\" must be"), std::string::npos) << refused.err;
  refused = capsule({"batch", "submit", (dir_ / "nothing-here").string()});
  EXPECT_EQ(refused.code, 2);
  EXPECT_FALSE(fs::exists(root_) && !fs::is_empty(root_ / "cache"));

  refused = capsule({"batch", "status", "../../etc"});
  EXPECT_EQ(refused.code, 1);
  EXPECT_NE(refused.err.find("not a batch id"), std::string::npos) << refused.err;
  refused = capsule({"batch", "status", "b-20260101-000000-00000000"});
  EXPECT_NE(refused.err.find("no batch b-20260101-000000-00000000"), std::string::npos) << refused.err;
  refused = capsule({"batch", "submit", (dir_ / "dup.jsonl").string(), "--engine", "kubernetes"});
  EXPECT_EQ(refused.code, 2);

  // capsuled refuses one spec (an unknown field): that spec's result says why; the others run.
  const std::string id = submit(write_specs("mixed.jsonl", {keyed("good", "true"), json{{"key", "odd"}, {"argv", {"true"}}, {"colour", "red"}}}));
  ASSERT_EQ(capsule({"batch", "wait", id}).code, 0);
  const std::vector<json> got = results(id);
  ASSERT_EQ(got.size(), 2u);
  EXPECT_EQ(got[0]["state"], "succeeded");
  EXPECT_EQ(got[1]["state"], "rejected");
  EXPECT_NE(got[1]["reason"].get<std::string>().find("invalid_spec"), std::string::npos) << got[1].dump();
  EXPECT_EQ(health()["status"], "ok");
}

TEST_F(CapsuledBatch, EngineNoneStartsNothingAndWorkRunsAChunkByHand) {
  start();
  const std::string id = submit(write_specs("specs.jsonl", {keyed("a", "echo a"), keyed("b", "echo b"), keyed("c", "echo c")}),
                                {"--engine", "none", "--chunk-size", "2"});
  EXPECT_EQ(status(id)["state"], "incomplete");
  EXPECT_EQ(runs_labelled("capsule.batch=" + id), 0u);
  EXPECT_EQ(capsule({"batch", "resume", id}).code, 1);
  EXPECT_EQ(capsule({"batch", "work", id, "--chunk", "1"}).code, 0);  // what an Indexed Job's pod 1 runs
  EXPECT_EQ(status(id)["done"], 1);
  const Cli beyond = capsule({"batch", "work", id, "--chunk", "2"});
  EXPECT_EQ(beyond.code, 1);
  EXPECT_NE(beyond.err.find("has 2 chunks, no chunk 2"), std::string::npos) << beyond.err;
  EXPECT_EQ(capsule({"batch", "work", id, "--chunk", "0"}).code, 0);
  EXPECT_EQ(status(id)["state"], "finished");
  EXPECT_EQ(runs_labelled("capsule.batch=" + id), 3u);
}

// A spec whose run writes a JUnit report of the test cases `cases` names ("a b c": pkg.T.a, pkg.T.b, pkg.T.c, all
// passing) into its copy-on-write workspace, and collects it.
json junit_spec(const std::string& key, const fs::path& workspace, const std::string& cases) {
  json spec = keyed(key, "cd /workspace && { printf '<testsuite name=\"pkg.T\">'; for c in $CASES; do "
                         "printf '<testcase classname=\"pkg.T\" name=\"%s\"/>' \"$c\"; done; "
                         "printf '</testsuite>\\n'; } > TEST-pkg.T.xml");
  spec["workspace"] = {{"path", workspace.string()}};
  spec["env"] = {{"CASES", cases}};
  spec["collect"] = {{"junit", {"TEST-*.xml"}}};
  return spec;
}

// Re-running a batch of migrations: each project is compared with its own earlier run (the result of its key in
// the earlier batch). One that lost cases fails its verdict and the summary says so, though its run succeeded;
// --allow-removed lists the loss without failing; --baseline gives one run to every spec without one of its own.
// Refused before anything is written: a spec without collect.junit, an unknown batch, another count of specs, a
// key the earlier batch has no run for.
TEST_F(CapsuledBatch, ASecondBatchIsComparedKeyByKeyWithTheFirst) {
  start();
  const fs::path one = make_dir("project-one"), two = make_dir("project-two");
  const std::string first = submit(write_specs("before.jsonl", {junit_spec("one", one, "a b c"), junit_spec("two", two, "a b")}));
  ASSERT_EQ(capsule({"batch", "wait", first}).code, 0);
  const std::vector<json> before = results(first);
  ASSERT_EQ(before.size(), 2u);
  ASSERT_EQ(before[0]["run"]["tests"]["total"], 3) << before[0]["run"]["tests"];
  ASSERT_EQ(before[1]["run"]["tests"]["total"], 2) << before[1]["run"]["tests"];

  // "one" lost b and c (a migration that excluded tests), "two" gained one.
  const fs::path after = write_specs("after.jsonl", {junit_spec("one", one, "a"), junit_spec("two", two, "a b d")});
  const std::string second = submit(after, {"--baseline-batch", first});
  ASSERT_EQ(capsule({"batch", "wait", second}).code, 0);
  const std::vector<json> compared = results(second);
  ASSERT_EQ(compared.size(), 2u);
  EXPECT_EQ(compared[0]["state"], "succeeded");
  const json& lost = compared[0]["run"]["baseline"];
  EXPECT_EQ(lost["run"], before[0]["run_id"]) << lost;
  EXPECT_EQ(lost["verdict"], "regressed") << lost;
  EXPECT_EQ(lost["reasons"], json({"tests_removed"})) << lost;
  EXPECT_EQ(lost["removed"]["count"], 2) << lost;
  EXPECT_EQ(compared[0]["run"]["spec"]["baseline"], (json{{"run", before[0]["run_id"]}, {"allow_removed", false}}));
  const json& kept = compared[1]["run"]["baseline"];
  EXPECT_EQ(kept["run"], before[1]["run_id"]) << kept;
  EXPECT_EQ(kept["verdict"], "passed") << kept;
  json summary = status(second);
  EXPECT_EQ(summary["by_state"], (json{{"succeeded", 2}}));
  EXPECT_EQ(summary["verdict_failed"], 1);
  ASSERT_EQ(summary["failures"].size(), 1u) << summary["failures"];
  EXPECT_EQ(summary["failures"][0]["key"], "one");
  EXPECT_EQ(summary["failures"][0]["verdict"], "failed");
  EXPECT_EQ(summary["failures"][0]["reason"],
            "baseline " + before[0]["run_id"].get<std::string>() + " regressed (tests_removed): 2 removed, 0 newly skipped");
  const Cli text = capsule({"batch", "summary", second});
  EXPECT_NE(text.out.find("fails it): 1\n"), std::string::npos) << text.out;
  EXPECT_NE(text.out.find("  one: succeeded (exit 0): baseline "), std::string::npos) << text.out;

  const std::string allowed = submit(after, {"--baseline-batch", first, "--allow-removed"});
  ASSERT_EQ(capsule({"batch", "wait", allowed}).code, 0);
  const std::vector<json> listed = results(allowed);
  ASSERT_EQ(listed.size(), 2u);
  EXPECT_EQ(listed[0]["run"]["baseline"]["verdict"], "passed") << listed[0]["run"]["baseline"];
  EXPECT_EQ(listed[0]["run"]["baseline"]["allowed"], json({"tests_removed"})) << listed[0]["run"]["baseline"];
  EXPECT_EQ(status(allowed)["verdict_failed"], 0);

  // --baseline RUN: every spec without a baseline of its own is compared with that one run.
  json own = junit_spec("own", two, "a");
  own["baseline"] = {{"run", before[1]["run_id"]}};
  const std::string against_one = submit(write_specs("one-run.jsonl", {junit_spec("x", one, "a b c"), own}),
                                         {"--baseline", before[0]["run_id"]});
  ASSERT_EQ(capsule({"batch", "wait", against_one}).code, 0);
  const std::vector<json> against = results(against_one);
  ASSERT_EQ(against.size(), 2u);
  EXPECT_EQ(against[0]["run"]["baseline"]["run"], before[0]["run_id"]);
  EXPECT_EQ(against[0]["run"]["baseline"]["verdict"], "passed") << against[0]["run"]["baseline"];
  EXPECT_EQ(against[1]["run"]["baseline"]["run"], before[1]["run_id"]) << "its own baseline is kept";
  EXPECT_EQ(against[1]["run"]["baseline"]["verdict"], "regressed") << against[1]["run"]["baseline"];

  const auto refused = [&](const fs::path& file, std::vector<std::string> flags, const std::string& message) {
    flags.insert(flags.begin(), {"batch", "submit", file.string()});
    const Cli cli = capsule(flags);
    EXPECT_EQ(cli.code, 2) << cli.err;
    EXPECT_NE(cli.err.find(message), std::string::npos) << cli.err;
  };
  const std::size_t batches = std::distance(fs::directory_iterator(root_), fs::directory_iterator());
  json no_junit = keyed("two", "true");
  refused(write_specs("no-junit.jsonl", {junit_spec("one", one, "a"), no_junit}), {"--baseline-batch", first},
          "no-junit.jsonl:2: --baseline-batch needs collect.junit");
  refused(after, {"--baseline-batch", "b-20260101-000000-00000000"},
          "--baseline-batch: no batch b-20260101-000000-00000000 in " + root_.string());
  refused(write_specs("fewer.jsonl", {junit_spec("one", one, "a")}), {"--baseline-batch", first},
          "--baseline-batch " + first + " has 2 specs, this input 1");
  refused(write_specs("renamed.jsonl", {junit_spec("one", one, "a"), junit_spec("three", two, "a")}),
          {"--baseline-batch", first}, "renamed.jsonl:2: key 'three' has no result in batch " + first);
  refused(after, {"--baseline", "r1", "--baseline-batch", first}, "excludes");
  refused(after, {"--allow-removed"}, "--allow-removed needs --baseline or --baseline-batch");
  EXPECT_EQ(std::distance(fs::directory_iterator(root_), fs::directory_iterator()), batches) << "nothing written";

  // A key whose earlier spec was refused has no run to compare with.
  json odd = junit_spec("two", two, "a");
  odd["colour"] = "red";
  const std::string partly = submit(write_specs("partly.jsonl", {junit_spec("one", one, "a"), odd}));
  ASSERT_EQ(capsule({"batch", "wait", partly}).code, 0);
  refused(after, {"--baseline-batch", partly}, "after.jsonl:2: key 'two' ended rejected without a run in batch " + partly);
}

}  // namespace
}  // namespace capsule::testing
