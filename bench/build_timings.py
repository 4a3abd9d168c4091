"""Reads cargo's `--timings` report (the HTML page, whose unit data is a JSON array) and prints the
units that took longest, each crate's total over its units (a build script and the library are two
units), and how much of the wall time the slowest crates take.

    python3 bench/build_timings.py target/cargo-timings/cargo-timing.html [TOP]
"""

import json
import re
import sys
from collections import defaultdict


def units(path):
    text = open(path, encoding="utf-8").read()
    m = re.search(r"const UNIT_DATA = (\[.*?\]);\n", text, re.S)
    if not m:
        sys.exit(f"{path}: no UNIT_DATA in the report")
    return json.loads(m.group(1))


def main():
    path = sys.argv[1]
    top = int(sys.argv[2]) if len(sys.argv) > 2 else 25
    data = units(path)
    wall = max(u["start"] + u["duration"] for u in data)
    by_crate = defaultdict(float)
    for u in data:
        by_crate[f"{u['name']} {u['version']}"] += u["duration"]
    total = sum(by_crate.values())
    print(f"{len(data)} units, {len(by_crate)} crates: {total:.0f} s of compile over {wall:.0f} s of wall time")
    print(f"top {top} crates by their own seconds (build scripts included):")
    acc = 0.0
    for name, secs in sorted(by_crate.items(), key=lambda kv: -kv[1])[:top]:
        acc += secs
        print(f"  {secs:7.1f} s  {100 * secs / total:5.1f} %  (cum. {100 * acc / total:5.1f} %)  {name}")
    print("the last units to finish (the build's tail, which one core alone runs):")
    for u in sorted(data, key=lambda u: -(u["start"] + u["duration"]))[:8]:
        print(f"  {u['start']:7.1f} → {u['start'] + u['duration']:7.1f} s  {u['name']} {u['version']} {u.get('target', '')}")


if __name__ == "__main__":
    main()
