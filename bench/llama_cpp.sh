#!/usr/bin/env bash
# The `llama-cpp` backend (llama.cpp's own server, started by doc2ci) against the embedded kernel, on the
# same GGUF (SmolLM2-135M-Instruct Q4_1, the `doc2ci setup` asset) and the same N real llm4ci prompts
# (greedy, MAX_TOKENS each): one stream (parallel = 1, embedded concurrency = 1) and a partition
# decoded together (parallel = 4, embedded concurrency = 4). Each is its own study folder, request cache
# off, timed by its generation partition (`done generate ...: N rows in X s`, server start included for
# llama-cpp). Env: N (default 16), MAX_TOKENS (default 64), THREADS (llama.cpp threads, default 2).
set -euo pipefail
. "$(dirname "$0")/lib.sh"
bench_uncached
bench_assets
cargo build --quiet --release --locked --bin doc2ci
bin="$CARGO_TARGET_DIR/release/doc2ci"
"$bin" setup --quiet
N="${N:-16}" MAX_TOKENS="${MAX_TOKENS:-64}" THREADS="${THREADS:-2}"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
python3 - "$work/docs.csv" "$N" <<'PY'
import csv, gzip, sys
from pathlib import Path
csv.field_size_limit(1 << 30)
shared = Path.cwd().parent / "shared" / "data" / "llm4ci" / "GitHubActions_Docs.csv.gz"
with gzip.open(shared, "rt", newline="") as f:
    rows = list(csv.DictReader(f))[: int(sys.argv[2])]
with open(sys.argv[1], "w", newline="") as g:
    w = csv.DictWriter(g, fieldnames=list(rows[0].keys()))
    w.writeheader()
    w.writerows(rows)
PY
run() {  # name, model keys → "seconds tokens"
  local d="$work/$1"
  mkdir -p "$d"
  cat > "$d/pipeline.toml" <<TOML
[study]
warehouse = "wh"
threads = 1
[[services]]
name = "github-actions"
display = "GitHub Actions"
[[sources]]
name = "docs"
kind = "import"
format = "llm4ci"
path = "$work/docs.csv"
service = "github-actions"
[[models]]
name = "$1"
max_tokens = $MAX_TOKENS
$2
[stages.validate]
enabled = false
[stages.score]
enabled = false
[stages.lint]
enabled = false
TOML
  "$bin" run --config "$d/pipeline.toml" 2>&1 | sed -n 's/^done generate .*: \([0-9]*\) rows in \([0-9.]*\)s (.* \([0-9]*\) tokens generated).*/\2 \3/p'
}
printf '%-34s %8s %8s %8s\n' backend seconds tokens tok/s
declare -A rate
for par in 1 4; do
  for b in embedded llama-cpp; do
    if [ "$b" = embedded ]; then keys="backend = \"embedded\"
concurrency = $par"; else keys="backend = \"llama-cpp\"
model = \"$GGUF\"
parallel = $par
concurrency = $par
threads = $THREADS"; fi
    read -r s t < <(run "$b-$par" "$keys")
    r=$(python3 -c "print(round($t / $s, 1))")
    rate[$b-$par]=$r
    printf '%-34s %8s %8s %8s\n' "$b (parallel $par)" "$s" "$t" "$r"
  done
done
for par in 1 4; do
  python3 -c "print(f'parallel $par: embedded / llama-cpp = {${rate[embedded-$par]} / ${rate[llama-cpp-$par]}:.2f}x')"
done
