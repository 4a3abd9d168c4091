#!/usr/bin/env bash
# Where a cold build goes (issue 47): `cargo build --release --timings` of the binary into an empty
# target folder (the crate sources already downloaded: this is compile time, not download time),
# then each compiled unit's own seconds from cargo's timing report, the top crates by time and the
# critical path's tail. No peer: the goal is absolute (≤ 12 minutes cold on this 2-core machine).
#
#   bench/build.sh            (the report: bench/out/build/; the target folder is removed after)
. "$(dirname "$0")/lib.sh"
bench_init build
cold="$WORK/target"
say "build: cold release build into $cold, load average before: $(cut -d' ' -f1-3 /proc/loadavg)"
t0=$(now)
CARGO_TARGET_DIR="$cold" cargo build --release --locked --timings --quiet
t1=$(now)
cp "$cold"/cargo-timings/cargo-timing.html "$OUT/"
say "build: wall $(py "print(round($t1 - $t0))") s, load average after: $(cut -d' ' -f1-3 /proc/loadavg)"
python3 bench/build_timings.py "$OUT/cargo-timing.html" | tee -a "$SUMMARY"
rm -rf "$cold"
