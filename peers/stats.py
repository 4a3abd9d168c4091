"""Peer of doc2ci-stats: reads a JSON list of cases (argv[1]) and prints what scipy, statsmodels,
scikit-learn and numpy compute for each, with their default arguments (the ones the crate documents).

pip install scipy==1.17.1 statsmodels==0.15.0 scikit-learn==1.9.1 numpy==2.4.6
"""
import json
import math
import sys
import warnings

import numpy as np
from scipy import stats
from sklearn.metrics import cohen_kappa_score
from statsmodels.stats.contingency_tables import mcnemar
from statsmodels.stats.multitest import multipletests

warnings.simplefilter("ignore")


def num(v):
    v = float(v)
    return None if math.isnan(v) else v


def run(case):
    k = case["kind"]
    if k == "friedman":
        cols = list(zip(*case["blocks"]))
        r = stats.friedmanchisquare(*[np.asarray(c, dtype=float) for c in cols])
        return {"statistic": num(r.statistic), "p": num(r.pvalue)}
    if k == "wilcoxon":
        x, y = np.asarray(case["x"], float), np.asarray(case["y"], float)
        r = stats.wilcoxon(x, y)
        d = x - y
        d = d[d != 0]
        ranks = stats.rankdata(np.abs(d))
        rp, rm = ranks[d > 0].sum(), ranks[d < 0].sum()
        rb = (rp - rm) / (rp + rm) if rp + rm > 0 else 0.0
        return {"statistic": num(r.statistic), "p": num(r.pvalue), "rank_biserial": float(rb)}
    if k == "mannwhitneyu":
        r = stats.mannwhitneyu(case["x"], case["y"])
        x, y = np.asarray(case["x"], float), np.asarray(case["y"], float)
        s = np.sign(x[:, None] - y[None, :])
        return {"statistic": num(r.statistic), "p": num(r.pvalue), "cliffs_delta": float(s.mean())}
    if k == "spearman":
        r = stats.spearmanr(case["x"], case["y"])
        return {"statistic": num(r.statistic), "p": num(r.pvalue)}
    if k == "mcnemar":
        b, c = case["b"], case["c"]
        table = [[0, b], [c, 0]]
        r = mcnemar(table, exact=b + c < 25, correction=True)
        return {"statistic": num(r.statistic), "p": num(r.pvalue)}
    if k == "holm":
        return {"adjusted": [float(v) for v in multipletests(case["p"], method="holm")[1]]}
    if k == "kappa":
        return {"kappa": num(cohen_kappa_score(case["a"], case["b"]))}
    if k == "percentile":
        v = np.asarray(case["x"], float)
        return {"low": float(np.percentile(v, case["q"][0])), "high": float(np.percentile(v, case["q"][1]))}
    if k == "bootstrap":
        # scipy's own percentile bootstrap draws different resamples; only the order of magnitude
        # can agree, so the test compares with a wide tolerance.
        r = stats.bootstrap((np.asarray(case["x"], float),), np.mean, n_resamples=case["resamples"],
                            method="percentile", rng=np.random.default_rng(0))
        return {"low": float(r.confidence_interval.low), "high": float(r.confidence_interval.high)}
    if k == "pass_at_k":
        n, c, kk = case["n"], case["c"], case["k"]
        if n - c < kk:
            v = 1.0
        else:
            v = 1.0 - np.prod(1.0 - kk / np.arange(n - c + 1, n + 1))
        return {"value": float(v)}
    raise ValueError(k)


def main():
    with open(sys.argv[1]) as f:
        cases = json.load(f)
    json.dump([run(c) for c in cases], sys.stdout)


main()
