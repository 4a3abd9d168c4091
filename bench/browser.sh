#!/usr/bin/env bash
# The report's sample browser at Doc2CI's scale (issue 15): 3,363 pairs over four services × 16 models =
# 53,808 outputs plus repair rounds (stages/report/examples/bench_study.rs writes the report with
# BROWSER_OUT), opened from disk in headless Chromium. Prints the size of the index and of the largest
# chunk, and the page's own timings (performance.now() from navigation): the filtered list rendered, and
# one pair opened (its chunk loaded, every model's output diffed against the reference), driven through
# chromedriver (bench/browser_time.py) so the times are wall-clock ones. Median of 3 fresh loads each.
# Env: WORK (scratch, default a new temp folder), SKIP_BUILD=1.
set -euo pipefail
. "$(dirname "$0")/lib.sh"
bench_init browser
if [ "${SKIP_BUILD:-0}" != 1 ]; then
  flock /tmp/doc2ci-cargo.lock cargo build --quiet --release -p doc2ci-report --example bench_study
fi
say "# bench/browser.sh $(date -u +%FT%TZ) on $(nproc) cores; load $(cut -d' ' -f1-3 /proc/loadavg)"
BROWSER_OUT="$WORK/report" "$CARGO_TARGET_DIR/release/examples/bench_study" > "$WORK/study.json"
R="$WORK/report"
say "report built: $(python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); print(d["configurations"], "zero-shot outputs,", d["units"], "with repair rounds; report", round(d["report_s"], 2), "s")' "$WORK/study.json")"
say "index $(du -h "$R/samples/index.js" | cut -f1), $(find "$R/samples" -name 'chunk-*.js' | wc -l) chunks, largest $(find "$R/samples" -name 'chunk-*.js' -printf '%s\n' | sort -n | tail -1) bytes"

PAIR="github-actions/github-actions-00042"
VIEWS=("round=0" "service=travis-ci&valid=schema&metric=cosine&min=0.2&max=0.6" "round=all&pair=$PAIR")
for run in 1 2 3; do
  python3 bench/browser_time.py "$R/samples.html" "${VIEWS[@]}" > "$WORK/run-$run.jsonl"
done
python3 - "$WORK" "${#VIEWS[@]}" <<'PY' | tee -a "$SUMMARY"
import json, statistics, sys
work, n = sys.argv[1], int(sys.argv[2])
runs = [[json.loads(l) for l in open(f"{work}/run-{r}.jsonl")] for r in (1, 2, 3)]
for i in range(n):
    v = [r[i] for r in runs]
    med = lambda k: statistics.median(x[k] for x in v) if v[0][k] is not None else None
    print(f"view #{v[0]['view']}: {v[0]['matches']} outputs match; list rendered {med('list_ms')} ms, "
          f"pair shown {med('detail_ms')} ms after navigation, wall {med('wall_ms')} ms (median of 3 fresh loads)")
PY
