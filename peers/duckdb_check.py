"""Reads every warehouse table with the real DuckDB, as a user would, and reports counts.

Usage: duckdb_check.py WAREHOUSE  → JSON on stdout:
{table: {"rows": n, "distinct_keys": n, "columns": [...]}, ...}
"""
import json
import os
import sys

import duckdb

KEYS = {
    "pairs_raw": ["service", "source", "source_id"],
    "pairs": ["pair_id"],
    "generations": ["pair_id", "service", "model", "sample", "round"],
    "models": ["model"],
    "validations": ["pair_id", "service", "model", "sample", "round"],
    "scores": ["pair_id", "service", "model", "sample", "round"],
    "lints": ["pair_id", "service", "model", "sample", "round", "tool"],
}

wh = sys.argv[1]
out = {}
con = duckdb.connect()
for table, key in KEYS.items():
    d = os.path.join(wh, table)
    if not os.path.isdir(d):
        continue
    src = f"read_parquet('{d}/**/*.parquet', hive_partitioning=true)"
    cols = [r[0] for r in con.execute(f"DESCRIBE SELECT * FROM {src}").fetchall()]
    rows = con.execute(f"SELECT COUNT(*) FROM {src}").fetchone()[0]
    distinct = con.execute(f"SELECT COUNT(*) FROM (SELECT DISTINCT {', '.join(key)} FROM {src})").fetchone()[0]
    entry = {"rows": rows, "distinct_keys": distinct, "columns": cols}
    if table in ("generations", "pairs"):
        by = "model" if table == "generations" else "service"
        entry["by"] = dict(con.execute(f"SELECT {by}, COUNT(*) FROM {src} GROUP BY 1 ORDER BY 1").fetchall())
    if table == "pairs":
        entry["copies"] = con.execute(f"SELECT SUM(n_copies) FROM {src}").fetchone()[0]
        entry["distinct_descriptions"] = con.execute(
            f"SELECT COUNT(*) FROM (SELECT DISTINCT regexp_replace(trim(title), '\\s+', ' ', 'g'), "
            f"regexp_replace(trim(description), '\\s+', ' ', 'g') FROM {src})"
        ).fetchone()[0]
    out[table] = entry
print(json.dumps(out))
