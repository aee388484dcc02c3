#!/usr/bin/env python3
# Replay benchmark: wall time of a network "proxy" run (pip download through the proxy, Maven resolve) against
# its replay (the proxy frozen to the original's objects, served from the cache), measured in the same capsuled.
# Usage: bench/replay/replay_bench.py [BUILD_DIR] [ROUNDS]   (BUILD_DIR holds bin/capsuled; default build, 5)
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(ROOT, "client", "python"))
import capsule  # noqa: E402

POM = """<project xmlns="http://maven.apache.org/POM/4.0.0">
  <modelVersion>4.0.0</modelVersion>
  <parent><groupId>org.capsule.fixture</groupId><artifactId>parent</artifactId><version>[1.0,2.0)</version><relativePath/></parent>
  <artifactId>demo</artifactId><version>1</version><packaging>pom</packaging>
</project>
"""


def timed(call):
    start = time.monotonic()
    result = call()
    return time.monotonic() - start, result


def main():
    build = sys.argv[1] if len(sys.argv) > 1 else "build"
    rounds = int(sys.argv[2]) if len(sys.argv) > 2 else 5
    capsuled = os.path.join(ROOT, build, "bin", "capsuled")
    work = tempfile.mkdtemp(prefix="capsule-replay-bench.")
    os.chmod(work, 0o755)
    daemon = None
    try:
        line = subprocess.run([sys.executable, os.path.join(ROOT, "tests/proxy/fixtures/package_upstream.py"),
                               os.path.join(work, "fixture")], check=True, capture_output=True, text=True).stdout
        fixture = json.loads(line.splitlines()[0])
        config = {"proxy": {"pypi_mirror": fixture["pypi_mirror"], "maven_mirror": [fixture["maven_mirror"]],
                            "maven_publish_times": fixture["maven_publish_times"]}}
        with open(os.path.join(work, "config.json"), "w") as out:
            json.dump(config, out)
        socket_path = os.path.join(work, "s.sock")
        daemon = subprocess.Popen([capsuled, "--socket", socket_path, "--state-dir", os.path.join(work, "state"),
                                   "--config", os.path.join(work, "config.json"), "--foreground"],
                                  stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        client = capsule.Client(socket_path)
        for _ in range(200):
            try:
                client.health()
                break
            except capsule.DaemonUnavailable:
                time.sleep(0.05)
        project = os.path.join(work, "maven-project")
        os.makedirs(project)
        with open(os.path.join(project, "pom.xml"), "w") as out:
            out.write(POM)
        cases = {
            "pip download alpha beta": dict(argv=["sh", "-c", "cd /tmp && python3 -m pip download -q -d dl alpha beta"]),
            "mvn validate (parent range)": dict(argv=["sh", "-c", "mvn -B -q validate"],
                                                workspace={"path": project, "mode": "cow"}, cwd="/workspace"),
        }
        print(f"replay wall time vs the original run, {rounds} rounds each (client-side, ?wait=true)")
        print(f"{'case':32} {'original p50':>13} {'replay p50':>11} {'replay/original':>16}")
        for name, spec in cases.items():
            originals, replays = [], []
            for _ in range(rounds):
                seconds, run = timed(lambda: client.run(network="proxy", as_of="2022-12-31", **spec))
                assert run["state"] == "succeeded", run
                originals.append(seconds)
                seconds, answer = timed(lambda: client.replay(run["id"], wait=True))
                assert answer["runs"][0]["state"] == "succeeded", answer
                replays.append(seconds)
            a, b = statistics.median(originals), statistics.median(replays)
            print(f"{name:32} {a * 1000:>10.0f} ms {b * 1000:>8.0f} ms {b / a:>15.2f}x")
    finally:
        if daemon:
            daemon.terminate()
            daemon.wait(timeout=60)
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
