# Tests of client/python/capsule.py: error mapping offline, the Session and stack APIs against a fake daemon on a Unix
# socket, then every Client method against a real capsuled ($CAPSULED, default build/bin/capsuled; skipped if missing).
import base64
import hashlib
import http.server
import json
import os
import shutil
import signal
import socketserver
import subprocess
import sys
import tempfile
import threading
import time
import unittest
import uuid

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(ROOT, "client", "python"))

import capsule  # noqa: E402

CAPSULED = os.environ.get("CAPSULED") or os.path.join(ROOT, "build", "bin", "capsuled")


class OfflineTest(unittest.TestCase):
    def test_error_bodies_map_to_typed_errors(self):
        body = b'{"error": {"code": "invalid_spec", "message": "limits.memory: bad"}}'
        for status, kind in [(400, capsule.BadRequest), (404, capsule.NotFound), (409, capsule.Conflict),
                             (429, capsule.QueueFull), (503, capsule.DaemonUnavailable), (500, capsule.CapsuleError)]:
            error = capsule.Client._error(status, body)
            self.assertIs(type(error), kind)
            self.assertEqual((error.status, error.code, error.message), (status, "invalid_spec", "limits.memory: bad"))
        plain = capsule.Client._error(502, b"bad gateway")
        self.assertEqual((plain.code, plain.message), ("http_502", "bad gateway"))

    def test_missing_socket_is_daemon_unavailable(self):
        client = capsule.Client("/nonexistent-capsule-dir/capsule.sock")
        with self.assertRaises(capsule.DaemonUnavailable) as caught:
            client.health()
        self.assertIn("cannot connect to capsuled at /nonexistent-capsule-dir/capsule.sock", str(caught.exception))
        self.assertIsInstance(caught.exception, capsule.CapsuleError)

    def test_argv_must_be_a_list(self):
        with self.assertRaises(TypeError):
            capsule.Client("/nonexistent").run("echo hi")


class FakeDaemon(socketserver.ThreadingMixIn, socketserver.UnixStreamServer):
    """Answers each (method, path) from `answers` (status, headers, body bytes) and records every request as
    (method, target, headers, body)."""
    daemon_threads = True

    def __init__(self, path):
        self.answers = {}
        self.requests = []

        class Handler(http.server.BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args):
                pass

            def handle_one_request(self):
                self.close_connection = True
                super().handle_one_request()

            def answer(handler):
                length = int(handler.headers.get("Content-Length") or 0)
                body = handler.rfile.read(length) if length else b""
                self.requests.append((handler.command, handler.path, dict(handler.headers), body))
                key = (handler.command, handler.path.split("?")[0])
                status, headers, payload = self.answers.get(
                    key, (404, {}, b'{"error": {"code": "not_found", "message": "no such route"}}'))
                handler.send_response(status)
                for name, value in headers.items():
                    handler.send_header(name, value)
                handler.send_header("Content-Length", str(len(payload)))
                handler.end_headers()
                handler.wfile.write(payload)

            do_GET = do_POST = do_PUT = do_DELETE = answer

        super().__init__(path, Handler)

    def json_answer(self, method, path, obj, status=200):
        self.answers[(method, path)] = (status, {"Content-Type": "application/json"}, json.dumps(obj).encode())


SESSION = {"id": "s1", "state": "ready", "checkpoints": [], "execs": {"total": 0, "running": 0}}


class FakeDaemonCase(unittest.TestCase):
    """A FakeDaemon on a socket in a new temporary directory, a Client of it, and the last request it got."""

    def setUp(self):
        self.tmp = tempfile.mkdtemp(prefix="capsule-py-fake-")
        self.server = FakeDaemon(os.path.join(self.tmp, "s.sock"))
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()
        self.client = capsule.Client(self.server.server_address)

    def tearDown(self):
        self.server.shutdown()
        self.server.server_close()
        shutil.rmtree(self.tmp, ignore_errors=True)

    def last(self):
        method, target, headers, body = self.server.requests[-1]
        return method, target, headers, body


class FakeDaemonSessionTest(FakeDaemonCase):
    def setUp(self):
        super().setUp()
        self.server.json_answer("POST", "/v1/sessions", SESSION, 201)

    def test_create_sends_the_spec_and_returns_a_session(self):
        session = self.client.create_session(image="jdk17", protect=["src/test/**"], ttl="2h")
        self.assertEqual((session.id, session.info["state"]), ("s1", "ready"))
        method, target, headers, body = self.last()
        self.assertEqual((method, target, headers["Content-Type"]), ("POST", "/v1/sessions", "application/json"))
        self.assertEqual(json.loads(body), {"image": "jdk17", "protect": ["src/test/**"], "ttl": "2h"})

    def test_list_and_get(self):
        self.server.json_answer("GET", "/v1/sessions", {"sessions": [SESSION, dict(SESSION, id="s0")]})
        self.assertEqual([s.id for s in self.client.list_sessions(state="ready", label="k=v")], ["s1", "s0"])
        self.assertEqual(self.last()[1], "/v1/sessions?state=ready&label=k=v&limit=50")
        self.client.list_sessions(limit=2, after="s0")
        self.assertEqual(self.last()[1], "/v1/sessions?limit=2&after=s0")
        self.server.json_answer("GET", "/v1/sessions/s1", dict(SESSION, state="frozen"))
        self.assertEqual(self.client.get_session("s1").info["state"], "frozen")

    def test_exec_argv_script_and_stdin(self):
        session = self.client.create_session()
        run = {"id": "e1", "state": "succeeded", "result": {"exit_code": 0}}
        self.server.json_answer("POST", "/v1/sessions/s1/exec", run)
        self.assertEqual(session.exec(["make", "test"], timeout="10m", stdin="in\n"), run)
        self.assertEqual(json.loads(self.last()[3]), {"argv": ["make", "test"], "timeout": "10m", "stdin": "in\n"})
        session.exec(script="cd src\nmake", stdin=b"\x00\xff", idle_timeout="5s")
        self.assertEqual(json.loads(self.last()[3]),
                         {"script": "cd src\nmake", "stdin_b64": "AP8=", "idle_timeout": "5s"})
        with self.assertRaises(TypeError):
            session.exec("make test")
        with self.assertRaises(TypeError):
            session.exec(["true"], script="true")
        with self.assertRaises(TypeError):
            session.exec()

    def test_exec_collect_and_the_network_switch_send_the_api_shapes(self):
        session = self.client.create_session()
        self.server.json_answer("POST", "/v1/sessions/s1/exec", {"id": "e1", "state": "succeeded"})
        collect = {"junit": ["build/junit.xml"], "coverage": ["build/coverage.xml"], "tail_lines": 5}
        session.exec(script="make test", collect=collect, timeout="10m")
        self.assertEqual(json.loads(self.last()[3]), {"script": "make test", "collect": collect, "timeout": "10m"})
        self.server.answers[("POST", "/v1/sessions/s1/exec")] = (
            200, {"Content-Type": "application/x-ndjson"}, b'{"event": "finished", "run": {"id": "e2"}}\n')
        list(session.exec_stream(["pytest"], collect={"junit": ["*.xml"]}))
        self.assertEqual(json.loads(self.last()[3]), {"argv": ["pytest"], "collect": {"junit": ["*.xml"]}})

        self.server.json_answer("POST", "/v1/sessions/s1/network", dict(SESSION, network="none"))
        self.assertEqual(session.network("none")["network"], "none")
        self.assertEqual(self.last()[:2], ("POST", "/v1/sessions/s1/network"))
        self.assertEqual(json.loads(self.last()[3]), {"mode": "none"})
        self.assertEqual(session.info["network"], "none")
        self.server.answers[("POST", "/v1/sessions/s1/network")] = (
            409, {}, b'{"error": {"code": "execs_running", "message": "1 execs queued or running"}}')
        with self.assertRaises(capsule.Conflict) as caught:
            session.network("proxy")
        self.assertEqual(caught.exception.code, "execs_running")

    def test_exec_stream_yields_decoded_events(self):
        session = self.client.create_session()
        lines = [{"event": "started", "id": "e1"},
                 {"event": "stdout", "id": "e1", "data_b64": base64.b64encode(b"out\n").decode()},
                 {"event": "finished", "run": {"id": "e1", "state": "idle_timed_out"}}]
        self.server.answers[("POST", "/v1/sessions/s1/exec")] = (
            200, {"Content-Type": "application/x-ndjson"}, b"".join(json.dumps(e).encode() + b"\n" for e in lines))
        events = list(session.exec_stream(["sh", "-c", "echo out"]))
        self.assertEqual([e["event"] for e in events], ["started", "stdout", "finished"])
        self.assertEqual(events[1]["bytes"], b"out\n")
        self.assertEqual(self.last()[2]["Accept"], "application/x-ndjson")

    def test_files_in_and_out(self):
        session = self.client.create_session()
        self.server.json_answer("PUT", "/v1/sessions/s1/files", {})
        session.put_file("/workspace/a b.txt", b"\x00bytes", mode=0o755)
        method, target, headers, body = self.last()
        self.assertEqual((method, target), ("PUT", "/v1/sessions/s1/files?path=%2Fworkspace%2Fa+b.txt&mode=0755"))
        self.assertEqual((headers["Content-Type"], body), ("application/octet-stream", b"\x00bytes"))

        local = os.path.join(self.tmp, "tree")
        os.mkdir(local)
        session.put_file("/workspace/tree", from_path=os.path.relpath(local))
        self.assertEqual(self.last()[2]["Content-Type"], "application/json")
        self.assertEqual(json.loads(self.last()[3]), {"source": local})
        session.put_tar("/workspace/tree", b"tarbytes")
        self.assertEqual((self.last()[2]["Content-Type"], self.last()[3]), ("application/x-tar", b"tarbytes"))
        with self.assertRaises(TypeError):
            session.put_file("/x")
        with self.assertRaises(TypeError):
            session.put_file("/x", b"data", from_path=local)

        self.server.answers[("GET", "/v1/sessions/s1/files")] = (200, {"Content-Type": "application/octet-stream"},
                                                                 b"content\xff")
        self.assertEqual(session.get_file("/workspace/out"), b"content\xff")
        copy = os.path.join(self.tmp, "copy")
        self.assertEqual(session.get_file("/workspace/out", to_path=copy), 8)
        with open(copy, "rb") as got:
            self.assertEqual(got.read(), b"content\xff")
        del self.server.answers[("GET", "/v1/sessions/s1/files")]
        with self.assertRaises(capsule.NotFound):
            session.get_file("/nope")

    def test_run_outputs_files_and_commit(self):
        self.server.answers[("GET", "/v1/runs/r1/files")] = (200, {"Content-Type": "application/octet-stream"},
                                                             b"class\xca")
        self.assertEqual(self.client.run_file("r1", "target/A.class"), b"class\xca")
        self.assertEqual(self.server.requests[-1][1], "/v1/runs/r1/files?path=target%2FA.class")
        self.server.json_answer("POST", "/v1/runs/r1/commit", {"digest": "sha256:" + "a" * 64, "refs": ["x:1"]}, 201)
        self.assertEqual(self.client.commit_run("r1", "x:1")["refs"], ["x:1"])
        self.assertEqual(json.loads(self.server.requests[-1][3]), {"ref": "x:1"})
        self.server.answers[("POST", "/v1/runs/r2/commit")] = (
            400, {"Content-Type": "application/json"},
            b'{"error": {"code": "not_committable", "message": "host image"}}')
        with self.assertRaises(capsule.BadRequest):
            self.client.commit_run("r2", "x:1")

    def test_diff_checkpoint_reset_and_delete_on_exit(self):
        self.server.json_answer("GET", "/v1/sessions/s1/diff", {"added": ["x"], "modified": [], "deleted": []})
        self.server.json_answer("POST", "/v1/sessions/s1/checkpoint", SESSION)
        self.server.json_answer("POST", "/v1/sessions/s1/reset", SESSION)
        self.server.json_answer("DELETE", "/v1/sessions/s1", dict(SESSION, state="deleted"))
        with self.client.create_session() as session:
            self.assertEqual(session.diff(patch=True)["added"], ["x"])
            self.assertEqual(self.last()[1], "/v1/sessions/s1/diff?patch=1")
            session.checkpoint("green")
            self.assertEqual(json.loads(self.last()[3]), {"name": "green"})
            session.reset(to="green")
            self.assertEqual(self.last()[1], "/v1/sessions/s1/reset?to=green")
            session.reset()
            self.assertEqual(self.last()[1], "/v1/sessions/s1/reset")
        self.assertEqual(self.last()[:2], ("DELETE", "/v1/sessions/s1"))

    def test_stdin_and_resize_of_a_running_exec(self):
        session = self.client.create_session()
        self.server.json_answer("POST", "/v1/sessions/s1/execs/e1/stdin", {"id": "e1"}, 202)
        self.server.json_answer("POST", "/v1/sessions/s1/execs/e1/resize", {"id": "e1"}, 202)
        session.write_stdin("e1", "ls\r")
        self.assertEqual(self.last()[:2], ("POST", "/v1/sessions/s1/execs/e1/stdin"))
        self.assertEqual((self.last()[2]["Content-Type"], self.last()[3]), ("application/octet-stream", b"ls\r"))
        session.write_stdin("e1", close=True)
        self.assertEqual((self.last()[1], self.last()[3]), ("/v1/sessions/s1/execs/e1/stdin?close=true", b""))
        session.resize("e1", 40, 120)
        self.assertEqual(json.loads(self.last()[3]), {"rows": 40, "cols": 120})

    def test_attach_stream_follows_both_streams_from_offsets_then_finishes(self):
        session = self.client.create_session()
        self.server.answers[("GET", "/v1/sessions/s1/execs/e1/stream")] = (200, {"Content-Type": "text/plain"},
                                                                           b"output")
        self.server.json_answer("GET", "/v1/sessions/s1/execs/e1", {"id": "e1", "state": "failed",
                                                                    "result": {"exit_code": 3}})
        events = list(session.attach_stream("e1", stdout_from=4, stderr_from=2))
        targets = sorted(r[1] for r in self.server.requests if "/stream" in r[1])
        self.assertEqual(targets, ["/v1/sessions/s1/execs/e1/stream?stream=stderr&from=2",
                                   "/v1/sessions/s1/execs/e1/stream?stream=stdout&from=4"])
        self.assertEqual(sorted((e["event"], e["offset"], e["bytes"]) for e in events[:-1]),
                         [("stderr", 2, b"output"), ("stdout", 4, b"output")])
        self.assertEqual(events[-1], {"event": "finished", "id": "e1",
                                      "run": {"id": "e1", "state": "failed", "result": {"exit_code": 3}}})
        with self.assertRaises(capsule.NotFound):
            list(session.attach_stream("e2"))

    def test_execs_and_signal(self):
        session = self.client.create_session()
        self.server.json_answer("GET", "/v1/sessions/s1/execs", {"execs": [{"id": "e1", "state": "running"}]})
        self.assertEqual(session.execs(), [{"id": "e1", "state": "running"}])
        self.server.json_answer("POST", "/v1/sessions/s1/execs/e1/signal", {"id": "e1", "signal": 15}, 202)
        self.assertEqual(session.signal("e1"), {"id": "e1", "signal": 15})
        self.assertEqual(json.loads(self.last()[3]), {"signal": "TERM"})

    def test_a_refused_exec_raises_the_daemons_error(self):
        session = self.client.create_session()
        self.server.answers[("POST", "/v1/sessions/s1/exec")] = (
            409, {}, b'{"error": {"code": "session_not_ready", "message": "session s1 is frozen"}}')
        with self.assertRaises(capsule.Conflict) as caught:
            session.exec(["true"])
        self.assertEqual(caught.exception.code, "session_not_ready")


STACK = {"id": "st1", "state": "up", "failure": None, "services": {"db": {"state": "ready", "session": "s1"}}}


class FakeDaemonStackTest(FakeDaemonCase):
    def test_create_sends_the_body_and_waits_when_asked(self):
        self.server.json_answer("POST", "/v1/stacks", STACK, 201)
        spec = {"services": {"db": {"image": "pg", "ready": {"tcp": 5432}}}, "ttl": "1h"}
        self.assertEqual(self.client.create_stack(spec), STACK)
        method, target, headers, body = self.last()
        self.assertEqual((method, target, headers["Content-Type"]), ("POST", "/v1/stacks", "application/json"))
        self.assertEqual(json.loads(body), spec)
        self.client.create_stack(spec, wait=True)
        self.assertEqual(self.last()[1], "/v1/stacks?wait=true")

    def test_get_list_and_delete(self):
        self.server.json_answer("GET", "/v1/stacks/st%201", dict(STACK, id="st 1"))
        self.assertEqual(self.client.get_stack("st 1")["id"], "st 1")
        self.assertEqual(self.last()[1], "/v1/stacks/st%201")
        self.server.json_answer("GET", "/v1/stacks", {"stacks": [STACK]})
        self.assertEqual(self.client.list_stacks(), [STACK])
        self.server.json_answer("DELETE", "/v1/stacks/st1", dict(STACK, state="deleted"))
        self.assertEqual(self.client.delete_stack("st1")["state"], "deleted")
        self.assertEqual(self.last()[:2], ("DELETE", "/v1/stacks/st1"))
        with self.assertRaises(capsule.NotFound):
            self.client.get_stack("nope")


class DaemonTest(unittest.TestCase):
    daemon = None
    tmp = None

    @classmethod
    def setUpClass(cls):
        socket_path = os.environ.get("CAPSULE_SOCKET")
        if socket_path and not os.environ.get("CAPSULED"):
            cls.client = capsule.Client(socket_path)
            return
        if not os.access(CAPSULED, os.X_OK):
            raise unittest.SkipTest(f"capsuled is not built at {CAPSULED}")
        cls.tmp = tempfile.mkdtemp(prefix="capsule-py-", dir="/tmp")
        os.chmod(cls.tmp, 0o711)  # sandboxes run as unprivileged ids and must reach the state dir
        socket_path = socket_path or os.path.join(cls.tmp, "s.sock")
        cls.log = open(os.path.join(cls.tmp, "capsuled.log"), "wb")
        cls.daemon = subprocess.Popen(
            [CAPSULED, "--socket", socket_path, "--state-dir", os.path.join(cls.tmp, "state"), "--foreground"],
            stdin=subprocess.DEVNULL, stdout=cls.log, stderr=subprocess.STDOUT)
        cls.client = capsule.Client(socket_path)
        deadline = time.monotonic() + 15
        while True:
            try:
                cls.client.health()
                return
            except capsule.DaemonUnavailable:
                if cls.daemon.poll() is not None or time.monotonic() > deadline:
                    cls.tearDownClass()
                    raise
                time.sleep(0.05)

    @classmethod
    def tearDownClass(cls):
        if cls.daemon:
            cls.daemon.send_signal(signal.SIGTERM)
            try:
                cls.daemon.wait(60)
            except subprocess.TimeoutExpired:
                cls.daemon.kill()
                cls.daemon.wait()
            cls.daemon = None
            cls.log.close()
        if cls.tmp:
            shutil.rmtree(cls.tmp, ignore_errors=True)
            cls.tmp = None

    def wait_finished(self, run_id, timeout=30):
        deadline = time.monotonic() + timeout
        while True:
            run = self.client.get(run_id)
            if run["state"] not in ("queued", "running"):
                return run
            self.assertLess(time.monotonic(), deadline, f"run {run_id} still {run['state']}")
            time.sleep(0.05)

    def test_health_version_metrics(self):
        self.assertEqual(self.client.health()["status"], "ok")
        version = self.client.version()
        for key in ("version", "api", "kernel", "cgroup_version", "features"):
            self.assertIn(key, version)
        self.assertIsInstance(self.client.metrics(), str)

    def test_run_wait_logs_and_listing(self):
        label = f"py-{uuid.uuid4().hex[:8]}"
        run = self.client.run(["sh", "-c", "echo hi; echo err >&2; exit 3"], labels={"suite": label})
        self.assertEqual(run["state"], "failed")
        self.assertEqual(run["result"]["exit_code"], 3)
        self.assertEqual(run["labels"], {"suite": label})
        self.assertEqual(self.client.logs(run["id"]), "hi\n")
        self.assertEqual(self.client.logs(run["id"], stream="stderr"), "err\n")
        self.assertEqual("".join(self.client.follow_logs(run["id"])), "hi\n")
        # Invalid UTF-8 next to a valid character: log_bytes() has the bytes exactly, logs() the text.
        raw = self.client.run(["sh", "-c", r"printf '\377\376ok \303\251\n'"])
        self.assertEqual(self.client.log_bytes(raw["id"]), b"\xff\xfeok \xc3\xa9\n")
        self.assertEqual(b"".join(self.client.follow_log_bytes(raw["id"])), b"\xff\xfeok \xc3\xa9\n")
        self.assertEqual(self.client.logs(raw["id"]), "\ufffd\ufffdok \u00e9\n")
        self.assertEqual("".join(self.client.follow_logs(raw["id"])), "\ufffd\ufffdok \u00e9\n")
        self.assertEqual(self.client.log_bytes(raw["id"], tail=1), b"\xff\xfeok \xc3\xa9\n")
        lines = self.client.run(["sh", "-c", "seq 1 500"])
        self.assertEqual(self.client.logs(lines["id"], tail=3), "498\n499\n500\n")
        with self.assertRaises(capsule.BadRequest) as caught:
            self.client.logs(lines["id"], tail=0)
        self.assertEqual(caught.exception.code, "invalid_query")
        self.assertEqual(self.client.get(run["id"])["id"], run["id"])
        self.assertEqual([r["id"] for r in self.client.runs(label=f"suite={label}")], [run["id"]])
        self.assertEqual([r["id"] for r in self.client.runs(state="failed", label={"suite": label})], [run["id"]])
        self.assertEqual(self.client.runs(state="succeeded", label=f"suite={label}"), [])
        self.assertLessEqual(len(self.client.runs(limit=1)), 1)

    def test_snapshots_create_use_export_and_remove(self):
        tree = tempfile.mkdtemp(prefix="capsule-py-tree-", dir="/tmp")
        try:
            with open(os.path.join(tree, "a.txt"), "w") as f:
                f.write("snap\n")
            snapshot = self.client.create_snapshot(dir=tree)
            digest = snapshot["digest"]
            self.assertEqual(snapshot["source"], {"dir": tree})
            self.assertIn(digest, [s["digest"] for s in self.client.snapshots()])
            self.assertEqual(self.client.get_snapshot(digest)["files"], 1)
            run = self.client.run(["cat", "/workspace/a.txt"], workspace={"snapshot": digest})
            self.assertEqual(run["result"]["stdout"]["tail"], "snap\n")
            self.assertEqual(run["pinned"]["workspace_digest"], digest)
            out = os.path.join(tree, "out.tar")
            written = self.client.export_snapshot(digest, out)
            with open(out, "rb") as f:
                self.assertEqual("sha256:" + hashlib.sha256(f.read()).hexdigest(), digest)
            self.assertEqual(written, snapshot["size"])
            # GC: the run's record pins `digest`; a snapshot nothing pins or uses goes (after a dry run keeps it).
            other = os.path.join(tree, "other")
            os.mkdir(other)
            with open(os.path.join(other, "b.txt"), "w") as f:
                f.write("loose\n")
            loose = self.client.create_snapshot(dir=other)["digest"]
            report = self.client.collect_snapshots(dry_run=True)
            self.assertIn(loose, [s["digest"] for s in report["removed"]])
            self.assertNotIn(digest, [s["digest"] for s in report["removed"]])
            self.assertEqual(self.client.get_snapshot(loose)["digest"], loose)
            self.assertEqual(self.client.collect_snapshots(unused_for="24h")["removed"], [])
            self.assertIn(loose, [s["digest"] for s in self.client.collect_snapshots()["removed"]])
            with self.assertRaises(capsule.NotFound):
                self.client.get_snapshot(loose)
            self.assertEqual(self.client.remove_snapshot(digest), {"removed": digest})
            with self.assertRaises(capsule.NotFound) as caught:
                self.client.get_snapshot(digest)
            self.assertEqual(caught.exception.code, "snapshot_not_found")
        finally:
            shutil.rmtree(tree, ignore_errors=True)

    def test_resubmit_runs_the_stored_spec_and_pins(self):
        first = self.client.run(["sh", "-c", "echo again"], limits={"wall_time": "30s"}, labels={"k": "v"})
        self.assertEqual(first["spec"]["limits"]["wall_time"], 30000)
        self.assertTrue(first["pinned"]["policy_sha256"].startswith("sha256:"))
        second = self.client.resubmit(self.client.get(first["id"]))
        self.assertNotEqual(second["id"], first["id"])
        self.assertEqual(second["spec"], first["spec"])
        self.assertEqual(second["pinned"], first["pinned"])
        self.assertEqual(second["result"]["stdout"]["head"], "again\n")

    def test_diff_runs_and_flakiness(self):
        passed = self.client.run(["sh", "-c", "echo ok"])
        failed = self.client.run(["sh", "-c", "echo no; exit 1"])
        diff = self.client.diff_runs(passed["id"], failed["id"])
        self.assertFalse(diff["same_verdict"])
        self.assertEqual(diff["exit_code"], {"a": 0, "b": 1})
        self.assertFalse(diff["stdout"]["same"])
        report = self.client.flakiness([passed["id"], failed["id"]])
        self.assertEqual(report["runs"], 2)
        self.assertEqual(report["verdict"], {"passed": 1, "failed": 1, "flip_rate": 0.5})
        self.assertEqual(report["flaky"], [])
        with self.assertRaises(capsule.NotFound):
            self.client.diff_runs(passed["id"], "no-such-run")

    def test_export_and_import_run(self):
        run = self.client.run(["sh", "-c", "echo bundled"])
        bundle = os.path.join(self.tmp, f"{run['id']}.tar")
        self.assertGreater(self.client.export_run(run["id"], bundle), 0)
        self.assertFalse(os.path.exists(bundle + ".part"))
        with self.assertRaises(capsule.Conflict) as caught:
            self.client.import_run(bundle)
        self.assertEqual(caught.exception.code, "run_exists")
        self.client._json("DELETE", self.client._run_path(run["id"]))
        imported = self.client.import_run(bundle)
        self.assertEqual(imported["id"], run["id"])
        self.assertEqual(imported["imported"]["from"], bundle)
        self.assertEqual(self.client.logs(run["id"]), "bundled\n")
        with self.assertRaises(capsule.NotFound):
            self.client.export_run("no-such-run", bundle)
        with open(bundle, "wb") as out:
            out.write(b"not a tar")
        with self.assertRaises(capsule.BadRequest) as caught:
            self.client.import_run(bundle)
        self.assertEqual(caught.exception.code, "invalid_bundle")

    def test_replay_runs_the_stored_run_again_and_links_it(self):
        first = self.client.run(["sh", "-c", "echo again"], labels={"k": "v"})
        replays = self.client.replay(first["id"], repeat=2, vary=["cpus"], wait=True)["runs"]
        self.assertEqual([r["replay_of"] for r in replays], [first["id"], first["id"]])
        self.assertEqual([r["replay_vary"] for r in replays], [["cpus"], None])
        self.assertEqual({r["labels"]["k"] for r in replays}, {"v"})
        self.assertEqual(replays[1]["result"]["stdout"]["head"], "again\n")
        queued = self.client.replay(first["id"])
        self.assertEqual(len(queued["runs"]), 1)
        self.assertEqual(self.wait_finished(queued["runs"][0])["state"], "succeeded")

    def test_run_without_wait_and_limits(self):
        accepted = self.client.run(["sleep", "30"], wait=False, limits={"wall_time": "1s"})
        self.assertEqual(accepted["state"], "queued")
        self.assertEqual(self.wait_finished(accepted["id"])["state"], "timed_out")

    def test_run_stream_events(self):
        events = list(self.client.run_stream(["sh", "-c", "echo out; echo err >&2"], env={"X": "1"}))
        kinds = [event["event"] for event in events]
        self.assertEqual(kinds[0], "queued")
        self.assertIn("started", kinds)
        self.assertEqual(kinds[-1], "finished")
        self.assertEqual(b"".join(e["bytes"] for e in events if e["event"] == "stdout"), b"out\n")
        self.assertEqual(b"".join(e["bytes"] for e in events if e["event"] == "stderr"), b"err\n")
        self.assertFalse(any("data" in e for e in events))
        self.assertEqual(events[-1]["run"]["state"], "succeeded")

    def test_run_stream_bytes_are_exact(self):
        # Every byte value, then a 4-byte UTF-8 character split across two writes.
        script = ("i=0; while [ $i -lt 256 ]; do printf \"\\\\$(printf %o $i)\"; i=$((i+1)); done; "
                  "printf '\\360\\237'; sleep 0.2; printf '\\230\\200'")
        events = list(self.client.run_stream(["sh", "-c", script]))
        out = b"".join(e["bytes"] for e in events if e["event"] == "stdout")
        self.assertEqual(out, bytes(range(256)) + "\U0001F600".encode())
        self.assertEqual(events[-1]["run"]["state"], "succeeded")

    def test_stdin_is_fed(self):
        run = self.client.run(["cat"], stdin="fed\n")
        self.assertEqual(self.client.logs(run["id"]), "fed\n")

    def test_cancel_and_conflict(self):
        accepted = self.client.run(["sleep", "30"], wait=False)
        self.client.cancel(accepted["id"])
        self.assertEqual(self.wait_finished(accepted["id"])["state"], "cancelled")
        with self.assertRaises(capsule.Conflict) as caught:
            self.client.cancel(accepted["id"])
        self.assertEqual(caught.exception.status, 409)

    def test_session_round_trip(self):
        workspace = tempfile.mkdtemp(prefix="capsule-py-ws-", dir=self.tmp or "/tmp")
        os.chmod(workspace, 0o755)
        with open(os.path.join(workspace, "a.txt"), "w") as f:
            f.write("start\n")
        with self.client.create_session(workspace={"path": workspace}, labels={"py": "session"}) as session:
            self.assertEqual(session.info["state"], "ready")
            self.assertIn(session.id, [s.id for s in self.client.list_sessions(label="py=session")])
            run = session.exec(["sh", "-c", "cat /workspace/a.txt; echo more >> /workspace/a.txt"])
            self.assertEqual((run["state"], run["result"]["stdout"]["head"]), ("succeeded", "start\n"))
            run = session.exec(script="cat <<EOF\n$(cat /workspace/a.txt)\nEOF", stdin=b"\x00")
            self.assertEqual(run["result"]["stdout"]["head"], "start\nmore\n")
            self.assertEqual(session.exec(["cat"], stdin="fed")["result"]["stdout"]["head"], "fed")
            events = list(session.exec_stream(["sh", "-c", "echo streamed"]))
            self.assertEqual(b"".join(e["bytes"] for e in events if e["event"] == "stdout"), b"streamed\n")
            self.assertEqual(events[-1]["run"]["state"], "succeeded")

            fed = b""
            for event in session.exec_stream(["cat"], stdin_open=True):
                if event["event"] == "started":
                    session.write_stdin(event["id"], b"ping\n", close=True)
                fed += event.get("bytes", b"")
            self.assertEqual(fed, b"ping\n")

            session.put_file("/workspace/bin.dat", bytes(range(256)), mode=0o600)
            self.assertEqual(session.get_file("/workspace/bin.dat"), bytes(range(256)))
            local = os.path.join(workspace, "..", os.path.basename(workspace) + "-copy")
            self.assertEqual(session.get_file("/workspace/a.txt", to_path=local), len("start\nmore\n"))
            os.unlink(local)
            diff = session.diff(patch=True)
            self.assertEqual([entry["path"] for entry in diff["added"]], ["bin.dat"])
            self.assertEqual([entry["path"] for entry in diff["modified"]], ["a.txt"])

            session.checkpoint("one")
            session.exec(["rm", "/workspace/a.txt"])
            session.reset(to="one")
            self.assertEqual(session.exec(["cat", "/workspace/a.txt"])["result"]["stdout"]["head"], "start\nmore\n")
            session.reset()
            self.assertEqual(session.exec(["cat", "/workspace/a.txt"])["result"]["stdout"]["head"], "start\n")
            self.assertGreaterEqual(len(session.execs()), 6)
            with self.assertRaises(capsule.BadRequest) as caught:  # the host image cannot take a layer
                session.commit("py/session:1")
            self.assertEqual(caught.exception.code, "not_committable")
        self.assertEqual(session.refresh()["state"], "deleted")
        with open(os.path.join(workspace, "a.txt")) as f:
            self.assertEqual(f.read(), "start\n")
        shutil.rmtree(workspace, ignore_errors=True)

    def test_session_exec_collects_junit_and_coverage(self):
        try:
            subprocess.run(["/usr/bin/python3", "-c", "import pytest, coverage"], check=True, capture_output=True)
        except (OSError, subprocess.CalledProcessError):
            self.skipTest("/usr/bin/python3 with pytest and coverage is not installed (scripts/install-deps.sh)")
        workspace = tempfile.mkdtemp(prefix="capsule-py-collect-", dir=self.tmp or "/tmp")
        os.chmod(workspace, 0o755)
        os.makedirs(os.path.join(workspace, "tests"))
        with open(os.path.join(workspace, "calc.py"), "w") as f:
            f.write("def add(a, b):\n    return a + b\n\n\ndef unused():\n    return 0\n")
        with open(os.path.join(workspace, "tests", "test_calc.py"), "w") as f:
            f.write("from calc import add\n\n\ndef test_adds():\n    assert add(2, 3) == 5\n\n\n"
                    "def test_wrong():\n    assert add(2, 2) == 5\n")
        env = {"PYTHONPATH": "/workspace", "PYTHONDONTWRITEBYTECODE": "1", "HOME": "/tmp"}
        pytest = ("cd /workspace && python3 -m coverage run --include=calc.py -m pytest -p no:cacheprovider "
                  "--junitxml=build/junit.xml tests; status=$?; python3 -m coverage xml -o build/coverage.xml; "
                  "exit $status")
        collect = {"junit": ["build/junit.xml"], "coverage": ["build/coverage.xml"]}
        with self.client.create_session(workspace={"path": workspace}, env=env) as session:
            bare = session.exec(script="true", collect=collect)
            self.assertEqual(bare["tests"]["state"], "none_found")
            self.assertEqual(bare["coverage"]["state"], "none_found")
            run = session.exec(script=pytest, collect=collect)
            self.assertEqual((run["state"], run["result"]["exit_code"]), ("failed", 1))
            tests = run["tests"]
            self.assertEqual((tests["total"], tests["failed"], tests["errors"], tests["skipped"]), (2, 1, 0, 0))
            self.assertEqual(tests["files"], ["build/junit.xml"])
            coverage = run["coverage"]
            self.assertEqual(coverage["state"], "found")
            self.assertEqual([(r["path"], r["format"]) for r in coverage["reports"]],
                             [("build/coverage.xml", "cobertura")])
            self.assertEqual(coverage["total"]["lines"], {"covered": 3, "total": 4})  # unused() never ran
            self.assertIn("build/junit.xml", [entry["path"] for entry in run["diff"]["added"]])
            # Streamed, the finished event's run carries the same evidence.
            events = list(session.exec_stream(["sh", "-c", pytest], collect={"junit": ["build/junit.xml"]}))
            self.assertEqual(events[-1]["run"]["tests"]["total"], 2)
            self.assertIsNone(events[-1]["run"]["coverage"])  # not asked for this time
            with self.assertRaises(capsule.BadRequest) as caught:
                session.exec(script="true", collect={"outputs": ["*"]})
            self.assertEqual(caught.exception.code, "invalid_spec")
        shutil.rmtree(workspace, ignore_errors=True)

    def test_session_network_switches_off_and_on_between_execs(self):
        connect = ("python3 -c \"import socket\ntry:\n socket.create_connection(('127.0.0.1', 3141), 5); "
                   "print('connected')\nexcept OSError as e: print(type(e).__name__)\"")
        with self.client.create_session(network="proxy", as_of="2022-07-01") as session:
            self.assertEqual(session.info["network"], "proxy")
            online = session.exec(script=connect)
            self.assertEqual((online["result"]["stdout"]["head"], online["spec"]["network"]), ("connected\n", "proxy"))
            sleeper = session.exec(["sleep", "60"], background=True)["id"]
            with self.assertRaises(capsule.Conflict) as caught:
                session.network("none")
            self.assertEqual(caught.exception.code, "execs_running")
            session.signal(sleeper, "KILL")
            self.wait_finished(sleeper)
            deadline = time.monotonic() + 30
            while True:  # it counts as running until its record is made, a moment after it ended
                try:
                    info = session.network("none")
                    break
                except capsule.Conflict:
                    self.assertLess(time.monotonic(), deadline)
                    time.sleep(0.05)
            self.assertEqual((info["network"], info.get("proxy")), ("none", None))
            self.assertEqual(session.info["network"], "none")
            offline = session.exec(script=connect)
            self.assertEqual(offline["result"]["stdout"]["head"], "ConnectionRefusedError\n")
            self.assertEqual(offline["spec"]["network"], "none")
            self.assertEqual(session.network("proxy")["network"], "proxy")
            self.assertEqual(session.exec(script=connect)["result"]["stdout"]["head"], "connected\n")
            with self.assertRaises(capsule.BadRequest) as caught:
                session.network("host")
            self.assertIn("mode: must be", caught.exception.message)
        with self.client.create_session() as plain:
            with self.assertRaises(capsule.BadRequest) as caught:
                plain.network("proxy")
            self.assertEqual(caught.exception.code, "invalid_request")
            self.assertIn('created with network "none"', caught.exception.message)

    def test_background_exec_reattach_and_signal(self):
        with self.client.create_session() as session:
            script = "for i in 1 2 3 4 5; do echo line$i; sleep 0.3; done; echo oops >&2; exit 3"
            exec_id = session.exec(["sh", "-c", script], background=True)["id"]
            everything = b"line1\nline2\nline3\nline4\nline5\n"
            events = list(session.attach_stream(exec_id))  # most likely while it runs
            self.assertEqual(b"".join(e["bytes"] for e in events if e["event"] == "stdout"), everything)
            self.assertEqual(b"".join(e["bytes"] for e in events if e["event"] == "stderr"), b"oops\n")
            run = events[-1]["run"]
            self.assertEqual((events[-1]["event"], run["state"], run["result"]["exit_code"]), ("finished", "failed", 3))
            # Finished now: from its stored output, from an offset.
            self.assertEqual(b"".join(session.attach(exec_id, offset=6)), everything[6:])
            events = list(session.attach_stream(exec_id, stdout_from=12, stderr_from=1))
            pieces = [e for e in events if e["event"] == "stdout"]
            self.assertEqual(pieces[0]["offset"], 12)
            self.assertEqual(b"".join(e["bytes"] for e in pieces), everything[12:])
            self.assertEqual(b"".join(e["bytes"] for e in events if e["event"] == "stderr"), b"ops\n")
            self.assertEqual(events[-1]["run"]["result"]["exit_code"], 3)
            listed = {e["id"]: e for e in session.execs()}
            self.assertEqual(listed[exec_id]["state"], "failed")

            sleeper = session.exec(["sh", "-c", "echo started; exec sleep 1000"], background=True)["id"]
            following = session.attach_stream(sleeper)
            self.assertEqual(next(following)["bytes"], b"started\n")
            following.close()  # detaching never stops it
            self.assertEqual(session.get_exec(sleeper)["state"], "running")
            session.signal(sleeper, "TERM")
            events = list(session.attach_stream(sleeper, stdout_from=len(b"started\n")))
            self.assertEqual([e["event"] for e in events], ["finished"])
            run = events[-1]["run"]
            self.assertEqual((run["state"], run["result"]["signal"]), ("signaled", signal.SIGTERM))
            with self.assertRaises(capsule.Conflict):
                session.signal(sleeper, "KILL")
            with self.assertRaises(capsule.NotFound):
                list(session.attach_stream("no-such-exec"))

    def test_error_types(self):
        with self.assertRaises(capsule.NotFound):
            self.client.get("no-such-run")
        with self.assertRaises(capsule.NotFound):
            self.client.logs("no-such-run")
        with self.assertRaises(capsule.BadRequest) as caught:
            self.client.run(["true"], limits={"memory": "4x"})
        self.assertEqual(caught.exception.code, "invalid_spec")
        self.assertIn("limits.memory", caught.exception.message)
        with self.assertRaises(capsule.BadRequest):
            self.client.run([])
        with self.assertRaises(capsule.BadRequest):
            list(self.client.run_stream(["true"], no_such_field=1))


if __name__ == "__main__":
    unittest.main()
