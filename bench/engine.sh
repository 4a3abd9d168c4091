#!/usr/bin/env bash
# Engine benchmark (issue 2): full import+dedupe of the real llm4ci study, and a no-op re-run,
# against pandas read_csv + drop_duplicates on the same files, side by side. Prints ratios.
set -euo pipefail
cd "$(dirname "$0")/.."
export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-$HOME/.cache/doc2ci-target}"
python3 -m pip show -q pandas >/dev/null 2>&1 || python3 -m pip install -q pandas
# release (default): the binary users and the tests run; BENCH_PROFILE=dev: a developer build.
profile="${BENCH_PROFILE:-release}"
cargo build --quiet --profile "$profile" --bin doc2ci
if [ "$profile" = dev ]; then bin="$CARGO_TARGET_DIR/debug/doc2ci"; else bin="$CARGO_TARGET_DIR/$profile/doc2ci"; fi
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
sed "s#warehouse = \"../warehouse-llm4ci\"#warehouse = \"$work/wh\"#; s#\.\./\.\./shared#$(cd .. && pwd)/shared#" examples/llm4ci.toml > "$work/study.toml"

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
f=$(best "${full[@]}"); n=$(best "${noop[@]}"); p=$(best "${pandas[@]}")
echo "doc2ci import+dedupe (7 files, 9,226 rows, written as Parquet): ${f}s"
echo "pandas read_csv + drop_duplicates + merge (in memory only):       ${p}s"
python3 -c "print(f'ratio pandas/doc2ci: {$p/$f:.2f}x')"
echo "doc2ci no-op re-run: ${n}s (goal < 0.5 s)"
