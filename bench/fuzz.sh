#!/usr/bin/env bash
# Differential fuzzing, longer than the suite runs it (issue 31): the YAML loader against ruamel.yaml
# on generated and mutated CI-like documents (libs/yaml/tests/fuzz_ruamel.rs, fixed seed), with the
# test's summary: cases that agree, that both refuse, documented differences by kind, and any other.
#   bench/fuzz.sh [CASES]   (default 200000)
set -euo pipefail
cd "$(dirname "$0")/.."
export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-$HOME/.cache/doc2ci-target}"
cases="${1:-200000}"
start=$(date +%s.%N)
out=$(DOC2CI_FUZZ_CASES="$cases" /usr/bin/time -f 'peak RSS %M KiB' cargo test --release --locked --quiet -p doc2ci-yaml \
  --test fuzz_ruamel -- --nocapture 2>&1 || true)
end=$(date +%s.%N)
echo "$out" | grep -E "cases:|undocumented differences|^\"|  doc2ci:|  ruamel:|peak RSS" | head -60
python3 -c "print(f'{$end - $start:.1f} s for $cases cases (loader, peer and comparison)')"
