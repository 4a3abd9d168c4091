#!/usr/bin/env bash
# Fuzzing, longer than the suite runs it (issue 31), each target with its figures:
#  yaml:       the YAML loader against ruamel.yaml on generated and mutated CI-like documents
#              (libs/yaml/tests/fuzz_ruamel.rs, fixed seed): cases that agree, that both refuse,
#              documented differences by kind, and any other.
#  extraction: page extraction against the BeautifulSoup reference (peers/realdocs/fuzz_pages.py
#              pages in the four sites' markup, crawled over HTTP; tests/e2e/realdocs.rs): pairs
#              equal per site, and the known differences counted (libs/yaml's tab in a plain
#              scalar; html5lib's tree where Chromium's gives doc2ci's pairs).
#  inputs:     the import readers and the HTTP paths on hostile inputs (tests/e2e/hostile.rs):
#              cases, the slowest and the peak memory of the worst.
#   bench/fuzz.sh [yaml|extraction|inputs|all]   env: CASES (yaml, default 200000), INPUT_CASES (inputs, 300),
#   PAGES (extraction, pages per site and seed, default 2000), SEEDS (default "1 2 3")
set -euo pipefail
. "$(dirname "$0")/lib.sh"
what="${1:-all}"
secs() { python3 -c "print(f'{$2 - $1:.1f} s')"; }

if [ "$what" = yaml ] || [ "$what" = all ]; then
  cases="${CASES:-200000}"
  start=$(date +%s.%N)
  out=$(DOC2CI_FUZZ_CASES="$cases" /usr/bin/time -f 'peak RSS %M KiB' cargo test --release --locked --quiet -p doc2ci-yaml \
    --test fuzz_ruamel -- --nocapture 2>&1 || true)
  echo "== yaml: $cases cases"
  echo "$out" | grep -E "cases:|undocumented differences|^\"|  doc2ci:|  ruamel:|peak RSS" | head -60
  echo "$(secs "$start" "$(date +%s.%N)") (loader, peer and comparison)"
fi

if [ "$what" = extraction ] || [ "$what" = all ]; then
  for seed in ${SEEDS:-1 2 3}; do
    start=$(date +%s.%N)
    out=$(DOC2CI_FUZZ_PAGES="${PAGES:-2000}" DOC2CI_FUZZ_SEED="$seed" cargo test --release --locked --quiet --test e2e \
      extraction_fuzzed -- --nocapture 2>&1 || true)
    echo "== extraction: seed $seed"
    echo "$out" | grep -E "extraction fuzz|pages differ|reference:|doc2ci: " | cut -c1-400 | head -20
    echo "$(secs "$start" "$(date +%s.%N)") (generation, reference, crawl, comparison)"
  done
fi

if [ "$what" = inputs ] || [ "$what" = all ]; then
  start=$(date +%s.%N)
  out=$(DOC2CI_FUZZ_CASES="${INPUT_CASES:-300}" cargo test --release --locked --quiet --test e2e hostile_inputs -- --nocapture 2>&1 || true)
  echo "== inputs"
  echo "$out" | grep -E "fuzz|panicked|FAILED" | head -40
  echo "$(secs "$start" "$(date +%s.%N)")"
fi
