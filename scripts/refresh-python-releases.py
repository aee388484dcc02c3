#!/usr/bin/env python3
# Regenerates images/data/python-releases.json (the table python "auto" picks from) from the CPython release
# record the PEPs repository keeps (release_management/python-releases.toml), so no date is typed by hand.
"""Usage: scripts/refresh-python-releases.py PEPS_REPO [--rev REV] [--out FILE]

PEPS_REPO is a clone of https://github.com/python/peps (bare or not). Its
release_management/python-releases.toml lists every CPython release with its date and whether it happened
("actual") or is planned ("expected"); the release schedule PEPs are generated from it. The table keeps the
final 3.x releases from 3.6.0 on, marks the recalled ones (3.9.3, 3.9.8), and sets complete_through to the day
the data was last committed, or to the day before the earliest release still marked "expected" on or before
that day (a release not yet recorded as done). Writes FILE (default: images/data/python-releases.json next to
this script) and prints what changed against the previous table.
"""
import argparse
import datetime
import json
import os
import re
import subprocess
import sys
import tomllib

DATA_PATH = "release_management/python-releases.toml"
FLOOR = (3, 6)
FINAL = re.compile(r"^(3)\.(\d+)\.(\d+)(?: final)?$")  # "3.6.0 final", "3.13.1"; not alpha/beta/candidate
DESCRIPTION = (
    "Final (non pre-release) CPython 3.x releases from 3.6.0 on, with their release dates (YYYY-MM-DD, as "
    "published). Pre-releases are not listed. The list is complete for every release dated on or before "
    "complete_through. Regenerate it with scripts/refresh-python-releases.py from a clone of "
    "https://github.com/python/peps (docs/api.md, 'Toolchains'); never edit dates by hand.")


def git(repo, *args):
    return subprocess.run(["git", "-C", repo, *args], check=True, capture_output=True, text=True).stdout


def version_key(version):
    return tuple(int(part) for part in version.split("."))


def build_table(record, commit, committed):
    releases, minors, expected = [], {}, []
    for minor, entries in record["release"].items():
        for entry in entries:
            match = FINAL.match(entry["stage"])
            if not match:
                continue
            x, y, z = (int(group) for group in match.groups())
            if (x, y) < FLOOR:
                continue
            date = entry["date"]
            if entry["state"] != "actual":
                expected.append(date)
                continue
            if date > committed:
                sys.exit(f"{entry['stage']}: 'actual' but dated {date}, after the data's commit ({committed})")
            release = {"version": f"{x}.{y}.{z}", "date": date.isoformat()}
            note = entry.get("note", "")
            if "recalled" in note.lower():
                release["recalled"] = True
            if note:
                release["note"] = note
            releases.append(release)
            minors[f"{x}.{y}"] = {"pep": record["metadata"][minor]["pep"]}
    through = min([committed] + [d - datetime.timedelta(days=1) for d in expected if d <= committed])
    releases = [r for r in releases if datetime.date.fromisoformat(r["date"]) <= through]
    releases.sort(key=lambda r: version_key(r["version"]))
    minors = {m: minors[m] for m in sorted(minors, key=version_key) if any(
        r["version"].startswith(m + ".") for r in releases)}
    peps = ", ".join(f"PEP {info['pep']} ({m})" for m, info in minors.items())
    return {
        "schema": 1,
        "description": DESCRIPTION,
        "source": (f"https://github.com/python/peps {DATA_PATH} at commit {commit} ({committed}), compiled from "
                   f"the release schedule PEPs ({peps}) and www.python.org's releases"),
        "complete_through": through.isoformat(),
        "minors": minors,
        "releases": releases,
    }


def render(table):
    # One release per line, as the file has always been laid out, so a refresh reads as a short diff.
    head = {k: v for k, v in table.items() if k != "releases"}
    lines = ["{"] + [f"  {json.dumps(k)}: {json.dumps(v)}," for k, v in head.items()]
    lines.append('  "releases": [')
    lines += [f"    {json.dumps(r)}," for r in table["releases"]]
    lines[-1] = lines[-1].rstrip(",")
    return "\n".join(lines + ["  ]", "}"]) + "\n"


def report(old_path, table):
    try:
        with open(old_path, encoding="utf-8") as f:
            old = {r["version"]: r for r in json.load(f)["releases"]}
    except (OSError, ValueError, KeyError):
        old = {}
    new = {r["version"]: r for r in table["releases"]}
    for version in sorted(set(old) | set(new), key=version_key):
        if version not in new:
            print(f"removed {version} (was {old[version]['date']})")
        elif version not in old:
            print(f"added {version} {new[version]['date']}")
        elif old[version]["date"] != new[version]["date"]:
            print(f"changed {version}: {old[version]['date']} -> {new[version]['date']}")
    print(f"{len(new)} releases, complete through {table['complete_through']}")


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("peps_repo", help="a clone of https://github.com/python/peps")
    parser.add_argument("--rev", default="HEAD", help="the commit to read (default: HEAD)")
    here = os.path.dirname(os.path.abspath(__file__))
    parser.add_argument("--out", default=os.path.join(here, "..", "images", "data", "python-releases.json"))
    args = parser.parse_args()
    # The commit that last changed the data: its date is the day the record was last brought up to date.
    commit, day = git(args.peps_repo, "log", "-1", "--format=%H %cs", args.rev, "--", DATA_PATH).split()
    committed = datetime.date.fromisoformat(day)
    record = tomllib.loads(git(args.peps_repo, "show", f"{commit}:{DATA_PATH}"))
    table = build_table(record, commit, committed)
    report(args.out, table)
    with open(args.out, "w", encoding="utf-8") as f:
        f.write(render(table))


if __name__ == "__main__":
    main()
