#!/usr/bin/env python3
"""Compiles every target's unity-batched sources as one translation unit (-fsyntax-only) to prove their internal
names never collide, whatever batches cmake/unity_build.cmake forms as files come and go. Exits 1 on a collision.

usage: scripts/unity-check.py [BUILD_DIR]   (default build; a configured unity build with compile_commands.json)
"""
import json
import os
import re
import shlex
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor

build = os.path.abspath(sys.argv[1] if len(sys.argv) > 1 else "build")
commands = os.path.join(build, "compile_commands.json")
if not os.path.exists(commands):
    sys.exit(f"unity-check: no {commands}: configure a unity build first (cmake --preset default)")

# Target -> (its batched sources, one batch's compile command and directory). Files compiled alone are not in a
# batch (they have their reasons: cmake/unity_build.cmake) and are left out.
targets = {}
for entry in json.load(open(commands)):
    source = entry["file"]
    match = re.search(r"/CMakeFiles/([^/]+)\.dir/Unity/", source)
    if not match or not source.endswith(".cxx"):
        continue
    sources, _ = targets.setdefault(match.group(1), ([], (entry["command"], entry["directory"])))
    sources += re.findall(r'#include "([^"]+)"', open(source).read())


def check(name):
    sources, (command, directory) = targets[name]
    args = shlex.split(command)
    compiler = next(i for i, arg in enumerate(args) if re.search(r"(^|/)(c\+\+|g\+\+|clang\+\+)(-[0-9.]+)?$", arg))
    flags, skip = [], False
    for arg in args[compiler + 1:]:
        if skip:
            skip = False
        elif arg in ("-o", "-MF", "-MT", "-c"):
            skip = True
        elif arg != "-MD":
            flags.append(arg)
    unit = "".join(f'#include "{source}"\n' for source in sources)
    run = subprocess.run([args[compiler], *flags, "-fsyntax-only", "-x", "c++", "-"], input=unit, cwd=directory,
                         capture_output=True, text=True)
    errors = [line for line in run.stderr.splitlines() if "error:" in line]
    return name, len(sources), run.returncode, errors


failed = 0
names = sorted(name for name, (sources, _) in targets.items() if len(sources) > 1)
with ThreadPoolExecutor(max_workers=os.cpu_count() or 1) as pool:
    for name, count, code, errors in pool.map(check, names):
        print(f"unity-check: {name}: {count} files {'OK' if code == 0 else 'COLLIDE'}", flush=True)
        for line in errors:
            print("  " + line)
        failed += code != 0
if failed:
    print(f"unity-check: {failed} target(s) with internal names that collide in one batch: rename one of each "
          "pair (or share it), or compile the file alone in cmake/unity_build.cmake", file=sys.stderr)
sys.exit(1 if failed else 0)
