# The measuring half of stack_bench.sh: talks to capsuled over its Unix socket with the standard library only.
# By hand = the services' commands run on the host (ports 20000+) and polled every 100 ms, as a harness would.
import concurrent.futures, http.client, json, os, socket, statistics, subprocess, time, urllib.request

SOCKET, ROUNDS = os.environ["SOCKET"], int(os.environ["ROUNDS"])
PY = "/usr/bin/python3"
WEB = ("import http.server, sys\n"
       "class H(http.server.BaseHTTPRequestHandler):\n"
       "    def do_GET(self): self.send_response(200); self.end_headers()\n"
       "    def log_message(self, *a): pass\n"
       "http.server.HTTPServer(('127.0.0.1', int(sys.argv[1])), H).serve_forever()\n")
WORKER = ("import socket, sys, time\n"
          "s = socket.socket(); s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)\n"
          "s.bind(('127.0.0.1', int(sys.argv[1]))); s.listen(8)\n"
          "while True: time.sleep(60)\n")


class UnixConnection(http.client.HTTPConnection):
    def connect(self):
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.sock.connect(SOCKET)


def api(method, path, body=None):
    conn = UnixConnection("localhost", timeout=600)
    conn.request(method, path, json.dumps(body) if body is not None else None, {"Content-Type": "application/json"})
    answer = conn.getresponse()
    data = json.loads(answer.read() or b"null")
    conn.close()
    return answer.status, data


def spec():
    return {"services": {
        "web": {"image": "host", "command": [PY, "-c", WEB, "8080"],
                "ready": {"http": {"port": 8080, "path": "/"}, "interval": "100ms"}},
        "worker": {"image": "host", "command": [PY, "-c", WORKER, "9000"], "depends_on": {"web": "ready"},
                   "ready": {"tcp": 9000, "interval": "100ms"}},
        "driver": {"image": "host", "depends_on": {"worker": "ready"}}}}


def capsule_once():
    start = time.monotonic()
    status, stack = api("POST", "/v1/stacks?wait=true", spec())
    elapsed = (time.monotonic() - start) * 1000
    assert status == 201 and stack["state"] == "up", stack
    api("DELETE", "/v1/stacks/" + stack["id"])
    return elapsed


def wait_ready(check):
    while True:
        try:
            check()
            return
        except OSError:
            time.sleep(0.1)


def by_hand_once(index):
    web_port, worker_port = 20000 + 2 * index, 20001 + 2 * index
    start = time.monotonic()
    web = subprocess.Popen([PY, "-c", WEB, str(web_port)])
    wait_ready(lambda: urllib.request.urlopen(f"http://127.0.0.1:{web_port}/", timeout=1).read())
    worker = subprocess.Popen([PY, "-c", WORKER, str(worker_port)])
    wait_ready(lambda: socket.create_connection(("127.0.0.1", worker_port), timeout=1).close())
    elapsed = (time.monotonic() - start) * 1000
    for process in (web, worker):
        process.kill()
        process.wait()
    return elapsed


def at_once(task, n):
    start = time.monotonic()
    with concurrent.futures.ThreadPoolExecutor(n) as pool:
        list(pool.map(task, range(n)))
    return (time.monotonic() - start) * 1000


capsule_once()  # warm-up: page cache, the daemon's first boxes
one_hand = statistics.median(by_hand_once(0) for _ in range(ROUNDS))
one_capsule = statistics.median(capsule_once() for _ in range(ROUNDS))
eight_hand = statistics.median(at_once(by_hand_once, 8) for _ in range(max(1, ROUNDS // 2)))
eight_capsule = statistics.median(at_once(lambda _: capsule_once(), 8) for _ in range(max(1, ROUNDS // 2)))
print(f"{os.cpu_count()} CPUs, medians of {ROUNDS} rounds (8 at once: {max(1, ROUNDS // 2)})")
print(f"{'one stack, request to all ready':44} {one_capsule:8.0f} ms  by hand {one_hand:6.0f} ms  {one_capsule / one_hand:5.2f}x")
print(f"{'8 stacks at once, until all are ready':44} {eight_capsule:8.0f} ms  by hand {eight_hand:6.0f} ms  {eight_capsule / eight_hand:5.2f}x")
