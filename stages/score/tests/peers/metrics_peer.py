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
import re
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

import cases

_COMMENT = re.compile(r'(?<!["\'])#.*')


def clean(x):
    out = []
    for line in x.splitlines():
        if line.strip().startswith("#"):
            continue
        line = _COMMENT.sub("", line).rstrip()
        if not line:
            continue
        out.append(line)
    return "\n".join(out)


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
    root = zss.Node("root")
    try:
        v = tree_yaml().load(clean(x))
    except Exception:
        return root, 1
    count = [1]

    def attach(parent, v):
        if isinstance(v, dict):
            kids = [(label(k), val) for k, val in v.items()]
        elif isinstance(v, list):
            kids = [(f"item_{i}", item) for i, item in enumerate(v)]
        elif is_null(v):
            return
        else:
            parent.addkid(zss.Node(label(v)))
            count[0] += 1
            return
        for lab, val in kids:
            n = zss.Node(lab)
            parent.addkid(n)
            count[0] += 1
            attach(n, val)

    attach(root, v)
    return root, count[0]


def unit_label_dist(a, b):
    # Pinned: zss picks a string edit distance instead when an editdistance module is importable.
    return 0 if a == b else 1


def tree_edit(ref, out):
    t1, n1 = build_tree(ref)
    t2, n2 = build_tree(out)
    d = zss.simple_distance(t1, t2, label_dist=unit_label_dist)
    return max(0.0, min(1.0, 1 - d / (2 * max(n1, n2)))), int(d), n1, n2


# --- kv_exact / kv_wildcard: CloudEval-YAML's metrics/kv_match.py and metrics/kv_wildcard.py -------
# Their code, with PyYAML's YAML 1.1 safe_load_all replaced by the YAML 1.2 loader doc2ci uses
# everywhere, applied to clean(x); failures score 0 as CloudEval's evaluate.py does.

def load_all(text):
    return list(safe_yaml().load_all(text))


def kv_match_test(result_str, reference_str):
    try:
        l1 = load_all(result_str)
    except Exception:
        return 0
    try:
        l2 = load_all(reference_str)
        assert len(l2) > 0
    except Exception:
        return 0
    if len(l1) != len(l2):
        return False
    for d1, d2 in zip(l1, l2):
        if len(DeepDiff(d1, d2)) > 0:
            return False
    return True


def append_labels_to_keys(kv_labeled_str):
    output_lines = []
    for line in kv_labeled_str.splitlines():
        if "#" in line and line.rstrip().endswith("*"):
            split = line.split(":", 1)
            output_lines.append(split[0].rstrip() + "*:" + split[1])
        else:
            output_lines.append(line)
    if kv_labeled_str.endswith("\n"):
        output_lines.append("")
    return "\n".join(output_lines)


def get_leaf_nodes(target_dict):
    leaf_nodes = []
    for key, value in target_dict.items():
        if isinstance(value, dict):
            sub = get_leaf_nodes(value)
            leaf_nodes += [{"key_path": [key.rstrip("*")] + l["key_path"], "value": l["value"], "wildcard": l["wildcard"]} for l in sub]
        elif isinstance(value, list) and len(value) > 0 and isinstance(value[0], dict):
            for item in value:
                sub = get_leaf_nodes(item)
                leaf_nodes += [{"key_path": [key.rstrip("*")] + l["key_path"], "value": l["value"], "wildcard": l["wildcard"]} for l in sub]
        else:
            leaf_nodes.append({"key_path": [key.rstrip("*")], "value": value, "wildcard": key.endswith("*")})
    return leaf_nodes


def calc_intersection(target_leaf_nodes, reference_leaf_nodes):
    intersection = 0
    for r in reference_leaf_nodes:
        for t in target_leaf_nodes:
            if t["key_path"] == r["key_path"]:
                if r["wildcard"] or t["value"] == r["value"]:
                    intersection += 1
                    break
    return intersection


def kv_wildcard_test(result_str, kv_labeled_str):
    try:
        result_dict_list = load_all(result_str)
    except Exception:
        return False
    try:
        kv_labeled_dict_list = load_all(append_labels_to_keys(kv_labeled_str))
        assert len(kv_labeled_dict_list) > 0
    except Exception as e:
        raise Exception(f"Error occurred while loading [kv_labeled_str]: {e}") from e
    diff_len = len(result_dict_list) - len(kv_labeled_dict_list)
    if diff_len > 0:
        kv_labeled_dict_list += [{} for _ in range(diff_len)]
    elif diff_len < 0:
        result_dict_list += [{} for _ in range(abs(diff_len))]
    total_intersection = 0
    total_union = 0
    for result_dict, kv_labeled_dict in zip(result_dict_list, kv_labeled_dict_list):
        rl = get_leaf_nodes(result_dict)
        kl = get_leaf_nodes(kv_labeled_dict)
        inter = calc_intersection(rl, kl)
        total_intersection += inter
        total_union += len(rl) + len(kl) - inter
    return total_intersection / total_union


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
