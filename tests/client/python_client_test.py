# Tests of client/python/capsule.py: error mapping offline, then every Client method against a real capsuled
# ($CAPSULED, default build/bin/capsuled, started on a temp socket or $CAPSULE_SOCKET; skipped when missing).
import os
import shutil
import signal
import subprocess
import sys
import tempfile
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
        self.assertEqual(self.client.get(run["id"])["id"], run["id"])
        self.assertEqual([r["id"] for r in self.client.runs(label=f"suite={label}")], [run["id"]])
        self.assertEqual([r["id"] for r in self.client.runs(state="failed", label={"suite": label})], [run["id"]])
        self.assertEqual(self.client.runs(state="succeeded", label=f"suite={label}"), [])
        self.assertLessEqual(len(self.client.runs(limit=1)), 1)

    def test_resubmit_runs_the_stored_spec_and_pins(self):
        first = self.client.run(["sh", "-c", "echo again"], limits={"wall_time": "30s"}, labels={"k": "v"})
        self.assertEqual(first["spec"]["limits"]["wall_time"], 30000)
        self.assertTrue(first["pinned"]["policy_sha256"].startswith("sha256:"))
        second = self.client.resubmit(self.client.get(first["id"]))
        self.assertNotEqual(second["id"], first["id"])
        self.assertEqual(second["spec"], first["spec"])
        self.assertEqual(second["pinned"], first["pinned"])
        self.assertEqual(second["result"]["stdout"]["head"], "again\n")

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
