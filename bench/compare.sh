#!/usr/bin/env bash
# `doc2ci compare` against its peer (issue 46): two models of the llm4ci study (examples/llm4ci.toml,
# 1,318 pairs × 6 models, scored and validated), every metric, 2,000 paired bootstrap resamples.
#   ours   `doc2ci compare gpt-4o llama3.1-8b --format jsonl` (reads the warehouse, joins, tests, writes
#          the comparisons partition and its page), best of 3
#   peer   bench/compare_peer.py: DuckDB reads the same Parquet files, pandas joins, scipy bootstraps and
#          tests, statsmodels McNemar and Holm (Python start-up and imports included), best of 3
# Env: WORK (scratch), SKIP_BUILD=1, WAREHOUSE (an existing llm4ci warehouse to reuse), A, B (models).
set -euo pipefail
. "$(dirname "$0")/lib.sh"
DATA="${DOC2CI_LLM4CI:-$(cd .. && pwd)/shared/data/llm4ci}"
A="${A:-gpt-4o}"
B="${B:-llama3.1-8b}"
bench_init compare
BIN="$CARGO_TARGET_DIR/release/doc2ci"
[ "${SKIP_BUILD:-0}" = 1 ] || flock /tmp/doc2ci-cargo.lock cargo build --quiet --release --bin doc2ci
say "# bench/compare.sh $(date -u +%FT%TZ) on $(nproc) cores; load $(cut -d' ' -f1-3 /proc/loadavg)"
WH="${WAREHOUSE:-$WORK/wh}"
STUDY="$WORK/study.toml"
sed "s#warehouse = \"../warehouse-llm4ci\"#warehouse = \"$WH\"#; s#\.\./\.\./shared/data/llm4ci#$DATA#" examples/llm4ci.toml > "$STUDY"
if [ ! -d "$WH/scores" ]; then
  say "building the llm4ci warehouse in $WH (import, validate, score: a few minutes)"
  printf '\n[stages.stats]\nenabled = false\n[stages.report]\nenabled = false\n' >> "$STUDY"
  "$BIN" run --quiet --config "$STUDY"
fi
best() { sort -g | head -1; }
ours=$(for _ in 1 2 3; do s=$(now); "$BIN" compare "$A" "$B" -c "$STUDY" --format jsonl > "$WORK/ours.jsonl"; e=$(now); py "print(round($e-$s, 3))"; done | best)
peer=$(for _ in 1 2 3; do python3 bench/compare_peer.py "$WH" "$A" "$B" 2000 | py "import json,sys; print(round(json.load(sys.stdin)['seconds'], 3))"; done | best)
tests=$(grep -c '"kind":"test"' "$WORK/ours.jsonl" || true)
flips=$(grep -c '"kind":"flip"' "$WORK/ours.jsonl" || true)
say "$A vs $B: $tests tests, $flips flipped samples"
say "ours $ours s, peer (DuckDB + pandas + scipy + statsmodels) $peer s, peer/ours $(py "print(round($peer/$ours, 2))")"
