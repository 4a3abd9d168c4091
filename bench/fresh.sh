#!/usr/bin/env bash
# A newcomer's first command, measured (issue 15): a fresh clone of the current commit run through
# scripts/clean-env.sh (empty HOME, CARGO_HOME, CARGO_TARGET_DIR and Python user base: a cold build
# and a cold crate download) with the README's first command, ./scripts/quickstart.sh. Prints the wall
# time of each phase (deps, build, setup, run), each stage of the run (first start to last finish of
# its partitions, and the sum of their own seconds), the binary's size and the run's peak RSS.
#
#   bench/fresh.sh [WORKDIR]        (default: a new folder under /tmp; the log is WORKDIR/log)
#
# No peer: the goal is absolute (issue 15: ≤ 25 minutes from a fresh machine to the first report).
set -euo pipefail
repo="$(cd "$(dirname "$0")/.." && pwd)"
work="${1:-$(mktemp -d /tmp/doc2ci-fresh-XXXXXX)}"
out="$repo/bench/out"
mkdir -p "$out"
echo "fresh: load average before: $(cut -d' ' -f1-3 /proc/loadavg)" >&2
t0=$SECONDS
rc=0
"$repo/scripts/clean-env.sh" "$work" /usr/bin/time -f 'quickstart: peak RSS %M KiB' ./scripts/quickstart.sh || rc=$?
total=$((SECONDS - t0))
echo "fresh: load average after: $(cut -d' ' -f1-3 /proc/loadavg)" >&2
python3 - "$work" "$total" "$rc" <<'PY' | tee "$out/fresh.txt"
import datetime, json, os, re, sys
from collections import defaultdict

work, total, rc = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
log = open(os.path.join(work, "log"), errors="replace").read()
print(f"fresh clone to report: {total} s wall (exit {rc}), log {work}/log")
for name, secs in re.findall(r"^quickstart: (deps|build|setup|run) (\d+) s$", log, re.M):
    print(f"  phase {name:<6} {int(secs):>6} s")
rss = re.search(r"^quickstart: peak RSS (\d+) KiB$", log, re.M)
if rss:
    print(f"  peak RSS of the whole quickstart (largest single process): {int(rss.group(1)) / 1048576:.2f} GiB")
binary = os.path.join(work, "home/.cache/doc2ci-target/release/doc2ci")
if os.path.exists(binary):
    print(f"  binary: {os.path.getsize(binary) / 1e6:.1f} MB")
state = os.path.join(work, "main/warehouse/_doc2ci/state.json")
if os.path.exists(state):
    parts = json.load(open(state))["partitions"].values()
    span = defaultdict(lambda: [float("inf"), 0.0, 0.0, 0])
    for p in parts:
        end = datetime.datetime.strptime(p["finished_at"], "%Y-%m-%dT%H:%M:%SZ").timestamp()
        s = span[p["stage"]]
        s[0] = min(s[0], end - p.get("seconds", 0.0))
        s[1] = max(s[1], end)
        s[2] += p.get("seconds", 0.0)
        s[3] += 1
    print("  stage          partitions   wall s   own s (summed; partitions overlap)")
    for stage, (a, b, own, n) in sorted(span.items(), key=lambda kv: kv[1][0]):
        print(f"  {stage:<14} {n:>10} {b - a:>8.0f} {own:>7.0f}")
PY
exit $rc
