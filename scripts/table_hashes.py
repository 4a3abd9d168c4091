#!/usr/bin/env python3
"""Fingerprint of a warehouse's tables, to prove a change left them byte-identical.

    python3 scripts/table_hashes.py WAREHOUSE [--against FILE]

Prints one line per Parquet file (table path, rows, sha256 of the file, sha256 of its rows as DuckDB
reads them, in file order) and a last line hashing all of them. With --against, compares the rows with
an earlier output and exits 1 naming every file whose rows differ, is missing or is new. Engine
bookkeeping (`_doc2ci/`) is left out: it records when things ran, not what they hold.

Two runs of one binary differ only in when and how fast things happened (measured: pages'
`fetch_ms` and `fetched_at`, generations' `latency_ms`), so the rows hash leaves out the TIMING
columns (the file hash keeps them: equal file hashes are the stronger claim where they hold).
"""
import argparse
import hashlib
import json
import pathlib
import sys

import duckdb

TIMING = ("latency_ms", "fetch_ms", "fetched_at")


def fingerprint(warehouse: pathlib.Path) -> list[str]:
    con = duckdb.connect()
    lines = []
    for f in sorted(warehouse.rglob("*.parquet")):
        rel = f.relative_to(warehouse)
        if rel.parts[0] == "_doc2ci":
            continue
        rows = hashlib.sha256()
        n = 0
        cols = [d[0] for d in con.execute("SELECT * FROM read_parquet(?, hive_partitioning = false) LIMIT 0", [str(f)]).description]
        keep = ", ".join(f'"{c}"' for c in cols if c not in TIMING) or "1"
        cur = con.execute(f"SELECT {keep} FROM read_parquet(?, hive_partitioning = false)", [str(f)])
        while batch := cur.fetchmany(1024):
            for row in batch:
                rows.update(json.dumps(row, default=repr, ensure_ascii=False).encode())
                rows.update(b"\n")
                n += 1
        whole = hashlib.sha256(f.read_bytes()).hexdigest()
        lines.append(f"{rel}\t{n}\tfile:{whole[:16]}\trows:{rows.hexdigest()[:16]}")
    total = hashlib.sha256("\n".join(lines).encode()).hexdigest()
    lines.append(f"ALL\t{len(lines)} files\t{total[:16]}")
    return lines


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("warehouse", type=pathlib.Path)
    ap.add_argument("--against", type=pathlib.Path, help="an earlier output of this script")
    a = ap.parse_args()
    lines = fingerprint(a.warehouse)
    print("\n".join(lines))
    if not a.against:
        return 0
    earlier = a.against.read_text().splitlines()[:-1]
    # path → (rows, rows hash); the file hash is compared apart.
    def by_path(ls):
        return {l.split("\t")[0]: (l.split("\t")[1], l.split("\t")[3]) for l in ls}
    before, now = by_path(earlier), by_path(lines[:-1])
    same_files = len(set(earlier) & set(lines[:-1]))
    bad = [f"rows changed: {k}" for k in now if k in before and before[k] != now[k]]
    bad += [f"missing: {k}" for k in before if k not in now]
    bad += [f"new: {k}" for k in now if k not in before]
    for b in bad:
        print(b, file=sys.stderr)
    print(f"{len(now)} files: {len(bad)} differ in rows; {same_files} byte-identical", file=sys.stderr)
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
