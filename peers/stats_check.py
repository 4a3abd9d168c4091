"""Reads the warehouse's stats table with DuckDB and recomputes its rows with scipy/statsmodels from
the warehouse's own scores, validations and lints (round 0, sample 0; a text's lint indicator is
the minimum over the tools of its kind that judged it). Prints JSON:
{"rows": n, "compared": {test: count}, "mismatches": [...]}.

Usage: stats_check.py WAREHOUSE
"""
import json
import math
import os
import sys
import warnings

import duckdb
import numpy as np
from scipy import stats
from statsmodels.stats.contingency_tables import mcnemar

warnings.simplefilter("ignore")
wh = sys.argv[1]
con = duckdb.connect()
st = con.execute(f"select * from read_parquet('{wh}/stats/**/*.parquet')").df()
lints = ""
if os.path.isdir(f"{wh}/lints"):
    lints = f"""left join (select pair_id, service, model, sample, round,
        min(case when kind = 'validator' then ok::int end) as lint_ok,
        min(case when kind = 'validator' then as_is_ok::int end) as lint_as_is_ok,
        min(case when kind = 'audit' then ok::int end) as audit_ok
        from read_parquet('{wh}/lints/**/*.parquet', hive_partitioning=true) group by all) l
        using (pair_id, service, model, sample, round)"""
sc = con.execute(f"""select * from (select s.*, v.parse_ok, v.schema_ok, v.fragment
    from read_parquet('{wh}/scores/**/*.parquet', hive_partitioning=true) s
    join read_parquet('{wh}/validations/**/*.parquet', hive_partitioning=true) v using (pair_id, service, model, sample, round)
    where s.round = 0 and s.sample = 0) {lints}""").df()
models_t = con.execute(f"select * from read_parquet('{wh}/models/**/*.parquet')").df()
compared, bad = {}, []


def cmp(row, stat, p, what):
    ok = True
    if stat is not None and not (row["statistic"] is None or math.isnan(row["statistic"])):
        ok &= abs(row["statistic"] - stat) <= 1e-9 * max(1, abs(stat))
    if p is not None:
        ok &= abs(row["p"] - p) <= 1e-6 and (p > 1e-6 or abs(row["p"] - p) <= 1e-6 * p)
    compared[what] = compared.get(what, 0) + 1
    if not ok:
        bad.append({"what": what, "row": {k: (None if isinstance(v, float) and math.isnan(v) else v) for k, v in row.items() if k in ("service", "metric", "group_a", "group_b", "statistic", "p")}, "peer": [stat, p]})


def wide(service, metric):
    d = sc[sc.service == service].pivot(index="pair_id", columns="model", values=metric)
    return d


for _, r in st.iterrows():
    if r.service == "all":
        continue
    if r.test == "friedman":
        w = wide(r.service, r.metric).dropna()
        res = stats.friedmanchisquare(*[w[c].to_numpy(float) for c in w.columns])
        cmp(r, res.statistic, res.pvalue, "friedman")
    elif r.test == "wilcoxon" and r.group_a in set(sc.model) and r.group_b in set(sc.model):
        w = wide(r.service, r.metric)[[r.group_a, r.group_b]].dropna()
        res = stats.wilcoxon(w[r.group_a].to_numpy(float), w[r.group_b].to_numpy(float))
        cmp(r, res.statistic, res.pvalue, "wilcoxon")
    elif r.test == "mcnemar" and r.group_b in set(sc.model):
        w = wide(r.service, r.metric)[[r.group_a, r.group_b]].dropna().astype(bool)
        b = int((w[r.group_a] & ~w[r.group_b]).sum())
        c = int((~w[r.group_a] & w[r.group_b]).sum())
        res = mcnemar([[0, b], [c, 0]], exact=b + c < 25, correction=True)
        cmp(r, res.statistic, res.pvalue, "mcnemar")
        if (b, c) != (r.b, r.c):
            bad.append({"what": "mcnemar counts", "ours": [int(r.b), int(r.c)], "peer": [b, c]})
    elif r.test == "mean" and r.group_a in set(sc.model):
        v = sc[(sc.service == r.service) & (sc.model == r.group_a)][r.metric].astype(float).dropna()
        compared["mean"] = compared.get("mean", 0) + 1
        if abs(v.mean() - r.effect) > 1e-12 or len(v) != r.n:
            bad.append({"what": "mean", "ours": [r.effect, int(r.n)], "peer": [v.mean(), len(v)]})
        if not (r.ci_low is None or math.isnan(r.ci_low)):
            compared["ci"] = compared.get("ci", 0) + 1
            if not (r.ci_low <= r.effect <= r.ci_high):
                bad.append({"what": "ci", "row": [r.ci_low, r.effect, r.ci_high]})
# General vs code over all services, open models (Mann-Whitney U + Cliff's delta).
openm = models_t[models_t.proprietary != True]
for _, r in st[(st.test == "mann_whitney") & (st.group_a == "general") & (st.group_b == "code")].iterrows():
    gen = sc[sc.model.isin(openm[openm.code == False].model)][r.metric].astype(float).dropna().to_numpy()
    code = sc[sc.model.isin(openm[openm.code == True].model)][r.metric].astype(float).dropna().to_numpy()
    res = stats.mannwhitneyu(gen, code)
    cmp(r, res.statistic, res.pvalue, "mann_whitney")
    delta = np.sign(gen[:, None] - code[None, :]).mean()
    if abs(delta - r.effect) > 1e-9:
        bad.append({"what": "cliffs_delta", "ours": r.effect, "peer": delta})
print(json.dumps({"rows": len(st), "compared": compared, "mismatches": bad}, default=str))
