#!/usr/bin/env bash
# stats + report benchmarks (issue 6).
#   real       the 6-model llm4ci study (examples/llm4ci.toml, 725 pairs × 6 models): time of
#              `doc2ci run --only stats --only report` on its warehouse (a changed bootstrap seed forces both
#              to re-run) vs peers/stats_timed.py, the core tests with scipy/statsmodels/numpy on the same rows.
#   scale      the real Doc2CI-scale warehouse made by `SECTIONS=scale bench/quality.sh` (3,363 pairs × 16
#              models = 53,808 configurations, scored): `--only stats --only report` with a changed seed,
#              under /usr/bin/time -v (wall, peak RSS). Set SCALE_CONFIG to that study's pipeline.toml.
#   synthetic  a Doc2CI-scale study held in memory: 3,363 pairs × 16 models = 53,808 configurations
#              (stages/report/examples/bench_study.rs): time of the stats computation and of the report.
# Env: SECTIONS (default "real synthetic", plus "scale" when SCALE_CONFIG is set), WORK (scratch, default a new temp folder), SKIP_BUILD=1,
#      WAREHOUSE (an existing llm4ci warehouse to reuse; default: built in WORK, which scores 4,350 rows).
# Output: figures on stdout and in bench/out/stats/summary.txt. Run it on a quiet machine, once, with nice.
set -euo pipefail
. "$(dirname "$0")/lib.sh"
DATA="${DOC2CI_LLM4CI:-$(cd .. && pwd)/shared/data/llm4ci}"
SECTIONS="${SECTIONS:-real synthetic${SCALE_CONFIG:+ scale}}"
bench_init stats
BIN="$CARGO_TARGET_DIR/release/doc2ci"
if [ "${SKIP_BUILD:-0}" != 1 ]; then
  flock /tmp/doc2ci-cargo.lock cargo build --quiet --release --bin doc2ci
  flock /tmp/doc2ci-cargo.lock cargo build --quiet --release -p doc2ci-report --example bench_study
fi
say "# bench/stats.sh $(date -u +%FT%TZ) on $(nproc) cores; load $(cut -d' ' -f1-3 /proc/loadavg)"

if [[ " $SECTIONS " == *" real "* ]]; then
  WH="${WAREHOUSE:-$WORK/wh}"
  STUDY="$WORK/study.toml"
  sed "s#warehouse = \"../warehouse-llm4ci\"#warehouse = \"$WH\"#; s#\.\./\.\./shared/data/llm4ci#$DATA#" examples/llm4ci.toml > "$STUDY"
  if [ ! -d "$WH/scores" ]; then
    say "building the llm4ci warehouse in $WH (import, validate, score: a few minutes)"
    "$BIN" run --quiet --config "$STUDY"
  fi
  times=()
  for seed in 1 2 3; do
    cp "$STUDY" "$STUDY.$seed"
    printf '\n[stages.stats]\nbootstrap_seed = %s\n' "$seed" >> "$STUDY.$seed"
    s=$(now); "$BIN" run --quiet --config "$STUDY.$seed" --only stats --only report; e=$(now)
    times+=("$(py "print(round($e-$s, 3))")")
  done
  OURS=$(printf '%s\n' "${times[@]}" | sort -n | sed -n 2p)
  ROWS=$("$BIN" sql --config "$STUDY" --format csv "SELECT COUNT(*) AS n FROM stats" | tail -1)
  say "doc2ci run --only stats --only report (6 models, 4,350 outputs): runs ${times[*]} s, median ${OURS} s; ${ROWS} stats rows; report $(du -sh "$WH/report" | cut -f1)"
  PEER_JSON=$(python3 -m peers.stats_timed "$WH")
  PEER=$(py "import json; print(json.loads('$PEER_JSON')['seconds'])")
  say "peer (scipy/statsmodels/numpy, core tests only, no report): $PEER_JSON"
  say "$(py "print(f'ratio peer / doc2ci (stats+report, incl. process start and Parquet reads): {$PEER/$OURS:.1f}x')")"
fi

if [[ " $SECTIONS " == *" scale "* ]]; then
  [ -f "${SCALE_CONFIG:-}" ] || { echo "SCALE_CONFIG: the pipeline.toml of a scored scale study (SECTIONS=scale bench/quality.sh)" >&2; exit 1; }
  say ""
  say "## Doc2CI scale warehouse ($SCALE_CONFIG)"
  n=$("$BIN" sql --config "$SCALE_CONFIG" --format csv "SELECT COUNT(*) AS n FROM scores WHERE round = 0" | tail -1)
  [ "$n" -gt 0 ] || { echo "$SCALE_CONFIG: its warehouse holds no scores yet; run the scale section of bench/quality.sh first" >&2; exit 1; }
  seeded="$WORK/scale-seed.toml"
  cp "$SCALE_CONFIG" "$seeded"
  printf '\n[stages.stats]\nbootstrap_seed = %s\n' "$(date +%s)" >> "$seeded"
  /usr/bin/time -v "$BIN" run --quiet --config "$seeded" --only stats --only report 2> "$WORK/scale-time.txt"
  wall=$(grep "Elapsed (wall" "$WORK/scale-time.txt" | awk '{print $NF}')
  rss=$(grep "Maximum resident" "$WORK/scale-time.txt" | awk '{print $NF}')
  rows=$("$BIN" sql --config "$seeded" --format csv "SELECT COUNT(*) AS n FROM stats" | tail -1)
  say "doc2ci run --only stats --only report on $n scored configurations: wall $wall, peak RSS $((rss / 1024)) MiB, $rows stats rows"
fi

if [[ " $SECTIONS " == *" synthetic "* ]]; then
  say ""
  say "## synthetic Doc2CI scale (53,808 configurations, in memory)"
  say "$("$CARGO_TARGET_DIR/release/examples/bench_study")"
fi
say "summary in $SUMMARY; scratch in $WORK"
