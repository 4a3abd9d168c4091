#!/usr/bin/env python3
"""Peer of the stats stage for bench/stats.sh: the same core tests with scipy/statsmodels/numpy over a
warehouse (round 0, sample 0), timed. Prints JSON {"seconds": s, "tests": n}.

Per service and over all services: Friedman over models per similarity metric, pairwise Wilcoxon with
Holm and rank-biserial r, McNemar on schema validity per model pair, general-vs-code Mann-Whitney with
Cliff's delta, Spearman size vs mean, and percentile bootstrap CIs (2,000 resamples) of the means of
cosine, parse_ok and schema_ok per (service, model).

Usage: stats_peer.py WAREHOUSE
"""
import itertools
import json
import sys
import time
import warnings

import duckdb
import numpy as np
from scipy import stats
from statsmodels.stats.contingency_tables import mcnemar
from statsmodels.stats.multitest import multipletests

warnings.simplefilter("ignore")
wh = sys.argv[1]
SIM = ["cosine", "euclidean", "bleu", "crystal_bleu", "rouge_l", "chrf", "tree_edit", "levenshtein"]
t0 = time.perf_counter()
con = duckdb.connect()
df = con.execute(f"""select s.*, v.parse_ok::int as parse_ok, v.schema_ok::int as schema_ok
    from read_parquet('{wh}/scores/**/*.parquet', hive_partitioning=true) s
    join read_parquet('{wh}/validations/**/*.parquet', hive_partitioning=true) v using (pair_id, service, model, sample, round)
    where s.round = 0 and s.sample = 0""").df()
models = con.execute(f"select * from read_parquet('{wh}/models/**/*.parquet')").df()
t_load = time.perf_counter() - t0
n = 0
rng = np.random.default_rng(0)
for svc, d in list(df.groupby("service")) + [("all", df)]:
    key = ["service", "pair_id"]
    for m in SIM:
        w = d.pivot_table(index=key, columns="model", values=m)
        if svc != "all" and w.shape[1] >= 3:
            stats.friedmanchisquare(*[w[c].dropna().to_numpy() for c in w.columns]); n += 1
        ps = []
        for a, b in itertools.combinations(w.columns, 2):
            x = w[[a, b]].dropna()
            r = stats.wilcoxon(x[a], x[b]); ps.append(r.pvalue); n += 1
            dd = (x[a] - x[b]).to_numpy(); dd = dd[dd != 0]
            rk = stats.rankdata(np.abs(dd)); (rk[dd > 0].sum() - rk[dd < 0].sum()) / rk.sum()
        multipletests(ps, method="holm")
    if svc != "all":
        w = d.pivot_table(index=key, columns="model", values="schema_ok")
        for a, b in itertools.combinations(w.columns, 2):
            x = w[[a, b]].dropna().astype(bool)
            bb = int((x[a] & ~x[b]).sum()); cc = int((~x[a] & x[b]).sum())
            mcnemar([[0, bb], [cc, 0]], exact=bb + cc < 25, correction=True); n += 1
    for mod, g in d.groupby("model"):
        for m in ["cosine", "parse_ok", "schema_ok"]:
            v = g[m].to_numpy(float)
            means = v[rng.integers(0, len(v), size=(2000, len(v)))].mean(axis=1)
            np.percentile(means, [2.5, 97.5]); n += 1
openm = models[models.proprietary != True]
for m in SIM + ["parse_ok", "schema_ok"]:
    gen = df[df.model.isin(openm[openm.code == False].model)][m].to_numpy(float)
    code = df[df.model.isin(openm[openm.code == True].model)][m].to_numpy(float)
    if len(gen) and len(code):
        stats.mannwhitneyu(gen, code); n += 1
        # Cliff's delta via ranks (the pairwise sign matrix would not fit at scale).
        r = stats.rankdata(np.concatenate([gen, code]))
        u1 = r[: len(gen)].sum() - len(gen) * (len(gen) + 1) / 2
        2 * u1 / (len(gen) * len(code)) - 1
    sized = openm.dropna(subset=["size_b"])
    if len(sized) >= 3:
        means = [df[df.model == mm][m].mean() for mm in sized.model]
        stats.spearmanr(sized.size_b, means); n += 1
print(json.dumps({"seconds": round(time.perf_counter() - t0, 3), "load_s": round(t_load, 3), "tests": n}))
