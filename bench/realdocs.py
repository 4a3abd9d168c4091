#!/usr/bin/env python3
"""The crawler on the four documentation sites rendered by their own engines (tests/realdocs; issue 11).

    python3 -m bench.realdocs DOC2CI_BINARY [--repeat N]

For each site (github-docs, gitlab-docs, circleci-docs, travis-docs):
1. agreement: recall and precision of the (url, reference) pairs doc2ci crawls, per backend, against
   the independent BeautifulSoup extractor (peers/realdocs/reference.py), and the share of matched pairs
   whose title and description are equal too;
2. speed: doc2ci's webdriver crawl (a whole `doc2ci run`, chromedriver and Chromium started and stopped
   by it) against peers/realdocs/selenium_crawl.py, a Selenium crawler in Python like the Doc2CI study's (same
   Chromium, same flags, same served pages, BeautifulSoup extraction): pages per second of each, the
   median of N runs, and the ratio.
Prints a table; bench/realdocs.sh writes it to bench/out/realdocs/summary.txt.
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
REALDOCS = ROOT / "tests" / "realdocs"
SITES = [("github", "github-docs", "github-actions"), ("gitlab", "gitlab-docs", "gitlab-ci"),
         ("circleci", "circleci-docs", "circleci"), ("travis", "travis-docs", "travis-ci")]


def render(site: str, out: Path) -> None:
    js = REALDOCS / site / "render.mjs"
    cmd = ["node", str(js)] if js.exists() else [sys.executable, "-m", f"peers.realdocs.render_{site}"]
    subprocess.run(cmd + ["--out", str(out)], check=True, capture_output=True, cwd=ROOT)


def query(wh: Path, sql: str) -> list[tuple]:
    import duckdb
    return duckdb.connect().execute(sql.replace("{wh}", str(wh))).fetchall()


def crawl(binary: str, site_dir: Path, profile: str, service: str, backend: str, work: Path) -> tuple[list[dict], list[str], float]:
    """doc2ci's pairs, the pages it visited (404s included) and the seconds of the whole run."""
    work.mkdir(parents=True, exist_ok=True)
    (work / "pipeline.toml").write_text(f"""[study]
warehouse = "wh"
threads = 2

[[services]]
name = "{service}"
display = "{service}"

[[sources]]
name = "docs"
kind = "crawl"
service = "{service}"
profile = "{profile}"
serve = "{site_dir}"
backend = "{backend}"

[stages.crawl]
rate_limit = 0
remote_rate_limit = 1000
max_pages = 1000000
[stages.validate]
enabled = false
[stages.score]
enabled = false
[stages.lint]
enabled = false
""")
    t0 = time.monotonic()
    subprocess.run([binary, "run", "-c", str(work / "pipeline.toml")], check=True, capture_output=True,
                   env={**os.environ, "DOC2CI_REQUEST_CACHE": "off"})
    secs = time.monotonic() - t0
    wh = work / "wh"
    pairs = [dict(url=u, title=t, description=d, reference=r)
             for u, t, d, r in query(wh, "SELECT url, title, description, reference FROM read_parquet('{wh}/pairs_raw/**/*.parquet')")]
    pages = [u for (u,) in query(wh, "SELECT url FROM read_parquet('{wh}/pages/**/*.parquet') ORDER BY seq")]
    return pairs, pages, secs


def selenium(binary: str, site_dir: Path, profile: str, pages: list[str], work: Path) -> tuple[int, float]:
    """The peer on the same pages, served by `doc2ci serve`: pages visited and seconds."""
    (work / "pages.json").write_text(json.dumps(pages))
    server = subprocess.Popen([binary, "serve", str(site_dir)], stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    try:
        origin = server.stdout.readline().strip().rsplit(" ", 1)[-1]
        r = subprocess.run([sys.executable, "-m", "peers.realdocs.selenium_crawl", origin, "--site", profile,
                            "--pages", str(work / "pages.json")], check=True, capture_output=True, text=True, cwd=ROOT)
        pages, secs = r.stderr.strip().splitlines()[-1].split()[1::3]
        return int(pages), float(secs)
    finally:
        server.kill()
        server.wait()


def agreement(got: list[dict], want: list[dict]) -> tuple[float, float, float]:
    key = lambda p: (p["url"], p["reference"])  # noqa: E731
    g, w = {key(p): p for p in got}, {key(p): p for p in want}
    both = set(g) & set(w)
    same = sum(1 for k in both if (g[k]["title"], g[k]["description"]) == (w[k]["title"], w[k]["description"]))
    return len(both) / max(len(w), 1), len(both) / max(len(g), 1), same / max(len(both), 1)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("binary")
    ap.add_argument("--repeat", type=int, default=3)
    args = ap.parse_args()
    rows, speed = [], []
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        for site, profile, service in SITES:
            site_dir = tmp / site
            render(site, site_dir)
            want = json.loads(subprocess.run([sys.executable, "-m", "peers.realdocs.reference", str(site_dir), "--site", profile],
                                             check=True, capture_output=True, text=True, cwd=ROOT).stdout)
            for backend in ("http", "webdriver"):
                got, pages, _ = crawl(args.binary, site_dir, profile, service, backend, tmp / f"{site}-{backend}")
                rows.append((profile, backend, len(want), len(got), *agreement(got, want)))
            ours, peer = [], []
            for i in range(args.repeat):
                work = tmp / f"{site}-speed-{i}"
                _, pages, secs = crawl(args.binary, site_dir, profile, service, "webdriver", work)
                ours.append(len(pages) / secs)
                p_pages, p_secs = selenium(args.binary, site_dir, profile, pages, work)
                peer.append(p_pages / p_secs)
            speed.append((profile, len(pages), p_pages, statistics.median(ours), statistics.median(peer)))
    print("agreement with peers/realdocs/reference.py (BeautifulSoup), (url, reference) pairs:")
    print(f"{'site':<14} {'backend':<10} {'want':>5} {'got':>5} {'recall':>7} {'precision':>9} {'title+desc':>10}")
    for profile, backend, nw, ng, rec, prec, same in rows:
        print(f"{profile:<14} {backend:<10} {nw:>5} {ng:>5} {rec:>7.1%} {prec:>9.1%} {same:>10.1%}")
    print(f"\nwebdriver crawl, pages/s (median of {args.repeat}; doc2ci: a whole `doc2ci run`: crawl, extract, dedupe,"
          " report; the peer: the same pages in the same order, driver start and extraction included):")
    print(f"{'site':<14} {'pages':>5} {'peer pages':>10} {'doc2ci':>8} {'selenium':>9} {'ratio':>6}")
    for profile, pages, p_pages, ours, peer in speed:
        print(f"{profile:<14} {pages:>5} {p_pages:>10} {ours:>8.2f} {peer:>9.2f} {ours / peer:>5.2f}×")
    tot = statistics.mean(o / p for _, _, _, o, p in speed)
    print(f"mean ratio {tot:.2f}×")


if __name__ == "__main__":
    main()
