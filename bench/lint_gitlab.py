#!/usr/bin/env python3
"""gitlab-ci-local, one process per text (the command line, as the lint stage ran it before issue 36)
against doc2ci's driver (tools/node/gitlab.mjs: many texts per process, the schema compiled once), on
the same texts, both confined the same way (Node.js's permission model, a scratch folder, HOME there,
a cleared environment) and two workers each, as on this machine's two cores. Prints texts/s of each,
the ratio, and how many texts the two judge differently (exit status and first reported line, timing
lines aside). Texts: the GitLab CI references and one model's outputs of the Doc2CI-scale workload.

usage: lint_gitlab.py SCALE_DIR TOOLS_DIR [--sample N]
"""
import argparse
import concurrent.futures as cf
import csv
import gzip
import io
import json
import os
import re
import subprocess
import sys
import tempfile
import time

ap = argparse.ArgumentParser()
ap.add_argument("scale")
ap.add_argument("tools")
ap.add_argument("--sample", type=int, default=200)
a = ap.parse_args()


def column(path, name):
    with gzip.open(path, "rt", encoding="utf-8") as f:
        return [r[name] for r in csv.DictReader(f)]


texts = column(f"{a.scale}/gitlab-ci_docs.csv.gz", "Code") + column(f"{a.scale}/m01-gitlab-ci_output.csv.gz", "LLM_YML_Output")
texts = [t for t in texts if t.strip()][: a.sample]


def node(scratch, script, args=()):
    env = {"PATH": "/usr/local/bin:/usr/bin:/bin", "HOME": scratch, "TMPDIR": scratch, "LANG": "C.UTF-8", "NO_COLOR": "1"}
    cmd = ["node", "--no-warnings", "--experimental-permission", f"--allow-fs-read={a.tools}",
           f"--allow-fs-read={scratch}", f"--allow-fs-write={scratch}", "--max-old-space-size=1024", script, *args]
    return cmd, env


NOISE = re.compile(r"^(Using fallback|  Command failed|Access to this API|Unable to retrieve default|parsing and downloads|json schema validated|$)")


def first(output):
    lines = [l for l in output.splitlines() if not NOISE.match(l)]
    return lines[0].strip() if lines else ""


def cli(text):
    with tempfile.TemporaryDirectory() as d:
        open(f"{d}/.gitlab-ci.yml", "w").write(text)
        cmd, env = node(d, f"{a.tools}/node_modules/gitlab-ci-local/src/index.js", ["--list", "--no-evaluate-rule-changes"])
        p = subprocess.run(cmd, cwd=d, env=env, capture_output=True, text=True, timeout=60)
        return p.returncode == 0, first(p.stdout + "\n" + p.stderr)


def driver(part):
    with tempfile.TemporaryDirectory() as d:
        cmd, env = node(d, f"{a.tools}/gitlab.mjs")
        feed = "".join(json.dumps({"id": i, "text": t}) + "\n" for i, t in part)
        p = subprocess.run(cmd, cwd=d, env=env, input=feed, capture_output=True, text=True, timeout=600)
        return [(r["id"], (r["ok"], first(r["output"]))) for r in map(json.loads, p.stdout.splitlines())]


indexed = list(enumerate(texts))
t0 = time.time()
with cf.ThreadPoolExecutor(2) as ex:
    one = list(ex.map(cli, texts))
t_cli = time.time() - t0
t0 = time.time()
with cf.ThreadPoolExecutor(2) as ex:
    parts = list(ex.map(driver, [indexed[0::2], indexed[1::2]]))
t_drv = time.time() - t0
many = dict(x for part in parts for x in part)
differ = [i for i in range(len(texts)) if many.get(i) != one[i]]
n = len(texts)
print(f"gitlab-ci-local, {n} texts, 2 workers: one process per text {t_cli:.1f} s = {n / t_cli:.1f} texts/s; "
      f"driver {t_drv:.1f} s = {n / t_drv:.1f} texts/s; ratio {t_cli / t_drv:.1f}x")
print(f"  rejected: {sum(1 for ok, _ in one if not ok)} of {n}; verdicts that differ: {len(differ)}")
for i in differ[:5]:
    print(f"  text {i}: one process {one[i]!r}\n          driver      {many.get(i)!r}")
sys.exit(1 if differ else 0)
