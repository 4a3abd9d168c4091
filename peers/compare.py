"""Peer of `doc2ci compare` (doc2ci_stats::compare): two sides joined by a pandas merge, each metric
tested as scipy and statsmodels test it, and the flipped samples and largest swings listed by pandas.

argv[1]: a JSON list of cases, each {"a": rows, "b": rows, "metrics": [{"name", "binary"}],
"resamples", "n_indices": n, "offset": byte offset}; argv[2]: the resample indices of every case
(uint16 little-endian, resamples × n each, at its offset), which scipy.stats.bootstrap is fed in
place of its own draws so both sides resample the same pairs. Rows: {"pair_id", metric: value}.
Prints one result per case.

pip install scipy==1.17.1 statsmodels==0.15.0 numpy==2.4.6 pandas==3.1.1
"""
import json
import math
import sys
import warnings

import numpy as np
import pandas as pd
import scipy.stats._resampling as resampling
from scipy import stats
from statsmodels.stats.contingency_tables import mcnemar
from statsmodels.stats.multitest import multipletests

warnings.simplefilter("ignore")


def num(v):
    v = float(v)
    return None if math.isnan(v) else v


def bootstrap_ci(x, y, idx):
    """scipy's paired percentile bootstrap of mean(y - x), drawing exactly `idx`."""
    saved = resampling.rng_integers
    resampling.rng_integers = lambda rng, low, high, size: idx
    try:
        r = stats.bootstrap((x, y), lambda a, b, axis=-1: np.mean(b - a, axis=axis), paired=True,
                            vectorized=True, n_resamples=idx.shape[0], method="percentile",
                            confidence_level=0.95, batch=None)
    finally:
        resampling.rng_integers = saved
    return float(r.confidence_interval.low), float(r.confidence_interval.high)


def cliffs_delta(y, x):
    """P(y > x) - P(y < x) by counting every cross pair (independent of any rank formula)."""
    return float(np.sign(y[:, None] - x[None, :]).mean())


def run(case, blob):
    a, b = pd.DataFrame(case["a"]), pd.DataFrame(case["b"])
    m = a.merge(b, on="pair_id", how="outer", suffixes=("_a", "_b"), indicator=True)
    only_a = sorted(m.loc[m["_merge"] == "left_only", "pair_id"])
    only_b = sorted(m.loc[m["_merge"] == "right_only", "pair_id"])
    j = m[m["_merge"] == "both"].sort_values("pair_id").reset_index(drop=True)
    n = len(j)
    assert n == case["n_indices"], (n, case["n_indices"])
    idx = np.frombuffer(blob, dtype="<u2", count=case["resamples"] * n, offset=case["offset"])
    idx = idx.reshape(case["resamples"], n).astype(np.intp)
    tests, flips, swings = {}, {}, {}
    for metric in case["metrics"]:
        name = metric["name"]
        x, y = j[name + "_a"].to_numpy(float), j[name + "_b"].to_numpy(float)
        lo, hi = bootstrap_ci(x, y, idx)
        t = {"n": n, "mean_a": float(x.mean()), "mean_b": float(y.mean()), "diff": float((y - x).mean()),
             "ci_low": lo, "ci_high": hi, "cliffs_delta": cliffs_delta(y, x)}
        if metric["binary"]:
            bb = int(((x == 1) & (y == 0)).sum())
            cc = int(((x == 0) & (y == 1)).sum())
            r = mcnemar([[0, bb], [cc, 0]], exact=bb + cc < 25, correction=True)
            t.update(statistic=num(r.statistic), p=num(r.pvalue), a_only=bb, b_only=cc)
            f = j.loc[j[name + "_a"] != j[name + "_b"], "pair_id"]
            flips[name] = sorted(f)
        else:
            if (x == y).all():
                t.update(statistic=0.0, p=1.0)
            else:
                r = stats.wilcoxon(x, y)
                t.update(statistic=num(r.statistic), p=num(r.pvalue))
            d = j.assign(absd=(j[name + "_b"] - j[name + "_a"]).abs())
            d = d[d["absd"] > 0].sort_values(["absd", "pair_id"], ascending=[False, True], kind="mergesort")
            swings[name] = list(d["pair_id"].head(case["swings"]))
        tests[name] = t
    names = [mm["name"] for mm in case["metrics"]]
    adjusted = multipletests([tests[k]["p"] for k in names], method="holm")[1]
    for k, h in zip(names, adjusted):
        tests[k]["p_holm"] = float(h)
    return {"only_a": only_a, "only_b": only_b, "tests": tests, "flips": flips, "swings": swings}


def main():
    with open(sys.argv[1]) as f:
        cases = json.load(f)
    with open(sys.argv[2], "rb") as f:
        blob = f.read()
    json.dump([run(c, blob) for c in cases], sys.stdout)


main()
