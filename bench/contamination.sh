#!/usr/bin/env bash
# The contamination screen on real data: every llm4ci reference (GitHub Actions, deduplicated) and its
# twin, continued by SmolLM2-135M-Instruct (`embedded`: raw completion and Min-K% Prob by teacher
# forcing) and by Gemma 3 270M Q4_K_M (`llama-cpp`: raw completion on llama.cpp's /v1/completions,
# no Min-K%: the server echoes no prompt log-probabilities).
# Prints per model the rates, the sign test and the AUC (the `stats` rows) and contamination_summary.
# Env: PREFIX (default 10), SUFFIX (default 20): the cut, in whitespace tokens (DevOps-Gym's 50 + 50
# screens only 63 of the 1,318 references); MAX_PAIRS (default: all); MODELS (default "smollm2 gemma3").
set -euo pipefail
. "$(dirname "$0")/lib.sh"
bench_init contamination
bench_assets
cargo build --quiet --release --locked --bin doc2ci
bin="$CARGO_TARGET_DIR/release/doc2ci"
"$bin" setup --quiet
PREFIX="${PREFIX:-10}" SUFFIX="${SUFFIX:-20}" MODELS="${MODELS:-smollm2 gemma3}"
gemma="${DOC2CI_TEST_MODELS:-$HOME/.cache/doc2ci/test-models}/gemma-3-270m-q4_k_m.gguf"
[ -f "$gemma" ] || { echo "contamination: $gemma missing: run scripts/deps.sh test" >&2; exit 1; }
data="$(cd .. && pwd)/shared/data/llm4ci/GitHubActions_Docs.csv.gz"
limit=""
[ -n "${MAX_PAIRS:-}" ] && limit="max_pairs = $MAX_PAIRS"
for m in $MODELS; do
  case "$m" in
    smollm2) entry='backend = "embedded"' ;;
    gemma3) entry="backend = \"llama-cpp\"
model = \"$gemma\"
chat_template = \"gemma\"" ;;
    *) echo "contamination: unknown model $m (smollm2, gemma3)" >&2; exit 1 ;;
  esac
  d="$WORK/$m"
  mkdir -p "$d"
  cat > "$d/pipeline.toml" <<TOML
[study]
warehouse = "wh"
[[services]]
name = "github-actions"
display = "GitHub Actions"
[[sources]]
name = "llm4ci-docs"
kind = "import"
format = "llm4ci"
path = "$data"
service = "github-actions"
[[models]]
name = "$m"
$entry
# The study's own generation is not what this bench measures: one pair.
max_tokens = 16
max_pairs = 1
[stages.score]
enabled = false
[stages.lint]
enabled = false
[stages.repair]
enabled = false
[stages.contamination]
enabled = true
prefix_tokens = $PREFIX
suffix_tokens = $SUFFIX
$limit
TOML
  start=$(now)
  "$bin" run --quiet --config "$d/pipeline.toml"
  say "$m: screened in $(py "print(f'{$(now) - $start:.0f}')") s (prefix $PREFIX + suffix $SUFFIX tokens)"
  "$bin" sql --config "$d/pipeline.toml" --format csv \
    "SELECT test, group_b, n, effect, ci_low, ci_high, p, b, c FROM stats WHERE metric = 'contamination' ORDER BY test, group_b" | tee -a "$SUMMARY"
  "$bin" sql --config "$d/pipeline.toml" --format csv "SELECT * FROM contamination_summary" | tee -a "$SUMMARY"
done
echo "summary: $SUMMARY; studies under $WORK"
