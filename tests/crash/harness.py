#!/usr/bin/env python3
"""kill -9 anywhere (issue 12): a real study, killed at random moments in every stage, resumed,
and compared table by table with the same study run without interruption.

    python3 tests/crash/harness.py --doc2ci target/release/doc2ci [--kills 20] [--seed 1] [--out report.json]

The study covers every stage: an llm4ci import (pairs and a model's outputs), crawls of the bundled
site over http and through headless Chromium, extraction, dedupe, generation by the embedded SmolLM2
and by an OpenAI-compatible server (a stand-in started here that answers deterministically and
counts every request it receives), two repair rounds, validation, scoring with embeddings, stats and
the report. The killed copy is started, SIGKILLed after a random delay, checked for orphaned browsers,
and started again, until it finishes on its own; then `doc2ci gc` runs and every table is compared.

Checks (each failure is listed in the report, and the exit code is 1):
- every table holds the same rows as the uninterrupted run (volatile columns such as timings left
  out), with no duplicate keys, and every Parquet file of the warehouse reads;
- no browser or chromedriver process outlives a kill; no staging, browser, checkpoint or temporary
  file is left after `gc`, and no folder of the browser's in doc2ci's TMPDIR;
- the OpenAI-compatible server was asked each request at most once more than needed per kill that
  happened while that model was generating, times its slots (the README's promise).
"""
from __future__ import annotations

import argparse
import csv
import gzip
import hashlib
import http.server
import json
import os
import random
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
SHARED = ROOT.parent / "shared" / "data" / "llm4ci"
SLOTS = 4  # [stages.generate] batch_size below: requests in flight at once

# Columns whose values depend on when or how fast a run went, not on what it computed.
VOLATILE = {
    "fetched_at", "fetch_ms", "latency_ms", "seconds", "finished_at", "started_at", "created_at",
    "transferred", "attempts",
}


class Stub(http.server.ThreadingHTTPServer):
    daemon_threads = True

    def handle_error(self, request, client_address):
        pass  # a client killed mid-request leaves a broken pipe: expected here


def stub_server(log: Path) -> tuple[Stub, str]:
    """An OpenAI-compatible chat endpoint: the answer is a function of the prompt only."""
    lock = threading.Lock()

    class H(http.server.BaseHTTPRequestHandler):
        def log_message(self, *a):
            pass

        def do_POST(self):
            n = int(self.headers.get("content-length", "0"))
            body = json.loads(self.rfile.read(n) or b"{}")
            prompt = json.dumps(body.get("messages", []), sort_keys=True)
            h = hashlib.sha256(prompt.encode()).hexdigest()[:16]
            with lock, open(log, "a") as f:
                f.write(h + "\n")
                f.flush()
            time.sleep(0.1)  # a window for kills while requests are in flight
            job = "build" if int(h[0], 16) % 2 else f"job-{h[:4]}"
            yaml = f"on: push\njobs:\n  {job}:\n    runs-on: ubuntu-latest\n    steps:\n      - run: echo {h}\n"
            if int(h[1], 16) % 3 == 0:
                yaml = f"jobs:\n  {job}:\n    steps: 3\n"  # schema-invalid: something for repair
            out = json.dumps({
                "id": h, "object": "chat.completion", "model": body.get("model", "stub"),
                "choices": [{"index": 0, "finish_reason": "stop", "message": {"role": "assistant", "content": yaml}}],
                "usage": {"prompt_tokens": len(prompt) // 4, "completion_tokens": len(yaml) // 4},
            }).encode()
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(out)))
            self.end_headers()
            self.wfile.write(out)

    srv = Stub(("127.0.0.1", 0), H)
    threading.Thread(target=srv.serve_forever, daemon=True).start()
    return srv, f"http://127.0.0.1:{srv.server_address[1]}/v1"


def small_llm4ci(dir: Path, n: int) -> tuple[Path, Path]:
    csv.field_size_limit(1 << 30)
    docs, outs = dir / "docs.csv", dir / "gpt-4o.csv"
    with gzip.open(SHARED / "GitHubActions_Docs.csv.gz", "rt", newline="") as f:
        rows = list(csv.DictReader(f))[:n]
    ids = {r["ID"] for r in rows}
    with open(docs, "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=list(rows[0].keys()))
        w.writeheader()
        w.writerows(rows)
    with gzip.open(SHARED / "GitHubActions_gpt-4o_output.csv.gz", "rt", newline="") as f:
        r = csv.DictReader(f)
        kept = [x for x in r if x["ID"] in ids]
        with open(outs, "w", newline="") as g:
            w = csv.DictWriter(g, fieldnames=r.fieldnames)
            w.writeheader()
            w.writerows(kept)
    return docs, outs


def profiles() -> str:
    import re
    md = (ROOT / "docsite" / "PROFILES.md").read_text()
    return "\n".join(b for b in re.findall(r"```toml\n(.*?)```", md, re.S) if "[profiles.traps]" not in b)


def study(dir: Path, stub_url: str, docs: Path, outs: Path) -> Path:
    services = ["github-actions", "circleci", "gitlab-ci", "travis-ci"]
    s = '[study]\nwarehouse = "wh"\nthreads = 2\n'
    for svc in services:
        s += f'\n[[services]]\nname = "{svc}"\ndisplay = "{svc}"\n'
    for svc, backend in zip(services, ["http", "webdriver", "http", "webdriver"]):
        s += (f'\n[[sources]]\nname = "{svc}-docs"\nkind = "crawl"\nservice = "{svc}"\nprofile = "{svc}"\n'
              f'serve = "{ROOT / "docsite"}"\nbackend = "{backend}"\n')
    s += (f'\n[[sources]]\nname = "llm4ci"\nkind = "import"\nformat = "llm4ci"\npath = "{docs}"\n'
          f'service = "github-actions"\n')
    s += (f'\n[[models]]\nname = "gpt-4o"\nbackend = "import"\npath = "{outs}"\nservice = "github-actions"\n'
          f'source = "llm4ci"\nfamily = "gpt"\n')
    s += (f'\n[[models]]\nname = "stub"\nbackend = "openai"\nbase_url = "{stub_url}"\nmodel = "stub"\n'
          f'retries = 2\ntimeout_ms = 20000\nfamily = "stub"\n')
    s += ('\n[[models]]\nname = "smol"\nbackend = "embedded"\nmax_tokens = 8\nservices = ["travis-ci"]\n'
          'family = "smollm"\n')
    s += "\n" + profiles() + "\n"
    # Two pages per service, one a second: every stage still sees all four services (and the crawls
    # last long enough to be killed in), at a third of the pairs, so the study runs in minutes.
    s += ('\n[stages.crawl]\nrate_limit = 1\nmax_pages = 2\ntimeout_secs = 20\n'
          f'\n[stages.generate]\nbatch_size = {SLOTS}\n'
          '\n[stages.import]\nbatch_size = 10\n'
          '\n[stages.repair]\nenabled = true\nrounds = 2\nmodels = ["stub"]\n')
    p = dir / "pipeline.toml"
    p.write_text(s)
    return p


def browsers_of(wh: Path) -> list[int]:
    """Live processes whose command line names this warehouse's browser folder."""
    needle = str(wh / "_doc2ci" / "browser").encode()
    out = []
    for d in os.listdir("/proc"):
        if not d.isdigit():
            continue
        try:
            cmd = open(f"/proc/{d}/cmdline", "rb").read()
            stat = open(f"/proc/{d}/stat").read()
        except OSError:
            continue
        if needle in cmd and ") Z " not in stat:
            out.append(int(d))
    return out


# Set in every doc2ci this harness starts, and so inherited by its chromedrivers: tests running
# beside the harness start chromedrivers of their own, which are none of its business.
MARK_KEY, MARK_VALUE = "DOC2CI_CRASH_HARNESS", str(os.getpid())
MARK = f"{MARK_KEY}={MARK_VALUE}"


def chromedrivers() -> set[int]:
    """Live chromedrivers started (through doc2ci) by this harness."""
    out = set()
    for d in os.listdir("/proc"):
        if d.isdigit():
            try:
                if open(f"/proc/{d}/comm").read().strip() != "chromedriver":
                    continue
                if ") Z " in open(f"/proc/{d}/stat").read():
                    continue
                if MARK.encode() in open(f"/proc/{d}/environ", "rb").read().split(b"\0"):
                    out.add(int(d))
            except OSError:
                pass
    return out


def tables(wh: Path) -> dict[str, list]:
    import duckdb
    con = duckdb.connect()
    out = {}
    for t in sorted(p.name for p in wh.iterdir() if p.is_dir() and not p.name.startswith("_")):
        files = list((wh / t).rglob("*.parquet"))
        if not files:
            continue
        rel = con.execute(
            f"SELECT * FROM read_parquet('{wh / t}/**/*.parquet', hive_partitioning=true, union_by_name=true)")
        cols = [c[0] for c in rel.description]
        keep = [i for i, c in enumerate(cols) if c not in VOLATILE]
        rows = []
        for r in rel.fetchall():
            rows.append(tuple(norm(r[i]) for i in keep))
        out[t] = ([cols[i] for i in keep], sorted(rows, key=repr))
    return out


def norm(v):
    if isinstance(v, float):
        return round(v, 9)
    if isinstance(v, list):
        return tuple(norm(x) for x in v)
    if isinstance(v, dict):
        return tuple(sorted((k, norm(x)) for k, x in v.items()))
    return v


def leftovers(wh: Path) -> list[str]:
    bad = []
    meta = wh / "_doc2ci"
    for sub in ["staging", "browser"]:
        p = meta / sub
        if p.exists() and any(p.iterdir()):
            bad.append(f"{p} not empty: {sorted(x.name for x in p.iterdir())[:5]}")
    ck = meta / "checkpoints"
    if ck.exists():
        left = [str(x.relative_to(ck)) for x in ck.rglob("*") if x.is_file()]
        if left:
            bad.append(f"checkpoints left: {left[:5]}")
    for p in wh.rglob("*"):
        if p.is_file() and ".tmp-" in p.name:
            bad.append(f"temporary file left: {p}")
    return bad


def run_to_end(doc2ci: str, cfg: Path, env: dict, log: Path) -> subprocess.CompletedProcess:
    with open(log, "a") as f:
        return subprocess.run([doc2ci, "run", "--config", str(cfg)], stdout=f, stderr=f, env=env, timeout=3600)


def in_flight(stderr_text: str) -> list[str]:
    """Partitions running when the process died: `run X` lines without their `done X` / `X failed`."""
    running = {}
    for line in stderr_text.splitlines():
        if line.startswith("run "):
            running[line[4:].split(" (", 1)[0]] = True
        elif line.startswith("done "):
            running.pop(line[5:].split(":", 1)[0], None)
        elif line.startswith("error: ") and " failed: " in line:
            running.pop(line[7:].split(" failed: ", 1)[0], None)
    return sorted(kind(label) for label in running)


WEBDRIVER = {"circleci", "travis-ci"}


def kind(label: str) -> str:
    """`crawl pages/service=circleci/source=…` → `crawl (webdriver)`; the stage otherwise."""
    stage = label.split(" ", 1)[0]
    if stage == "crawl":
        return "crawl (webdriver)" if any(f"service={s}/" in label for s in WEBDRIVER) else "crawl (http)"
    if stage == "generate":
        return "generate (embedded)" if "model=smol" in label else "generate (openai)"
    if stage == "score":
        return "score (embedding)"
    return stage


# How long after a partition starts a kill may land (seconds), by kind: within what the partition
# lasts here, so an aimed kill lands inside it; long ones get a spread of moments.
LAG = {"crawl (http)": 1.2, "crawl (webdriver)": 2.0, "generate (openai)": 0.5, "generate (embedded)": 20.0,
       "score (embedding)": 1.5, "repair": 0.5}
STAGE_DELAY_MS = 200


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--doc2ci", required=True)
    ap.add_argument("--kills", type=int, default=20, help="at least this many kills")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--pairs", type=int, default=40, help="llm4ci pairs imported")
    ap.add_argument("--out", type=Path)
    ap.add_argument("--keep", action="store_true", help="keep the study folders")
    a = ap.parse_args()
    rng = random.Random(a.seed)
    base = Path(tempfile.mkdtemp(prefix="doc2ci-crash-"))
    env = dict(os.environ)
    env[MARK_KEY] = MARK_VALUE
    # doc2ci's own temporary folder: a killed browser must leave nothing in it (Chromium writes
    # `org.chromium.*` folders to the TMPDIR it is given).
    tmp = base / "tmp"
    tmp.mkdir()
    env["TMPDIR"] = str(tmp)
    failures: list[str] = []
    report: dict = {"seed": a.seed, "kills": 0, "kills_by_stage": {}, "resumes": 0}
    try:
        data = base / "data"
        data.mkdir()
        docs, outs = small_llm4ci(data, a.pairs)
        ref_dir, kill_dir = base / "reference", base / "killed"
        results = {}
        for name, d in [("reference", ref_dir), ("killed", kill_dir)]:
            d.mkdir()
            reqlog = d / "requests.log"
            srv, url = stub_server(reqlog)
            cfg = study(d, url, docs, outs)
            wh = d / "wh"
            runlog = d / "run.log"
            t0 = time.time()
            if name == "reference":
                r = run_to_end(a.doc2ci, cfg, env, runlog)
                if r.returncode != 0:
                    failures.append(f"the uninterrupted run failed:\n{runlog.read_text()[-3000:]}")
                    break
            else:
                kills, finished = 0, False
                aimed: set[str] = set()
                drivers_before = chromedrivers()
                # Every partition pauses before it publishes, so kills land inside the quick stages too
                # (and right before the atomic write of the slow ones); the rows do not change.
                slow = dict(env, DOC2CI_TEST_STAGE_DELAY_MS=str(STAGE_DELAY_MS))
                while not finished:
                    # Each run is killed a random moment after the k-th partition it starts (k of 1-3):
                    # kills follow the work through the DAG and land in every stage, the short ones too.
                    k = rng.choice([1, 1, 2, 3]) if kills < 4 * a.kills else None
                    start = runlog.stat().st_size if runlog.exists() else 0
                    with open(runlog, "a") as f:
                        p = subprocess.Popen([a.doc2ci, "run", "--config", str(cfg)], stdout=f, stderr=f, env=slow)
                    fire = None
                    seen_text, pos = "", start
                    while p.poll() is None:
                        now = time.time()
                        if k is not None and fire is None:
                            # Only the bytes appended since the last look (polled every 5 ms).
                            with open(runlog, "rb") as lf:
                                lf.seek(pos)
                                new = lf.read()
                            pos += len(new)
                            seen_text += new.decode(errors="replace")
                            started = [l[4:].split(" (", 1)[0] for l in seen_text.splitlines()
                                       if l.startswith("run ")]
                            # Each partition is a kill target once, so every run gets further: the
                            # study always ends, and the last stages (stats, report) get theirs too.
                            # Past the wanted number of kills, only a kind of partition no kill landed in
                            # yet is a target: every stage gets one, and the run stays short.
                            fresh = [x for x in started[k - 1:] if x not in aimed]
                            for x in fresh:
                                aimed.add(x)
                                if kills < a.kills or kind(x) not in report["kills_by_stage"]:
                                    fire = now + rng.uniform(0, LAG.get(kind(x), STAGE_DELAY_MS / 1000))
                                    break
                        if fire is not None and now >= fire:
                            break
                        time.sleep(0.005)
                    if p.poll() is not None:
                        if p.returncode != 0:
                            failures.append(f"resume {report['resumes']} failed (exit {p.returncode}):\n"
                                            f"{runlog.read_text()[start:][-3000:]}")
                            break
                        finished = True
                        continue
                    p.send_signal(signal.SIGKILL)
                    p.wait()
                    kills += 1
                    text = runlog.read_text()[start:]
                    for st in in_flight(text) or ["(between stages)"]:
                        report["kills_by_stage"][st] = report["kills_by_stage"].get(st, 0) + 1
                    # The kernel ends chromedriver with doc2ci, and Chromium with chromedriver.
                    deadline = time.time() + 5
                    while (browsers_of(wh) or (chromedrivers() - drivers_before)) and time.time() < deadline:
                        time.sleep(0.1)
                    orphans = browsers_of(wh)
                    drivers = chromedrivers() - drivers_before
                    if orphans or drivers:
                        failures.append(f"kill {kills}: orphaned processes {orphans} chromedriver {sorted(drivers)}")
                        for pid in orphans + sorted(drivers):
                            try:
                                os.kill(pid, signal.SIGKILL)
                            except OSError:
                                pass
                    report["resumes"] += 1
                report["kills"] = kills
                g = subprocess.run([a.doc2ci, "gc", "--config", str(cfg)], capture_output=True, text=True, env=env)
                if g.returncode != 0:
                    failures.append(f"gc failed: {g.stderr[-2000:]}")
                failures.extend(leftovers(wh))
                chromium = sorted(x.name for x in tmp.iterdir() if x.name.startswith("org.chromium"))
                if chromium:
                    failures.append(f"the browser left {len(chromium)} folder(s) in TMPDIR: {chromium[:3]}")
            srv.shutdown()
            reqs = reqlog.read_text().split() if reqlog.exists() else []
            results[name] = {"tables": tables(wh) if wh.exists() else {}, "requests": reqs,
                             "seconds": round(time.time() - t0, 1)}
        if len(results) == 2:
            ref, got = results["reference"], results["killed"]
            compared = {}
            for t, (cols, rows) in ref["tables"].items():
                if t not in got["tables"]:
                    failures.append(f"table {t} missing after the kills")
                    continue
                gcols, grows = got["tables"][t]
                if gcols != cols:
                    failures.append(f"table {t}: columns differ: {cols} vs {gcols}")
                    continue
                if len(set(grows)) != len(grows) and len(set(rows)) == len(rows):
                    failures.append(f"table {t}: duplicate rows after the kills")
                if rows != grows:
                    missing = [r for r in rows if r not in set(grows)][:2]
                    extra = [r for r in grows if r not in set(rows)][:2]
                    failures.append(f"table {t}: {len(rows)} rows uninterrupted, {len(grows)} after kills; "
                                    f"e.g. missing {str(missing)[:400]} extra {str(extra)[:400]}")
                compared[t] = len(rows)
            report["tables_compared"] = compared
            need, asked = len(set(ref["requests"])), len(got["requests"])
            gen_kills = sum(v for k, v in report["kills_by_stage"].items() if k in ("generate (openai)", "repair"))
            report["requests"] = {"distinct": need, "asked_uninterrupted": len(ref["requests"]),
                                  "asked_with_kills": asked, "asked_again": asked - len(ref["requests"]),
                                  "kills_in_generation": gen_kills, "bound": gen_kills * SLOTS}
            if asked - len(ref["requests"]) > gen_kills * SLOTS:
                failures.append(f"{asked - len(ref['requests'])} requests asked again, more than {SLOTS} per kill "
                                f"during generation ({gen_kills} such kills)")
            report["seconds"] = {"uninterrupted": ref["seconds"], "with_kills": got["seconds"]}
        if report["kills"] < a.kills and not failures:
            failures.append(f"only {report['kills']} kills (wanted {a.kills}): the study finished too early")
    finally:
        report["failures"] = failures
        text = json.dumps(report, indent=2)
        print(text)
        if a.out:
            a.out.write_text(text)
        if a.keep or failures:
            print(f"study folders kept in {base}", file=sys.stderr)
        else:
            shutil.rmtree(base, ignore_errors=True)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
