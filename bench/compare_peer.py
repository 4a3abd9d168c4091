"""The peer side of bench/compare.sh: what `doc2ci compare A B` computes, done the usual way in
Python on the same warehouse: DuckDB reads the Parquet files, pandas joins the two models on
(service, pair_id, sample), scipy bootstraps (paired, percentile, its own draws) and runs Wilcoxon,
statsmodels McNemar and Holm; the flipped samples are a pandas filter. Prints the seconds taken.

Usage: compare_peer.py WAREHOUSE MODEL_A MODEL_B RESAMPLES
"""
import json
import sys
import time
import warnings

t0 = time.perf_counter()
import duckdb  # noqa: E402
import numpy as np  # noqa: E402
from scipy import stats  # noqa: E402
from statsmodels.stats.contingency_tables import mcnemar  # noqa: E402
from statsmodels.stats.multitest import multipletests  # noqa: E402

warnings.simplefilter("ignore")
wh, a, b, resamples = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])
hive = "hive_partitioning = true"
df = duckdb.connect().execute(f"""
    select * exclude (truncated) from read_parquet('{wh}/scores/*/*/*.parquet', {hive}) s
    join (select pair_id, service, model, sample, round, parse_ok, schema_ok
          from read_parquet('{wh}/validations/*/*/*.parquet', {hive})) v
    using (pair_id, service, model, sample, round)
    where round = 0""").df()
metrics = [c for c in df.columns if c not in ("pair_id", "service", "model", "sample", "round")]
left, right = df[df.model == a], df[df.model == b]
j = left.merge(right, on=["service", "pair_id", "sample"], suffixes=("_a", "_b")).sort_values("pair_id")
rng = np.random.default_rng(20260601)
rows, flips = [], 0
for m in metrics:
    x, y = j[m + "_a"].to_numpy(float), j[m + "_b"].to_numpy(float)
    binary = set(np.unique(np.concatenate([x, y]))) <= {0.0, 1.0} and df[m].dtype == bool
    ci = stats.bootstrap((x, y), lambda p, q, axis=-1: np.mean(q - p, axis=axis), paired=True, vectorized=True,
                         n_resamples=resamples, method="percentile", rng=rng).confidence_interval
    delta = float(np.sign(y[:, None] - x[None, :]).mean())
    if binary:
        bb, cc = int(((x == 1) & (y == 0)).sum()), int(((x == 0) & (y == 1)).sum())
        p = mcnemar([[0, bb], [cc, 0]], exact=bb + cc < 25, correction=True).pvalue
        flips += bb + cc
    else:
        p = 1.0 if (x == y).all() else stats.wilcoxon(x, y).pvalue
    rows.append((m, float(y.mean() - x.mean()), ci.low, ci.high, delta, p))
holm = multipletests([r[-1] for r in rows], method="holm")[1]
print(json.dumps({"seconds": time.perf_counter() - t0, "metrics": len(rows), "n": len(j), "flips": flips}))
