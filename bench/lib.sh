# shellcheck shell=bash
# The preamble the bench scripts share, sourced first thing: `. "$(dirname "$0")/lib.sh"`.
# It owns what must agree across them, so that changing it once changes every bench: where they
# run from (the repo root, whatever the caller's folder), which build they time ($CARGO_TARGET_DIR,
# the tests' and quickstart's default), where the `doc2ci setup` assets are looked for, and the
# output layout bench/README.md promises (bench/out/NAME/, git-ignored; scratch under /tmp).
# What each bench measures, and its own settings, stay in the script.

cd "$(dirname "${BASH_SOURCE[0]}")/.." || exit
export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-$HOME/.cache/doc2ci-target}"

# bench_init NAME: WORK (scratch: $WORK if set, else a new /tmp/doc2ci-NAME.* left for the caller to
# inspect) and OUT=bench/out/NAME with an empty SUMMARY that `say` appends to: one run's figures only.
bench_init() {
  WORK="${WORK:-$(mktemp -d "/tmp/doc2ci-$1.XXXXXX")}"
  OUT="bench/out/$1"
  mkdir -p "$OUT" "$WORK"
  SUMMARY="$OUT/summary.txt"
  : > "$SUMMARY"
}
say() { echo "$*" | tee -a "$SUMMARY"; }
now() { date +%s.%N; }
py() { python3 -c "$@"; }

# Generation benches ask every request: the request cache shared across studies would answer a second run.
bench_uncached() { export DOC2CI_REQUEST_CACHE=off; }

# bench_assets: ASSETS, the `doc2ci setup` folder (DOC2CI_ASSETS moves it), and GGUF, the SmolLM2 file
# in it that doc2ci and the llama.cpp peers are both given, so the two sides run the same model.
bench_assets() {
  ASSETS="${DOC2CI_ASSETS:-$HOME/.cache/doc2ci/assets}"
  # shellcheck disable=SC2034  # read by the sourcing script
  GGUF="$ASSETS/models/smollm2-135m-instruct/SmolLM2-135M-Instruct.Q4_1.gguf"
}
