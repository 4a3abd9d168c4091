#!/usr/bin/env python3
"""Computes doc2ci's SPEC §5 metrics the peer way for the differential test of doc2ci-score.

Peers: sacrebleu (bleu, chrf), crystalbleu (crystal_bleu), zss (tree_edit), rapidfuzz (levenshtein),
ruamel.yaml safe/pure loader (canon, tree, kv), deepdiff + CloudEval-YAML's kv_match/kv_wildcard
code (kv_exact, kv_wildcard). ROUGE-L is not here: its peer (pytorch-ignite) needs torch, so its values
are committed by rouge_ignite_peer.py.

Usage: metrics_peer.py [--data DIR] [--all]   (JSON on stdout)
"""

import argparse
import json
import math
import sys
import warnings
from collections import Counter

import crystalbleu
from deepdiff import DeepDiff
from nltk.util import ngrams
from rapidfuzz.distance import Levenshtein
from ruamel.yaml import YAML
from ruamel.yaml.constructor import SafeConstructor
from sacrebleu.metrics import BLEU, CHRF
import sacrebleu
import zss

from peers import metric_cases as cases
from peers.data import clean
from peers.zss_tree import yaml_tree



def lj(x):
    return " ".join(l.strip() for l in clean(x).splitlines() if l.strip())


def safe_yaml():
    return YAML(typ="safe", pure=True)


def canon(x):
    c = clean(x)
    try:
        v = safe_yaml().load(c)
        if isinstance(v, (dict, list)):
            return json.dumps(v, sort_keys=True, ensure_ascii=False, separators=(",", ":"), default=str)
    except Exception:
        pass
    return "\n".join(l.strip() for l in c.splitlines() if l.strip())


# --- tree_edit: a safe load that keeps numbers, timestamps and nulls as written -------------------

class AsWritten:
    """A scalar whose tree label is its source text; hashes and compares like the value a plain safe
    load builds, so duplicate-key detection and merges behave exactly as in that load."""

    __slots__ = ("text", "value")

    def __init__(self, text, value):
        self.text = text
        self.value = value

    def __hash__(self):
        return hash(self.value)

    def __eq__(self, other):
        return self.value == (other.value if isinstance(other, AsWritten) else other)


class TreeConstructor(SafeConstructor):
    pass


def _as_written(base):
    def construct(self, node):
        return AsWritten(node.value, base(self, node))
    return construct


for _tag, _base in [
    ("tag:yaml.org,2002:int", SafeConstructor.construct_yaml_int),
    ("tag:yaml.org,2002:float", SafeConstructor.construct_yaml_float),
    ("tag:yaml.org,2002:timestamp", SafeConstructor.construct_yaml_timestamp),
    ("tag:yaml.org,2002:null", SafeConstructor.construct_yaml_null),
]:
    TreeConstructor.add_constructor(_tag, _as_written(_base))


def tree_yaml():
    y = YAML(typ="safe", pure=True)
    y.Constructor = TreeConstructor
    return y


def label(v):
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, AsWritten):
        return v.text
    return v if isinstance(v, str) else str(v)


def is_null(v):
    return v is None or (isinstance(v, AsWritten) and v.value is None)


def build_tree(x):
    try:
        v = tree_yaml().load(clean(x))
    except Exception:
        return zss.Node("root"), 1
    return yaml_tree(zss, v, label, is_null)


def unit_label_dist(a, b):
    # Pinned: zss picks a string edit distance instead when an editdistance module is importable.
    return 0 if a == b else 1


def tree_edit(ref, out):
    t1, n1 = build_tree(ref)
    t2, n2 = build_tree(out)
    d = zss.simple_distance(t1, t2, label_dist=unit_label_dist)
    return max(0.0, min(1.0, 1 - d / (2 * max(n1, n2)))), int(d), n1, n2


# --- kv_exact / kv_wildcard: an independent implementation of CloudEval-YAML's definitions ----------
# (its summary: /work/shared/seeds/cloudeval-yaml-summary.txt). Documents are compared as data:
# kv_exact = same number of documents and each pair equal under DeepDiff; kv_wildcard = leaf
# (key path, value) intersection over union, summed over documents, a reference key marked with a
# trailing `*` matching any value. Texts are clean(x) loaded as YAML 1.2; any failure scores 0.

def load_all(text):
    return list(safe_yaml().load_all(text))


def kv_match_test(out_text, ref_text):
    try:
        outs = load_all(out_text)
        refs = load_all(ref_text)
    except Exception:
        return False
    if not refs or len(outs) != len(refs):
        return False
    return all(len(DeepDiff(a, b)) == 0 for a, b in zip(outs, refs))


def mark_wildcards(text):
    """A line `key: value  # …*` marks `key` as a wildcard (`key*`)."""
    lines = []
    for line in text.splitlines():
        if "#" in line and line.rstrip().endswith("*"):
            head, tail = line.split(":", 1)
            line = f"{head.rstrip()}*:{tail}"
        lines.append(line)
    return "\n".join(lines) + ("\n" if text.endswith("\n") else "")


def leaves(mapping, prefix=()):
    """(key path, value, wildcard) of every leaf; lists of mappings are walked item by item."""
    found = []
    for key, value in mapping.items():
        path = prefix + (key.rstrip("*"),)
        if isinstance(value, dict):
            found += leaves(value, path)
        elif isinstance(value, list) and value and isinstance(value[0], dict):
            for item in value:
                found += leaves(item, path)
        else:
            found.append((list(path), value, key.endswith("*")))
    return found


def matched(out_leaves, ref_leaves):
    hits = 0
    for rpath, rvalue, rwild in ref_leaves:
        if any(opath == rpath and (rwild or ovalue == rvalue) for opath, ovalue, _ in out_leaves):
            hits += 1
    return hits


def kv_wildcard_test(out_text, ref_text):
    try:
        outs = load_all(out_text)
    except Exception:
        return 0.0
    refs = load_all(mark_wildcards(ref_text))  # raises: the caller scores 0
    if not refs:
        raise ValueError("reference has no documents")
    n = max(len(outs), len(refs))
    outs = outs + [{}] * (n - len(outs))
    refs = refs + [{}] * (n - len(refs))
    inter = union = 0
    for o, r in zip(outs, refs):
        ol, rl = leaves(o), leaves(r)
        hit = matched(ol, rl)
        inter += hit
        union += len(ol) + len(rl) - hit
    return inter / union


def kv_scores(ref, out):
    r, o = clean(ref), clean(out)
    exact = float(bool(kv_match_test(o, r)))
    try:
        wild = float(kv_wildcard_test(o, r))
    except Exception:
        wild = 0.0
    return exact, wild


# --- the lexical metrics -----------------------------------------------------------------------

CHRF_METRIC = CHRF(lowercase=True, whitespace=True, eps_smoothing=True)


def ignored_ngrams(refs):
    freq = Counter()
    for _, code in refs:
        toks = lj(code).split()
        for n in range(1, 5):
            freq.update(ngrams(toks, n))
    return dict(freq.most_common(500))


def lexical(lj_ref, lj_out, ignoring):
    if not lj_ref or not lj_out:
        return 0.0, 0.0, 0.0
    bleu = sacrebleu.sentence_bleu(lj_out, [lj_ref]).score / 100
    chrf = CHRF_METRIC.sentence_score(lj_out, [lj_ref]).score / 100
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        crystal = float(crystalbleu.sentence_bleu([lj_ref.split()], lj_out.split(), ignoring=ignoring))
    return bleu, chrf, crystal


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--data", default=cases.default_data_dir())
    ap.add_argument("--all", action="store_true", help="score all 7,908 real outputs, not the sample")
    args = ap.parse_args()
    refs, pairs = cases.cases(args.data, everything=args.all)
    ignoring = ignored_ngrams(refs)
    rows = []
    for key, ref, out in pairs:
        lr, lo = lj(ref), lj(out)
        cr, co = canon(ref), canon(out)
        bleu, chrf, crystal = lexical(lr, lo, ignoring)
        te, d, n1, n2 = tree_edit(ref, out)
        lev = Levenshtein.normalized_similarity(co, cr)
        kv_exact, kv_wild = kv_scores(ref, out)
        rows.append({
            "key": key, "reference": ref, "output": out,
            "clean_ref": clean(ref), "clean_out": clean(out), "lj_ref": lr, "lj_out": lo,
            "canon_ref": cr, "canon_out": co,
            "bleu": bleu, "chrf": chrf, "crystal_bleu": crystal,
            "tree_edit": te, "tree_distance": d, "tree_nodes": [n1, n2],
            "levenshtein": lev, "exact": 1.0 if lev == 1.0 else 0.0,
            "kv_exact": kv_exact, "kv_wildcard": kv_wild,
        })
    json.dump({
        "ignored": [[list(g), c] for g, c in ignoring.items()],
        "references": [[i, code] for i, code in refs],
        "rows": rows,
    }, sys.stdout, ensure_ascii=False)


if __name__ == "__main__":
    main()
