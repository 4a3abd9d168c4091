#!/usr/bin/env bash
# Engine benchmark (issues 2 and 30): import+dedupe of the real llm4ci study against pandas read_csv +
# drop_duplicates on the same files, side by side (prints the ratio); and the no-op re-run of the whole
# llm4ci study (every stage: each partition's file checked against what was published).
set -euo pipefail
. "$(dirname "$0")/lib.sh"
python3 -m pip show -q pandas >/dev/null 2>&1 || python3 -m pip install -q pandas
# release (default): the binary users and the tests run; BENCH_PROFILE=dev: a developer build.
profile="${BENCH_PROFILE:-release}"
cargo build --quiet --profile "$profile" --bin doc2ci
if [ "$profile" = dev ]; then bin="$CARGO_TARGET_DIR/debug/doc2ci"; else bin="$CARGO_TARGET_DIR/$profile/doc2ci"; fi
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
sed "s#warehouse = \"../warehouse-llm4ci\"#warehouse = \"$work/wh\"#; s#\.\./\.\./shared#$(cd .. && pwd)/shared#" examples/llm4ci.toml > "$work/full.toml"
# The pandas comparison is import + dedupe only.
{ cat "$work/full.toml"; printf '\n[stages.%s]\nenabled = false\n' validate score lint stats report; } > "$work/study.toml"

best() { python3 -c "import sys; print(min(float(x) for x in sys.argv[1:]))" "$@"; }
t() { local s e; s=$(date +%s.%N); "$@" >/dev/null 2>&1; e=$(date +%s.%N); python3 -c "print($e-$s)"; }

full=(); noop=()
for _ in 1 2 3; do
  rm -rf "$work/wh"
  full+=("$(t "$bin" run --quiet --config "$work/study.toml")")
  noop+=("$(t "$bin" run --quiet --config "$work/study.toml")")
done
pandas=()
for _ in 1 2 3; do
  pandas+=("$(python3 bench/pandas_import.py ../shared/data/llm4ci)")
done
"$bin" run --quiet --config "$work/full.toml" >/dev/null 2>&1
whole=()
for _ in 1 2 3; do
  whole+=("$(t "$bin" run --quiet --config "$work/full.toml")")
done
f=$(best "${full[@]}"); n=$(best "${noop[@]}"); p=$(best "${pandas[@]}"); w=$(best "${whole[@]}")
echo "doc2ci import+dedupe (7 files, 9,226 rows, written as Parquet): ${f}s"
echo "pandas read_csv + drop_duplicates + merge (in memory only):       ${p}s"
python3 -c "print(f'ratio pandas/doc2ci: {$p/$f:.2f}x')"
echo "doc2ci no-op re-run, import+dedupe: ${n}s; the whole study ($(ls "$work/wh" | wc -l) tables): ${w}s (goal < 0.5 s)"
