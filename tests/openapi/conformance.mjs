// Checks that a real capsuled answers as docs/openapi.yaml says: starts one (its own temp state dir and socket), calls
// every route, and validates each answer's status, content type and JSON body against the document's schema for it.
// Usage (as root): node conformance.mjs docs/openapi.yaml build/bin/capsuled. Registered in ctest as
// openapi_conformance.
import { spawn } from "node:child_process";
import { chmodSync, mkdirSync, mkdtempSync, openSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import http from "node:http";
import { localRefs, readDocument, schemaValidator } from "./document.mjs";

const [docPath, capsuled] = process.argv.slice(2);
const { doc } = readDocument(docPath);
const problems = [];
const ajv = schemaValidator(doc, { strict: false }, problems);
const response = (answer) => (answer.$ref ? doc.components.responses[answer.$ref.split("/").pop()] : answer);

const dir = mkdtempSync("/tmp/capsule-openapi-");
chmodSync(dir, 0o711);  // sandboxes run as unprivileged ids and walk through it
const socket = `${dir}/s.sock`;
const workspace = `${dir}/ws`;
mkdirSync(workspace);
writeFileSync(`${workspace}/seed.txt`, "seed\n");
const log = openSync(`${dir}/capsuled.log`, "w");
const daemon = spawn(capsuled, ["--socket", socket, "--state-dir", `${dir}/state`, "--pool-boxes", "0"],
                     { stdio: ["ignore", log, log] });

function call(method, path, body, headers = {}) {
  return new Promise((resolve, reject) => {
    const data = body === undefined ? undefined : typeof body === "string" ? body : JSON.stringify(body);
    const type = data !== undefined && typeof body !== "string" ? { "content-type": "application/json" } : {};
    const request = http.request({ socketPath: socket, method, path, headers: { ...type, ...headers } }, (answer) => {
      let text = "";
      answer.setEncoding("latin1");
      answer.on("data", (chunk) => (text += chunk));
      answer.on("end", () => resolve({ status: answer.statusCode, type: answer.headers["content-type"] ?? "", text }));
    });
    request.on("error", reject);
    if (data !== undefined) request.write(data);
    request.end();
  });
}

let checked = 0;
// Calls `method path` and checks the answer against the operation `method template`; returns the parsed JSON (if any).
async function check(method, template, path, body, headers) {
  const answer = await call(method, path, body, headers);
  const where = `${method} ${path} -> ${answer.status}`;
  const documented = doc.paths[template]?.[method.toLowerCase()]?.responses?.[String(answer.status)];
  if (!documented) return void problems.push(`${where}: status not documented (${answer.text.slice(0, 200)})`);
  const content = response(documented).content ?? {};
  const type = Object.keys(content).find((t) => answer.type.split(";")[0].trim() === t.split(";")[0].trim());
  if (!type) return void problems.push(`${where}: content type ${answer.type} not documented`);
  checked++;
  if (type !== "application/json" && type !== "application/x-ndjson") return undefined;
  const lines = type === "application/json" ? [answer.text] : answer.text.split("\n").filter(Boolean);
  const values = lines.map((line) => JSON.parse(line));
  const validate = ajv.compile(localRefs(content[type].schema));
  for (const value of values) {
    if (validate(value)) continue;
    problems.push(`${where}: ${ajv.errorsText(validate.errors)}\n    ${JSON.stringify(value).slice(0, 300)}`);
  }
  return values[0];
}

// A run whose record holds every collector's section (test cases, class-file majors, coverage, tail_lines) and
// one that capsuled ends (termination): the answers' schemas are strict, so a field the document lacks fails here.
async function checkEvidenceRuns() {
  const junit = '<testsuite name="S"><testcase classname="C" name="ok" time="0.5"/>' +
                '<testcase classname="C" name="bad"><failure message="boom"/></testcase></testsuite>';
  const cobertura = '<coverage lines-valid="10" lines-covered="8" branches-valid="4" branches-covered="1"/>';
  const classHeader = (major) => `printf '\\312\\376\\272\\276\\0\\0\\0\\${major.toString(8)}'`;
  const script = [
    "mkdir -p out/classes", `echo '${junit}' > out/r.xml`, `echo '${cobertura}' > out/coverage.xml`,
    `${classHeader(61)} > out/classes/A.class`, `${classHeader(55)} > out/classes/B.class`,
    "echo junk > out/classes/C.class", "echo line1; echo line2",
  ].join("; ");
  const collect = { junit: ["out/*.xml"], tail_lines: 1, classfiles: ["out/**/*.class"], coverage: ["out/coverage.xml"] };
  const spec = { argv: ["/bin/sh", "-c", script], workspace: { path: workspace, mode: "cow" }, collect };
  const evidence = await check("POST", "/v1/runs", "/v1/runs?wait=true", spec);
  const expect = (what, seen, wanted) => {
    if (JSON.stringify(seen) !== JSON.stringify(wanted)) {
      problems.push(`evidence run: ${what} is ${JSON.stringify(seen)}, not ${JSON.stringify(wanted)}`);
    }
  };
  expect("result.stdout.tail_lines", evidence?.result?.stdout?.tail_lines, ["line2"]);
  expect("tests.state", evidence?.tests?.state, "reports");
  expect("tests.cases outcomes", evidence?.tests?.cases?.map((c) => c.outcome), ["passed", "failed"]);
  expect("classfiles.majors", evidence?.classfiles?.majors, { 55: 1, 61: 1 });
  expect("coverage.total.lines", evidence?.coverage?.total?.lines, { covered: 8, total: 10 });
  expect("collect_error", evidence?.collect_error, undefined);

  const limits = { wall_time: 500, kill_grace: 200 };
  const stubborn = { argv: ["/bin/sh", "-c", "trap '' TERM; sleep 30"], limits, collect: { tail_lines: 0 } };
  const ended = await check("POST", "/v1/runs", "/v1/runs?wait=true", stubborn);
  expect("timed-out run's termination", [ended?.state, ended?.result?.termination?.reason, ended?.result?.termination?.sent],
         ["timed_out", "wall_time", ["TERM", "KILL"]]);
}

// A stack whose answer holds every section: a service with a command and an exec probe, a tool service whose stage
// execs run as another user, a stage before deploy and one after it with a JUnit report.
async function checkStacks() {
  const junit = '<testsuite tests="1" failures="0" errors="0" skipped="0"><testcase name="a"/></testsuite>';
  const spec = {
    services: {
      app: { image: "host", command: ["sleep", "60"], ready: { exec: ["true"], interval: "50ms", deadline: "30s" } },
      driver: { image: "host", user: "1000:1000", depends_on: { app: "ready" } },
    },
    stages: [
      { name: "build", service: "driver", argv: ["true"] },
      { name: "deploy", deadline: "60s" },
      { name: "test", service: "driver", argv: ["/bin/sh", "-c", `echo '${junit}' > /tmp/r.xml`], junit: ["/tmp/r.xml"] },
    ],
    ttl: "10m",
    labels: { k: "v" },
  };
  const stack = await check("POST", "/v1/stacks", "/v1/stacks?wait=true", spec);
  const seen = [stack?.state, stack?.stages?.map((s) => s.state), stack?.stages?.[2]?.tests?.total];
  if (JSON.stringify(seen) !== JSON.stringify(["up", ["passed", "passed", "passed"], 1])) {
    problems.push(`stack: [state, stage states, test total] are ${JSON.stringify(seen)}\n    ${JSON.stringify(stack)?.slice(0, 600)}`);
  }
  const at = `/v1/stacks/${stack?.id}`;
  await check("GET", "/v1/sessions/{id}/execs", `/v1/sessions/${stack?.services?.driver?.session}/execs`);
  await check("POST", "/v1/stacks", "/v1/stacks", { services: { app: { image: "host", ready: { tcp: 0 } } } });
  await check("POST", "/v1/stacks", "/v1/stacks", "{");
  await check("GET", "/v1/stacks", "/v1/stacks?limit=5");
  await check("GET", "/v1/stacks", "/v1/stacks?limit=many");
  await check("GET", "/v1/stacks/{id}", at);
  await check("GET", "/v1/stacks/{id}", "/v1/stacks/absent");
  await check("DELETE", "/v1/stacks/{id}", at);
  await check("DELETE", "/v1/stacks/{id}", at);
  await check("DELETE", "/v1/stacks/{id}", "/v1/stacks/absent");
}

async function exercise() {
  await check("GET", "/v1/version", "/v1/version");
  await check("GET", "/v1/health", "/v1/health");
  await check("GET", "/metrics", "/metrics");

  const junit = '<testsuite tests="1" failures="0" errors="0" skipped="0"><testcase name="a"/></testsuite>';
  const spec = { argv: ["/bin/sh", "-c", `echo out; echo err >&2; mkdir -p out; echo '${junit}' > out/r.xml`],
                 workspace: { path: workspace, mode: "cow" }, collect: { junit: ["out/*.xml"] }, labels: { k: "v" } };
  const run = await check("POST", "/v1/runs", "/v1/runs?wait=true", spec);
  await check("POST", "/v1/runs", "/v1/runs", { argv: ["true"] });
  await check("POST", "/v1/runs", "/v1/runs", { argv: ["echo", "x"] }, { accept: "application/x-ndjson" });
  await check("POST", "/v1/runs", "/v1/runs?wait=true", { spec: run.spec, pinned: run.pinned });
  await checkEvidenceRuns();
  await check("POST", "/v1/runs", "/v1/runs", { argv: [] });
  await check("POST", "/v1/runs", "/v1/runs", "{");
  await check("POST", "/v1/runs", "/v1/runs", { argv: ["true"], image: "absent:1" });
  await check("GET", "/v1/runs", "/v1/runs?limit=2&label=k=v");
  await check("GET", "/v1/runs", "/v1/runs?state=bogus");
  await check("GET", "/v1/runs/{id}", `/v1/runs/${run.id}`);
  await check("GET", "/v1/runs/{id}", "/v1/runs/absent");
  await check("GET", "/v1/runs/{id}/logs", `/v1/runs/${run.id}/logs?stream=stderr`);
  await check("GET", "/v1/runs/{id}/logs", `/v1/runs/${run.id}/logs?tail=1`);
  await check("GET", "/v1/runs/{id}/logs", `/v1/runs/${run.id}/logs?stream=neither`);
  await check("POST", "/v1/runs/{id}/cancel", `/v1/runs/${run.id}/cancel`);
  const other = await check("POST", "/v1/runs", "/v1/runs?wait=true", { argv: ["/bin/sh", "-c", "echo other; exit 3"] });
  await check("GET", "/v1/runs/diff", `/v1/runs/diff?a=${run.id}&b=${other.id}`);
  await check("GET", "/v1/runs/diff", `/v1/runs/diff?a=${run.id}`);
  await check("GET", "/v1/runs/diff", `/v1/runs/diff?a=${run.id}&b=absent`);
  await check("GET", "/v1/runs/flakiness", `/v1/runs/flakiness?runs=${run.id},${other.id}`);
  await check("GET", "/v1/runs/flakiness", `/v1/runs/flakiness?runs=${run.id}`);
  await check("GET", "/v1/runs/{id}/bundle", `/v1/runs/${other.id}/bundle`);
  await check("GET", "/v1/runs/{id}/bundle", "/v1/runs/absent/bundle");
  await check("POST", "/v1/runs/import", "/v1/runs/import", { path: `${dir}/absent.tar` });
  await check("POST", "/v1/runs/import", "/v1/runs/import", { path: `${workspace}/seed.txt` });

  await check("GET", "/v1/images", "/v1/images");
  await check("POST", "/v1/images", "/v1/images", { source: `${dir}/absent`, format: "layout", ref: "a:b" });
  await check("POST", "/v1/images", "/v1/images", { source: "relative", format: "layout", ref: "a:b" });
  await check("GET", "/v1/images/{ref}", "/v1/images/absent%3A1");
  await check("DELETE", "/v1/images/{ref}", "/v1/images/absent%3A1");
  await check("POST", "/v1/images/{ref}/save", "/v1/images/absent%3A1/save", { path: `${dir}/image.tar` });
  await check("POST", "/v1/images/gc", "/v1/images/gc");
  if (doc.paths["/v1/toolchains"]) {
    await check("GET", "/v1/toolchains", "/v1/toolchains");
    await check("GET", "/v1/toolchains/resolve", "/v1/toolchains/resolve?java=17");
    await check("GET", "/v1/toolchains/resolve", "/v1/toolchains/resolve");
  }

  const snapshot = await check("POST", "/v1/snapshots", "/v1/snapshots", { dir: workspace });
  await check("POST", "/v1/snapshots", "/v1/snapshots", { dir: "relative" });
  await check("GET", "/v1/snapshots", "/v1/snapshots");
  await check("GET", "/v1/snapshots/{digest}", `/v1/snapshots/${snapshot.digest}?info=true`);
  await check("GET", "/v1/snapshots/{digest}", `/v1/snapshots/sha256:${"0".repeat(64)}`);
  await check("POST", "/v1/runs", "/v1/runs?wait=true", { argv: ["true"], workspace: { snapshot: snapshot.digest } });
  await check("POST", "/v1/runs", "/v1/runs?wait=true", { argv: ["true"], workspace, reproducible: true });
  await check("DELETE", "/v1/snapshots/{digest}", `/v1/snapshots/${snapshot.digest}`);

  const sessionSpec = { workspace: { path: workspace, mode: "cow" }, labels: { s: "1" } };
  const session = await check("POST", "/v1/sessions", "/v1/sessions", sessionSpec);
  const at = `/v1/sessions/${session.id}`;
  await check("GET", "/v1/sessions", "/v1/sessions");
  await check("GET", "/v1/sessions/{id}", at);
  const execRoute = "/v1/sessions/{id}/exec";
  const exec = await check("POST", execRoute, `${at}/exec`, { script: "echo hello > /workspace/new.txt; echo done" });
  await check("POST", execRoute, `${at}/exec`, { argv: ["echo", "x"] }, { accept: "application/x-ndjson" });
  const sleeper = { argv: ["sleep", "60"], background: true, stdin_open: true };
  const background = await check("POST", execRoute, `${at}/exec`, sleeper);
  const running = `${at}/execs/${background.id}`;
  const bytes = { "content-type": "application/octet-stream" };
  await check("POST", "/v1/sessions/{id}/execs/{exec_id}/stdin", `${running}/stdin`, "abc", bytes);
  await check("POST", "/v1/sessions/{id}/execs/{exec_id}/resize", `${running}/resize`, { rows: 10, cols: 10 });
  await check("POST", "/v1/sessions/{id}/execs/{exec_id}/signal", `${running}/signal`, { signal: "NONE" });
  await check("POST", "/v1/sessions/{id}/execs/{exec_id}/signal", `${running}/signal`, { signal: "KILL" });
  await check("GET", "/v1/sessions/{id}/execs", `${at}/execs`);
  await check("GET", "/v1/sessions/{id}/execs/{exec_id}", `${at}/execs/${exec.id}`);
  await check("GET", "/v1/sessions/{id}/execs/{exec_id}", `${at}/execs/absent`);
  await check("GET", "/v1/sessions/{id}/execs/{exec_id}/stream", `${at}/execs/${exec.id}/stream`);
  await check("PUT", "/v1/sessions/{id}/files", `${at}/files?path=/workspace/f.txt`, "data", bytes);
  const hostFile = { source: `${workspace}/seed.txt` };
  await check("PUT", "/v1/sessions/{id}/files", `${at}/files?path=/workspace/seed`, hostFile);
  await check("GET", "/v1/sessions/{id}/files", `${at}/files?path=/workspace/f.txt`);
  await check("GET", "/v1/sessions/{id}/files", `${at}/files?path=/workspace`);
  await check("GET", "/v1/sessions/{id}/files", `${at}/files?path=/absent`);
  await check("GET", "/v1/sessions/{id}/diff", `${at}/diff?patch=1`);
  await check("POST", "/v1/sessions/{id}/checkpoint", `${at}/checkpoint`, { name: "c1" });
  await check("POST", "/v1/sessions/{id}/checkpoint", `${at}/checkpoint`, { name: "c1" });
  await check("POST", "/v1/sessions/{id}/reset", `${at}/reset?to=c1`);
  await check("POST", "/v1/sessions/{id}/reset", `${at}/reset?to=absent`);
  await check("POST", execRoute, `${at}/exec`, { argv: ["id", "-u"], user: "1000:1000" });
  await check("DELETE", "/v1/sessions/{id}", at);
  await check("DELETE", "/v1/sessions/{id}", at);
  await check("GET", "/v1/sessions/{id}", "/v1/sessions/absent");

  await checkStacks();
  await check("DELETE", "/v1/runs/{id}", `/v1/runs/${run.id}`);
}

async function untilHealthy() {
  for (let i = 0; i < 600; i++) {
    if (daemon.exitCode !== null) throw new Error(`capsuled exited with ${daemon.exitCode}`);
    try {
      if ((await call("GET", "/v1/health")).status === 200) return;
    } catch {}
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
  throw new Error("capsuled did not answer");
}

let failed = false;
try {
  await untilHealthy();
  await exercise();
} catch (e) {
  problems.push(`stopped: ${e.stack}`);
}
const exited = daemon.exitCode !== null ? Promise.resolve(daemon.exitCode)
                                         : new Promise((resolve) => daemon.on("exit", resolve));
daemon.kill("SIGTERM");
const code = await exited;
if (code !== 0) problems.push(`capsuled exited with ${code}`);
const mounts = readFileSync("/proc/self/mountinfo", "utf8").split("\n").map((line) => line.split(" ")[4])
  .filter((point) => point?.startsWith(dir));
for (const mount of mounts) problems.push(`left mounted: ${mount}`);
if (problems.length > 0) {
  failed = true;
  console.error(`${problems.length} problem(s):\n- ${problems.join("\n- ")}`);
  console.error(`---- capsuled log ----\n${readFileSync(`${dir}/capsuled.log`, "utf8")}`);
}
if (mounts.length === 0) rmSync(dir, { recursive: true, force: true });
console.log(`${checked} answers checked against ${docPath}: ${failed ? "FAILED" : "all as documented"}`);
process.exit(failed ? 1 : 0);
