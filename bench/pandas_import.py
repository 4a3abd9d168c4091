"""The peer for bench/engine.sh: the same import + dedupe with pandas, timed in-process.

Prints the seconds it took. Normalisation as SPEC §1 (collapse whitespace in title and
description, strip trailing spaces and blank edge lines from the reference).
"""
import re
import sys
import time
from pathlib import Path

import pandas as pd

d = Path(sys.argv[1])
t0 = time.perf_counter()
docs = pd.read_csv(d / "GitHubActions_Docs.csv.gz")
ws = re.compile(r"\s+")


def ref(s: str) -> str:
    lines = [l.rstrip() for l in str(s).split("\n")]
    while lines and not lines[0]:
        lines.pop(0)
    while lines and not lines[-1]:
        lines.pop()
    return "\n".join(lines)


docs["k_title"] = docs["Title"].astype(str).map(lambda s: ws.sub(" ", s).strip())
docs["k_desc"] = docs["Description"].astype(str).map(lambda s: ws.sub(" ", s).strip())
docs["k_ref"] = docs["Code"].astype(str).map(ref)
kept = docs.drop_duplicates(subset=["k_title", "k_desc", "k_ref"], keep="first")
outs = []
for f in sorted(d.glob("GitHubActions_*_output.csv.gz")):
    o = pd.read_csv(f)
    outs.append(o[o["ID"].isin(kept["ID"])].assign(model=f.name))
gens = pd.concat(outs)
assert len(kept) == 725 and len(gens) == 725 * 6, (len(kept), len(gens))
print(time.perf_counter() - t0)
