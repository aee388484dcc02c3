# capsule.py: a stdlib-only Python client for capsuled's HTTP/1.1 JSON API on its Unix socket.
# Client(socket_path).run(["make", "test"], limits={"wall_time": "10m"}) -> the finished run object (a dict).
"""Python client for capsuled, the capsule sandbox daemon.

Spec keyword arguments are the RunSpec fields of POST /v1/runs, passed through unchanged
(image, env, cwd, workspace, limits, network, policy, labels, collect, stdin).

Output: log_bytes(run_id) is the exact bytes a command wrote (what a byte-exact comparison needs);
logs(run_id) is the same as text, UTF-8 with invalid sequences replaced, for reading and printing.

Sessions are live sandboxes that commands are exec'ed into (docs/api.md "Sessions"):

    with client.create_session(image="jdk17", workspace={"path": "/src", "mode": "cow"},
                               protect=["src/test/**"]) as session:
        session.put_file("/workspace/Fix.java", b"...")
        run = session.exec(["mvn", "-q", "verify"], timeout="10m")
        print(session.diff(patch=True))

An exec collects test reports as a run does, and a proxy session can go offline between execs:

    with client.create_session(network="proxy", as_of="2024-05-01", workspace={"path": "/src"}) as session:
        session.exec(script="pip install -e .")
        session.network("none")                       # the box reaches nothing now
        run = session.exec(script="pytest --junitxml=build/junit.xml", collect={"junit": ["build/junit.xml"]})
        print(run["tests"])                           # {"total", "failed", "errors", "skipped", ...}

A background exec is never lost: re-attach to it from where its output was left, as often as wanted:

    exec_id = session.exec(["mvn", "verify"], background=True)["id"]
    for event in session.attach_stream(exec_id):     # stdout/stderr events, then "finished" with the run
        ...
    session.signal(exec_id, "TERM")                   # or stop it

Stacks are services on one private network with build, deploy and test stages (docs/stacks.md):

    stack = client.create_stack({"services": {...}, "stages": [...]}, wait=True)
    if stack["state"] == "failed":
        print(stack["failure"]["reason"], client.logs(stack["services"]["app"]["exec_id"]))
    client.delete_stack(stack["id"])
"""

import base64
import codecs
import http.client
import json
import os
import queue
import socket
import threading
import urllib.parse

__all__ = [
    "Client", "Session", "CapsuleError", "BadRequest", "NotFound", "Conflict", "QueueFull", "DaemonUnavailable",
    "default_socket_path",
]


class CapsuleError(Exception):
    """capsuled answered with an error (or could not be reached: status 0)."""

    def __init__(self, status, code, message):
        super().__init__(f"{message} ({code}, HTTP {status})" if status else message)
        self.status = status
        self.code = code
        self.message = message


class BadRequest(CapsuleError):
    """400: the request (usually the RunSpec) is invalid; the message names the field."""


class NotFound(CapsuleError):
    """404: no such run, image, policy, session or file."""


class Conflict(CapsuleError):
    """409: e.g. cancelling a run that already finished."""


class QueueFull(CapsuleError):
    """429: the daemon's run queue is full; retry later."""


class DaemonUnavailable(CapsuleError):
    """Nothing answers on the socket, the connection broke, or the daemon is draining (503)."""


_ERRORS_BY_STATUS = {400: BadRequest, 404: NotFound, 409: Conflict, 429: QueueFull, 503: DaemonUnavailable}


def default_socket_path():
    """$CAPSULE_SOCKET, else /run/capsule/capsule.sock for root, else $XDG_RUNTIME_DIR/capsule/capsule.sock."""
    if os.environ.get("CAPSULE_SOCKET"):
        return os.environ["CAPSULE_SOCKET"]
    if os.geteuid() == 0:
        return "/run/capsule/capsule.sock"
    runtime = os.environ.get("XDG_RUNTIME_DIR")
    if runtime:
        return os.path.join(runtime, "capsule", "capsule.sock")
    return f"/tmp/capsule-{os.geteuid()}/capsule.sock"


class UnixHTTPConnection(http.client.HTTPConnection):
    """HTTPConnection whose transport is an AF_UNIX stream socket."""

    def __init__(self, socket_path, timeout=None):
        super().__init__("capsule", timeout=timeout)
        self.socket_path = socket_path

    def connect(self):
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        if self.timeout is not None:
            sock.settimeout(self.timeout)
        try:
            sock.connect(self.socket_path)
        except OSError as e:
            sock.close()
            raise DaemonUnavailable(
                0, "unavailable", f"cannot connect to capsuled at {self.socket_path}: {e.strerror or e}") from e
        self.sock = sock


def _copy_to_file(response, path):
    """Streams an answer's body into the local file `path` in 64 KiB pieces; the number of bytes written."""
    written = 0
    with open(path, "wb") as out:
        while True:
            piece = response.read1(1 << 16)
            if not piece:
                return written
            out.write(piece)
            written += len(piece)


class Client:
    """One capsuled; every call opens its own connection, so a Client may be shared between threads."""

    def __init__(self, socket_path=None, timeout=None):
        self.socket_path = socket_path or default_socket_path()
        self.timeout = timeout

    # --- runs ---------------------------------------------------------------------------------------------
    def run(self, argv, wait=True, **spec):
        """Submits a run. wait=True returns the finished run object, else {"id", "state": "queued"}."""
        return self._json("POST", "/v1/runs" + ("?wait=true" if wait else ""), self._spec(argv, spec))

    def resubmit(self, run, wait=True):
        """Runs a stored run again: its spec with every default filled and its pins (image digests, policy
        digest, cutoff), so a moved ref or a changed policy cannot change what runs. Returns like run()."""
        body = {"spec": run["spec"], "pinned": run["pinned"]}
        return self._json("POST", "/v1/runs" + ("?wait=true" if wait else ""), body)

    def replay(self, run_id, repeat=None, vary=None, wait=False):
        """Replays a finished run from its spec and pins (a network "proxy" run's proxy serves only what the
        original received). repeat: 1..50 runs; vary: names among "cpus", "memory", "order" (or a dict of
        booleans), applied to the 1st, 3rd, ... replay. Returns {"runs": [ids]}, or with wait=True
        {"runs": [finished run objects]}."""
        body = {}
        if repeat is not None:
            body["repeat"] = repeat
        if vary:
            body["vary"] = dict(vary) if isinstance(vary, dict) else {name: True for name in vary}
        return self._json("POST", self._run_path(run_id) + "/replay" + ("?wait=true" if wait else ""), body)

    def run_stream(self, argv, **spec):
        """Submits a run and yields its events as dicts: queued, started, stdout/stderr, finished {"run"}.
        stdout/stderr events carry the exact output bytes as base64 in "data_b64"; this adds them decoded
        as "bytes". Closing the generator early closes the connection (the run keeps going)."""
        return self._events("POST", "/v1/runs", self._spec(argv, spec))

    def runs(self, state=None, label=None, limit=50, after=None):
        """Lists run objects, newest first. label is "k=v" or a dict of labels that must all match."""
        query = []
        if state:
            query.append(("state", state))
        labels = label.items() if isinstance(label, dict) else ([label.split("=", 1)] if label else [])
        query += [("label", f"{k}={v}") for k, v in labels]
        if limit is not None:
            query.append(("limit", str(limit)))
        if after:
            query.append(("after", after))
        target = "/v1/runs" + ("?" + urllib.parse.urlencode(query, safe="=") if query else "")
        return self._json("GET", target)["runs"]

    def get(self, run_id):
        return self._json("GET", self._run_path(run_id))

    def logs(self, run_id, stream="stdout", tail=None):
        """The run's output of one stream as text, for reading: log_bytes() decoded as UTF-8 with invalid
        sequences replaced by U+FFFD. Use log_bytes() for the exact bytes the command wrote."""
        return self.log_bytes(run_id, stream, tail).decode("utf-8", "replace")

    def log_bytes(self, run_id, stream="stdout", tail=None):
        """The run's output of one stream, byte for byte as stored: all of it, or with tail=N (1..10000) only
        its last N lines, cut by the daemon (at most 1 MiB of them)."""
        query = f"stream={stream}" + (f"&tail={int(tail)}" if tail is not None else "")
        return self._bytes("GET", f"{self._run_path(run_id)}/logs?{query}")

    def follow_logs(self, run_id, stream="stdout"):
        """Yields the run's output as text pieces as they are written, until the run ends (decoded like logs();
        a character split between two pieces is decoded whole)."""
        decoder = codecs.getincrementaldecoder("utf-8")("replace")
        for piece in self.follow_log_bytes(run_id, stream):
            text = decoder.decode(piece)
            if text:
                yield text
        rest = decoder.decode(b"", final=True)
        if rest:
            yield rest

    def follow_log_bytes(self, run_id, stream="stdout"):
        """Yields the run's output as the exact bytes written, in pieces as they come, until the run ends."""
        response, connection = self._open("GET", f"{self._run_path(run_id)}/logs?stream={stream}&follow=true")
        try:
            while True:
                piece = response.read1(65536)
                if not piece:
                    return
                yield piece
        finally:
            connection.close()

    def cancel(self, run_id):
        return self._json("POST", f"{self._run_path(run_id)}/cancel")

    def diff_runs(self, a, b):
        """How finished run b differs from run a (GET /v1/runs/diff): same_verdict, status, exit_code, tests
        (changed/added/removed cases), stdout/stderr digests, dependencies, files, pinned, timings."""
        query = urllib.parse.urlencode({"a": a, "b": b})
        return self._json("GET", f"/v1/runs/diff?{query}")

    def flakiness(self, run_ids):
        """The flip rates of the verdict and of each test case over 2..100 finished runs (GET /v1/runs/flakiness):
        {"runs", "verdict": {"passed", "failed", "flip_rate"}, "cases": [...], "flaky": [names]}."""
        query = urllib.parse.urlencode({"runs": ",".join(run_ids)}, safe=",")
        return self._json("GET", f"/v1/runs/flakiness?{query}")

    def export_run(self, run_id, to_path):
        """Writes a finished run's audit bundle (GET /v1/runs/{id}/bundle) to the local file `to_path` (through
        `to_path`.part, renamed once whole); returns the number of bytes written."""
        response, connection = self._open("GET", f"{self._run_path(run_id)}/bundle")
        partial = f"{to_path}.part"
        try:
            written = _copy_to_file(response, partial)
            os.replace(partial, to_path)
            return written
        except (OSError, http.client.HTTPException) as e:
            raise DaemonUnavailable(0, "unavailable", f"exporting run {run_id}: {e}") from e
        finally:
            connection.close()
            if os.path.exists(partial):
                os.remove(partial)

    def import_run(self, bundle_path):
        """Stores the run of an audit bundle (POST /v1/runs/import; the daemon reads the file with the caller's
        rights); the run object, with "imported": {"at", "from", "peer"}. Then replay it by its id."""
        return self._json("POST", "/v1/runs/import", {"path": os.path.abspath(bundle_path)})

    def run_file(self, run_id, path):
        """What a finished run wrote at `path` (relative: under /workspace; absolute: in its root filesystem),
        from its kept outputs: a file's bytes, or a directory (or a symlink) as tar bytes."""
        query = "path=" + urllib.parse.quote(path, safe="")
        return self._bytes("GET", f"{self._run_path(run_id)}/files?{query}")

    def commit_run(self, run_id, ref):
        """Makes image `ref` ("name:tag") of the run's image plus what the run wrote to its root filesystem;
        the image object, as GET /v1/images/{ref} gives it."""
        return self._json("POST", f"{self._run_path(run_id)}/commit", {"ref": ref})

    # --- sessions -----------------------------------------------------------------------------------------
    def create_session(self, **spec):
        """Creates a session from SessionSpec fields (image, toolchains, layers, as_of, workspace, limits,
        network, env, cwd, labels, protect, ttl, idle_ttl, on_expiry, persist_shell_state) -> Session."""
        return Session(self, self._json("POST", "/v1/sessions", spec))

    def list_sessions(self, state=None, label=None, limit=50, after=None):
        """One page of sessions, newest first, as Session objects. label is "k=v". The next page starts
        after the last one returned: list_sessions(after=page[-1].id); an empty page is the end."""
        query = [(key, value) for key, value in (("state", state), ("label", label)) if value]
        if limit is not None:
            query.append(("limit", str(limit)))
        if after:
            query.append(("after", after))
        target = "/v1/sessions" + ("?" + urllib.parse.urlencode(query, safe="=") if query else "")
        return [Session(self, info) for info in self._json("GET", target)["sessions"]]

    def get_session(self, session_id):
        return Session(self, self._json("GET", Session.path_of(session_id)))

    # --- stacks -------------------------------------------------------------------------------------------
    def create_stack(self, spec, wait=False):
        """Starts a stack (docs/stacks.md) from the POST /v1/stacks body {services, stages, ttl, labels, network}.
        Returns the stack object at once ("starting"), or with wait=True when its stages have ended: "up", or
        "failed" with failure {stage, reason, service, message}."""
        return self._json("POST", "/v1/stacks" + ("?wait=true" if wait else ""), spec)

    def get_stack(self, stack_id):
        """The stack object: state, stages, services {NAME: {state, session, exec_id, ready_ms, ...}}, failure."""
        return self._json("GET", self._stack_path(stack_id))

    def list_stacks(self):
        """The caller's stack objects (root: everyone's)."""
        answer = self._json("GET", "/v1/stacks")
        return answer["stacks"] if isinstance(answer, dict) else answer

    def delete_stack(self, stack_id):
        """Ends every service (their sessions are deleted) and removes the stack's network; the stack object,
        "deleted"."""
        return self._json("DELETE", self._stack_path(stack_id))

    @staticmethod
    def _stack_path(stack_id):
        return "/v1/stacks/" + urllib.parse.quote(stack_id, safe="")

    # --- toolchains ---------------------------------------------------------------------------------------
    def resolve_toolchains(self, toolchains, as_of=None):
        """Dry run of a run's toolchains ({"python": "auto"}) and as_of: the image, versions and reasons a run
        would be pinned to; raises CapsuleError with the error such a run would get."""
        query = dict(toolchains, **({"as_of": as_of} if as_of else {}))
        return self._json("GET", "/v1/toolchains/resolve?" + urllib.parse.urlencode(query))

    # --- snapshots ----------------------------------------------------------------------------------------
    def create_snapshot(self, dir=None, tar=None, git=None, rev=None):
        """Snapshots a host directory, a tar file, or a local git repository at `rev`, read with this
        caller's rights; the snapshot object {digest, size, files, created, source, creator}. Its digest goes
        into a run's or session's workspace={"snapshot": digest}."""
        body = {key: value for key, value in (("dir", dir), ("tar", tar), ("git", git), ("rev", rev)) if value is not None}
        return self._json("POST", "/v1/snapshots", body)

    def snapshots(self):
        return self._json("GET", "/v1/snapshots")["snapshots"]

    def get_snapshot(self, digest):
        return self._json("GET", self._snapshot_path(digest) + "?info=true")

    def export_snapshot(self, digest, to_path):
        """Writes the canonical tar (its sha256 is the digest) into `to_path`; the number of bytes written."""
        response, connection = self._open("GET", self._snapshot_path(digest))
        try:
            return _copy_to_file(response, to_path)
        except (OSError, http.client.HTTPException) as e:
            raise DaemonUnavailable(0, "unavailable", f"exporting {digest}: {e}") from e
        finally:
            connection.close()

    def remove_snapshot(self, digest):
        return self._json("DELETE", self._snapshot_path(digest))

    def collect_snapshots(self, unused_for=None, dry_run=False):
        """Removes this caller's snapshots (root: all) that no kept run or session pins and none uses, unused
        for at least `unused_for` ("24h"; default all); {removed: [snapshot], released, bytes_freed, in_use}."""
        body = {"dry_run": dry_run, **({"unused_for": unused_for} if unused_for else {})}
        return self._json("POST", "/v1/snapshots/gc", body)

    @staticmethod
    def _snapshot_path(digest):
        return "/v1/snapshots/" + urllib.parse.quote(digest, safe=":")

    # --- daemon -------------------------------------------------------------------------------------------
    def version(self):
        return self._json("GET", "/v1/version")

    def health(self):
        return self._json("GET", "/v1/health")

    def metrics(self):
        return self._bytes("GET", "/metrics").decode()

    # --- plumbing -----------------------------------------------------------------------------------------
    @staticmethod
    def _spec(argv, spec):
        if isinstance(argv, str):
            raise TypeError("argv must be a list of strings, e.g. ['sh', '-c', 'make test']")
        return dict(spec, argv=list(argv))

    @staticmethod
    def _run_path(run_id):
        return "/v1/runs/" + urllib.parse.quote(run_id, safe="")

    def _open(self, method, target, body=None, headers=None, raw=None):
        """Sends a request (a JSON body, or `raw` bytes with the Content-Type in `headers`); returns
        (response, connection) for a 2xx answer, raises CapsuleError otherwise."""
        connection = UnixHTTPConnection(self.socket_path, self.timeout)
        headers = dict(headers or {})
        payload = raw
        if body is not None:
            payload = json.dumps(body).encode()
            headers["Content-Type"] = "application/json"
        try:
            connection.request(method, target, body=payload, headers=headers)
            response = connection.getresponse()
            if response.status >= 400:
                raise self._error(response.status, response.read())
        except (OSError, http.client.HTTPException) as e:
            connection.close()
            raise DaemonUnavailable(0, "unavailable", f"{method} {target} on {self.socket_path} failed: {e}") from e
        except CapsuleError:
            connection.close()
            raise
        return response, connection

    def _events(self, method, target, body):
        """The ndjson events of a run as dicts, output decoded into "bytes" (see run_stream)."""
        response, connection = self._open(method, target, body, {"Accept": "application/x-ndjson"})
        try:
            for line in response:
                line = line.strip()
                if line:
                    event = json.loads(line)
                    if "data_b64" in event:
                        event["bytes"] = base64.b64decode(event["data_b64"], validate=True)
                    yield event
        except (OSError, http.client.HTTPException) as e:
            raise DaemonUnavailable(0, "unavailable", f"lost the event stream from {self.socket_path}: {e}") from e
        finally:
            connection.close()

    def _bytes(self, method, target, body=None):
        response, connection = self._open(method, target, body)
        try:
            return response.read()
        except (OSError, http.client.HTTPException) as e:
            raise DaemonUnavailable(0, "unavailable", f"{method} {target}: reading the answer failed: {e}") from e
        finally:
            connection.close()

    def _json(self, method, target, body=None):
        return json.loads(self._bytes(method, target, body))

    @staticmethod
    def _error(status, raw):
        code, message = f"http_{status}", raw.decode("utf-8", "replace")[:200] or "no body"
        try:
            error = json.loads(raw)["error"]
            code, message = error.get("code", code), error.get("message", message)
        except (ValueError, KeyError, TypeError):
            pass
        return _ERRORS_BY_STATUS.get(status, CapsuleError)(status, code, message)


class Session:
    """A live session of one Client: exec commands into it, move files, diff, checkpoint, reset, delete.
    `info` is its session object as last fetched (refresh() fetches it again). As a context manager it is
    deleted on exit."""

    def __init__(self, client, info):
        self.client = client
        self.info = info
        self.id = info["id"]

    def __repr__(self):
        return f"Session({self.id!r}, state={self.info.get('state')!r})"

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        try:
            self.delete()
        except NotFound:
            pass
        return False

    @staticmethod
    def path_of(session_id):
        return "/v1/sessions/" + urllib.parse.quote(session_id, safe="")

    @property
    def path(self):
        return self.path_of(self.id)

    def refresh(self):
        self.info = self.client._json("GET", self.path)
        return self.info

    # --- execs --------------------------------------------------------------------------------------------
    def exec(self, argv=None, script=None, collect=None, **spec):
        """Runs argv (a list) or script (text run by /bin/sh from a file) and returns its run object when it
        ends; with background=True returns {"id"} at once. ExecSpec keywords: cwd, env, stdin (str, or bytes
        sent as stdin_b64), timeout, idle_timeout, cpu_time, kill_grace, output_cap, labels, user.
        collect: what the exec's record reads from the session's workspace when it ends, as a run's
        {"junit": [globs], "coverage": [globs], "classfiles": [globs], "tail_lines": n} (no "outputs"): the run
        object then has "tests", "coverage", "classfiles" and the workspace's "diff" as a run's record does."""
        return self.client._json("POST", self.path + "/exec", self._exec_spec(argv, script, spec, collect))

    def exec_stream(self, argv=None, script=None, collect=None, **spec):
        """Like exec(), yielding the events as dicts: started, stdout/stderr (with the decoded "bytes"),
        finished {"run"}. Closing the generator early closes the connection; the exec keeps going. With
        stdin_open=True or pty=True (rows, cols), feed it with write_stdin(event["id"], ...)."""
        return self.client._events("POST", self.path + "/exec", self._exec_spec(argv, script, spec, collect))

    def execs(self):
        """This session's execs, newest first: run objects ("id", "state", "result" with "exit_code" and
        "signal" once ended, "spec" with "argv" or "script", "times"), running ones included."""
        return self.client._json("GET", self.path + "/execs")["execs"]

    def get_exec(self, exec_id):
        """One exec's run object (NotFound for an exec of another session or none)."""
        return self.client._json("GET", self._exec_path(exec_id))

    def attach(self, exec_id, stream="stdout", offset=0):
        """Yields one stream ("stdout" or "stderr") of an exec's output as bytes, from byte `offset` of it
        until the exec ends (at once for a finished one): re-attach after a disconnect. Closing the generator
        early closes the connection; the exec keeps going."""
        response, connection = self._open_output(exec_id, stream, offset)
        try:
            yield from self._pieces(exec_id, response)
        finally:
            connection.close()

    def attach_stream(self, exec_id, stdout_from=0, stderr_from=0):
        """Re-attaches to a running or finished exec and yields its events as exec_stream() does, from byte
        `stdout_from` of its stdout and `stderr_from` of its stderr: "stdout"/"stderr" events with the exact
        "bytes" and their "offset" in that stream (resume from offset + len(bytes)), then "finished" with the
        run object once the exec has ended (run["state"], run["result"]["exit_code"], ["signal"]). Both
        streams are followed at once; their order relative to each other is not kept. Closing the generator
        early closes the connections; the exec keeps going (signal() stops it)."""
        events = queue.Queue(maxsize=64)
        stop = threading.Event()
        opened = []

        def put(item):
            while not stop.is_set():
                try:
                    return events.put(item, timeout=0.1)
                except queue.Full:
                    pass

        def follow(stream, offset, response):
            try:
                for piece in self._pieces(exec_id, response):
                    put({"event": stream, "id": exec_id, "bytes": piece, "offset": offset})
                    offset += len(piece)
                put(None)
            except CapsuleError as e:
                put(e)

        try:
            for stream, offset in (("stdout", int(stdout_from)), ("stderr", int(stderr_from))):
                response, connection = self._open_output(exec_id, stream, offset)
                thread = threading.Thread(target=follow, args=(stream, offset, response), daemon=True)
                opened.append((connection, thread))
                thread.start()
            ended = 0
            while ended < len(opened):
                item = events.get()
                if item is None:
                    ended += 1
                elif isinstance(item, CapsuleError):
                    raise item
                else:
                    yield item
            yield {"event": "finished", "id": exec_id, "run": self.get_exec(exec_id)}
        finally:
            stop.set()
            for connection, thread in opened:
                if connection.sock is not None:
                    try:
                        connection.sock.shutdown(socket.SHUT_RDWR)  # wakes a thread waiting for output
                    except OSError:
                        pass
                thread.join()
                connection.close()

    def signal(self, exec_id, signal="TERM"):
        """Sends a signal ("TERM", "INT", "KILL", "HUP", "QUIT", "USR1", "USR2" or a number) to every process of
        a running exec; Conflict once it has ended. attach_stream() then ends with its run (state "signaled")."""
        return self.client._json("POST", f"{self._exec_path(exec_id)}/signal", {"signal": signal})

    def write_stdin(self, exec_id, data=b"", close=False):
        """Feeds bytes (or text) to the stdin of a running exec started with stdin_open=True or pty=True;
        close=True then ends it (EOF)."""
        payload = data.encode() if isinstance(data, str) else bytes(data)
        target = f"{self._exec_path(exec_id)}/stdin" + ("?close=true" if close else "")
        return self._put_or_post("POST", target, "application/octet-stream", payload)

    def resize(self, exec_id, rows, cols):
        """Sets a pty exec's window size."""
        return self.client._json("POST", f"{self._exec_path(exec_id)}/resize", {"rows": rows, "cols": cols})

    # --- network ------------------------------------------------------------------------------------------
    def network(self, mode):
        """Switches a network "proxy" session's package proxy off (mode "none": the box reaches nothing) or on
        again (mode "proxy", served at the session's date) between execs: install with the proxy, test
        offline, same box. Returns the session object, whose "network" is what the next exec gets. Conflict
        ("execs_running") while an exec is queued or running; BadRequest for a session created without the
        proxy when asked to switch it on. POST /v1/sessions/{id}/network {"mode"}."""
        self.info = self.client._json("POST", self.path + "/network", {"mode": mode})
        return self.info

    # --- files --------------------------------------------------------------------------------------------
    def put_file(self, path, data=None, from_path=None, mode=None):
        """Writes `data` (bytes, up to the daemon's 1 MiB body limit) to the file `path` in the session, with
        `mode` (an int, e.g. 0o755) when given; or copies the local file or directory `from_path`, which
        capsuled opens with this process's user's rights and streams in itself (any size)."""
        if (data is None) == (from_path is None):
            raise TypeError("give one of data and from_path")
        if from_path is not None:
            return self.client._json("PUT", self._files_target(path), {"source": os.path.abspath(from_path)})
        target = self._files_target(path) + (f"&mode={mode:04o}" if mode is not None else "")
        return self._put_or_post("PUT", target, "application/octet-stream", data)

    def put_tar(self, path, data):
        """Unpacks a tar (bytes, up to the daemon's 1 MiB body limit) at the directory `path`."""
        return self._put_or_post("PUT", self._files_target(path), "application/x-tar", data)

    def get_file(self, path, to_path=None):
        """A file's bytes (a directory comes as a tar). With `to_path`, streams them into that local file
        instead and returns the number of bytes written."""
        response, connection = self.client._open("GET", self._files_target(path))
        try:
            if to_path is None:
                return response.read()
            return _copy_to_file(response, to_path)
        except (OSError, http.client.HTTPException) as e:
            raise DaemonUnavailable(0, "unavailable", f"GET {path} of session {self.id}: {e}") from e
        finally:
            connection.close()

    # --- state --------------------------------------------------------------------------------------------
    def diff(self, patch=False):
        """{"added", "modified", "deleted"} against the session's start; patch=True adds unified diffs."""
        return self.client._json("GET", self.path + "/diff" + ("?patch=1" if patch else ""))

    def checkpoint(self, name):
        return self.client._json("POST", self.path + "/checkpoint", {"name": name})

    def commit(self, ref):
        """Makes image `ref` ("name:tag") of the session's image plus what its execs wrote to the root
        filesystem so far; the image object."""
        return self.client._json("POST", self.path + "/commit", {"ref": ref})

    def reset(self, to=None):
        """Back to the start, or to the checkpoint named `to`."""
        query = "?" + urllib.parse.urlencode({"to": to}) if to else ""
        return self.client._json("POST", self.path + "/reset" + query)

    def delete(self):
        """Kills everything in the session and removes its box; its record stays (state "deleted")."""
        return self.client._json("DELETE", self.path)

    # --- plumbing -----------------------------------------------------------------------------------------
    @staticmethod
    def _exec_spec(argv, script, spec, collect=None):
        if (argv is None) == (script is None):
            raise TypeError("give one of argv (a list of strings) and script (text)")
        if isinstance(argv, str):
            raise TypeError("argv must be a list of strings, e.g. ['sh', '-c', 'make test']; or use script=")
        body = dict(spec)
        if argv is not None:
            body["argv"] = list(argv)
        else:
            body["script"] = script
        if collect is not None:
            body["collect"] = dict(collect)
        stdin = body.pop("stdin", None)
        if isinstance(stdin, (bytes, bytearray)):
            body["stdin_b64"] = base64.b64encode(stdin).decode()
        elif stdin is not None:
            body["stdin"] = stdin
        return body

    def _exec_path(self, exec_id):
        return f"{self.path}/execs/" + urllib.parse.quote(exec_id, safe="")

    def _open_output(self, exec_id, stream, offset):
        return self.client._open("GET", f"{self._exec_path(exec_id)}/stream?stream={stream}&from={int(offset)}")

    @staticmethod
    def _pieces(exec_id, response):
        try:
            while True:
                piece = response.read1(65536)
                if not piece:
                    return
                yield piece
        except (OSError, http.client.HTTPException, ValueError) as e:
            raise DaemonUnavailable(0, "unavailable", f"lost the output of exec {exec_id}: {e}") from e

    def _files_target(self, path):
        return f"{self.path}/files?" + urllib.parse.urlencode({"path": path})

    def _put_or_post(self, method, target, content_type, data):
        response, connection = self.client._open(method, target, headers={"Content-Type": content_type},
                                                 raw=bytes(data))
        try:
            answer = response.read()
        finally:
            connection.close()
        return json.loads(answer) if answer else {}
