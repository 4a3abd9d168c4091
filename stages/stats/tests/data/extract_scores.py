"""Writes llm4ci_scores.csv (beside this file) from the warehouse of examples/llm4ci.toml:
one row per (pair, model) of round 0, sample 0, with the metrics the differential test uses.

python3 extract_scores.py ../../../../warehouse-llm4ci
"""
import sys
from pathlib import Path

import duckdb

wh = Path(sys.argv[1])
out = Path(__file__).with_name("llm4ci_scores.csv")
rows = duckdb.sql(f"""
    select s.pair_id, s.model, s.cosine, s.tree_edit, s.rouge_l, v.schema_ok, m.size_b, m.code
    from read_parquet('{wh}/scores/**/*.parquet', hive_partitioning=true) s
    join read_parquet('{wh}/validations/**/*.parquet', hive_partitioning=true) v
      using (pair_id, service, model, sample, round)
    join read_parquet('{wh}/models/**/*.parquet') m using (model)
    where s.round = 0 and s.sample = 0
    order by s.model, s.pair_id
""").fetchall()
with out.open("w") as f:
    f.write("pair_id,model,cosine,tree_edit,rouge_l,schema_ok,size_b,code\n")
    for p, m, c, t, r, ok, size, code in rows:
        size_s = "" if size is None else repr(float(size))
        code_s = "" if code is None else str(bool(code)).lower()
        f.write(f"{p},{m},{c!r},{t!r},{r!r},{str(bool(ok)).lower()},{size_s},{code_s}\n")
print(f"{len(rows)} rows -> {out}")
