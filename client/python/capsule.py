# capsule.py: a stdlib-only Python client for capsuled's HTTP/1.1 JSON API on its Unix socket.
# Client(socket_path).run(["make", "test"], limits={"wall_time": "10m"}) -> the finished run object (a dict).
"""Python client for capsuled, the capsule sandbox daemon.

Spec keyword arguments are the RunSpec fields of POST /v1/runs, passed through unchanged
(image, env, cwd, workspace, limits, network, policy, labels, collect, stdin).
"""

import base64
import http.client
import json
import os
import socket
import urllib.parse

__all__ = [
    "Client", "CapsuleError", "BadRequest", "NotFound", "Conflict", "QueueFull", "DaemonUnavailable",
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
    """404: no such run, image or policy."""


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

    def run_stream(self, argv, **spec):
        """Submits a run and yields its events as dicts: queued, started, stdout/stderr, finished {"run"}.
        stdout/stderr events carry the exact output bytes as base64 in "data_b64"; this adds them decoded
        as "bytes". Closing the generator early closes the connection (the run keeps going)."""
        response, connection = self._open("POST", "/v1/runs", self._spec(argv, spec),
                                          {"Accept": "application/x-ndjson"})
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

    def logs(self, run_id, stream="stdout"):
        """The run's full output of one stream, as text (invalid UTF-8 replaced)."""
        return self._bytes("GET", f"{self._run_path(run_id)}/logs?stream={stream}").decode("utf-8", "replace")

    def follow_logs(self, run_id, stream="stdout"):
        """Yields the run's output as text pieces as they are written, until the run ends."""
        response, connection = self._open("GET", f"{self._run_path(run_id)}/logs?stream={stream}&follow=true")
        try:
            while True:
                piece = response.read1(65536)
                if not piece:
                    return
                yield piece.decode("utf-8", "replace")
        finally:
            connection.close()

    def cancel(self, run_id):
        return self._json("POST", f"{self._run_path(run_id)}/cancel")

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

    def _open(self, method, target, body=None, headers=None):
        """Sends a request; returns (response, connection) for a 2xx answer, raises CapsuleError otherwise."""
        connection = UnixHTTPConnection(self.socket_path, self.timeout)
        headers = dict(headers or {})
        payload = None
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
