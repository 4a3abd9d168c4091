#!/usr/bin/env python3
"""Writes ../data/rouge_l_ignite.json: pytorch-ignite's RougeL(alpha=0.5) F for the same pairs
metrics_peer.py scores. Committed because ignite needs torch, too heavy to install for every test
run; rerun it whenever cases.py or the definition of lj changes (the test checks lj_out/lj_ref
fingerprints and fails on drift).

Usage: rouge_ignite_peer.py [--data DIR]
"""

import argparse
import hashlib
import json
import os

from ignite.metrics import RougeL

from peers import metric_cases as cases
from peers.metrics import lj
from peers import ROOT


def fingerprint(text):
    return hashlib.sha256(text.encode("utf-8")).hexdigest()[:16]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--data", default=cases.default_data_dir())
    args = ap.parse_args()
    _, pairs = cases.cases(args.data)
    rows = []
    for key, ref, out in pairs:
        lr, lo = lj(ref), lj(out)
        if not lr or not lo:
            value = 0.0  # SPEC §5: empty lj on either side gives 0
        else:
            m = RougeL(multiref="best", alpha=0.5)
            m.reset()
            m.update(([lo.split()], [[lr.split()]]))
            value = float(m.compute()["Rouge-L-F"])
        rows.append({"key": key, "lj": fingerprint(lr + "\0" + lo), "rouge_l": value})
    path = os.path.join(ROOT, "stages", "score", "tests", "data", "rouge_l_ignite.json")
    with open(path, "w", encoding="utf-8") as f:
        f.write('{"peer": "pytorch-ignite RougeL(multiref=\'best\', alpha=0.5), Rouge-L-F",\n"rows": [\n')
        f.write(",\n".join(json.dumps(r, ensure_ascii=False) for r in rows))
        f.write("\n]}\n")


if __name__ == "__main__":
    main()
