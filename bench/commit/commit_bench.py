#!/usr/bin/env python3
# Commit benchmark: a run writes N MiB of random data into its root filesystem; what keeping its outputs costs the
# run (capsuled with outputs kept vs outputs_keep_days 0, same process) and what POST /v1/runs/{id}/commit costs
# against `tar -cf` of the same bytes on the same disk. Usage: bench/commit/commit_bench.py [BUILD_DIR] [MIB] [ROUNDS]
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


def timed(call):
    start = time.monotonic()
    result = call()
    return (time.monotonic() - start) * 1000, result


def copy_with_libraries(programs, rootfs):
    """A minimal root: the programs and the shared libraries ldd names, at their host paths."""
    files = set()
    for program in programs:
        path = shutil.which(program)
        files.add(os.path.realpath(path))
        files.add(path)
        for line in subprocess.run(["ldd", path], capture_output=True, text=True).stdout.splitlines():
            for word in line.split():
                if word.startswith("/"):
                    files.add(word)
    for path in sorted(files):
        target = os.path.join(rootfs, path.lstrip("/"))
        os.makedirs(os.path.dirname(target), exist_ok=True)
        shutil.copy2(path, target)
    os.makedirs(os.path.join(rootfs, "tmp"), exist_ok=True)


def start_daemon(build, work, name, config):
    state = os.path.join(work, name)
    os.makedirs(state)
    with open(os.path.join(state, "config.json"), "w") as out:
        json.dump(config, out)
    socket_path = os.path.join(state, "s.sock")
    daemon = subprocess.Popen([os.path.join(ROOT, build, "bin", "capsuled"), "--socket", socket_path, "--state-dir",
                               os.path.join(state, "state"), "--config", os.path.join(state, "config.json"),
                               "--foreground"], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    client = capsule.Client(socket_path)
    for _ in range(200):
        try:
            client.health()
            return daemon, client
        except capsule.DaemonUnavailable:
            time.sleep(0.05)
    raise RuntimeError(f"capsuled {name} did not start")


def main():
    build = sys.argv[1] if len(sys.argv) > 1 else "build"
    mib = int(sys.argv[2]) if len(sys.argv) > 2 else 300
    rounds = int(sys.argv[3]) if len(sys.argv) > 3 else 3
    work = tempfile.mkdtemp(prefix="capsule-commit-bench.", dir="/var/tmp")
    os.chmod(work, 0o755)
    daemons = []
    try:
        rootfs = os.path.join(work, "rootfs")
        copy_with_libraries(["sh", "dd", "tar"], rootfs)
        kept, kept_client = start_daemon(build, work, "kept", {})
        daemons.append(kept)
        unkept, unkept_client = start_daemon(build, work, "unkept", {"outputs_keep_days": 0})
        daemons.append(unkept)
        for client in (kept_client, unkept_client):
            client._json("POST", "/v1/images", {"source": rootfs, "format": "rootfs", "ref": "bench/commit:1"})
        write = ["sh", "-c", f"dd if=/dev/urandom of=/big bs=1M count={mib} status=none"]
        limits = {"disk": f"{mib + 512}m", "wall_time": "600s"}
        data = os.path.join(work, "data")
        os.makedirs(data)
        subprocess.run(["dd", "if=/dev/urandom", f"of={data}/big", "bs=1M", f"count={mib}", "status=none"], check=True)
        figures = {"run, outputs kept": [], "run, outputs not kept": [], "commit": [], "tar -cf (baseline)": []}
        for i in range(rounds):
            ms, run = timed(lambda: kept_client.run(write, image="bench/commit:1", limits=limits))
            assert run["state"] == "succeeded", run
            assert run["outputs"]["root"] is not None, run["outputs"]
            figures["run, outputs kept"].append(ms)
            ms, run_unkept = timed(lambda: unkept_client.run(write, image="bench/commit:1", limits=limits))
            assert run_unkept["state"] == "succeeded", run_unkept
            figures["run, outputs not kept"].append(ms)
            ms, _ = timed(lambda: kept_client.commit_run(run["id"], f"bench/committed:{i}"))
            figures["commit"].append(ms)
            out = os.path.join(work, f"baseline-{i}.tar")
            ms, _ = timed(lambda: subprocess.run(["tar", "-cf", out, "-C", data, "."], check=True))
            figures["tar -cf (baseline)"].append(ms)
            os.remove(out)
        load = open("/proc/loadavg").read().split()[:3]
        print(f"commit_bench: {mib} MiB of random data in the root filesystem, {rounds} rounds, load {' '.join(load)}")
        for name, values in figures.items():
            print(f"  {name:24s} median {statistics.median(values):9.1f} ms")
        tar = statistics.median(figures["tar -cf (baseline)"])
        print(f"  commit / tar -cf: {statistics.median(figures['commit']) / tar:.2f}x; keeping outputs adds "
              f"{statistics.median(figures['run, outputs kept']) - statistics.median(figures['run, outputs not kept']):.0f} ms "
              f"to the run ({(statistics.median(figures['run, outputs kept']) - statistics.median(figures['run, outputs not kept'])) / tar:.2f}x tar -cf)")
    finally:
        for daemon in daemons:
            daemon.terminate()
            daemon.wait()
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
