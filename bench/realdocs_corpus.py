#!/usr/bin/env python3
"""The built-in profiles on the sites' real pages (issue 35), and the predecessor's pairs recovered.

    python3 -m bench.realdocs_corpus CORPUS DOC2CI_BINARY [--out DIR]

CORPUS is a folder assembled locally from stored copies of the sites' sources (never committed):
  CORPUS/github/content/actions/**.md, CORPUS/github/data/{reusables,variables,features}/**
      `github/docs` files: the pages behind the 162 URLs of the llm4ci study and what they include;
  CORPUS/gitlab-hugo/doc/ci/**.md
      GitLab's `doc/ci` pages written for its Hugo site.
Each MANIFEST*.tsv beside them names the repository and commit of every file.

1. Renders each with the real engines of tests/realdocs (Liquid + unified with GitHub's plugins; Hugo
   with GitLab's shortcodes), each inside its site's chrome.
2. Crawls the render with the built-in profile through both backends and compares with the
   BeautifulSoup reference (peers/realdocs/reference.py): recall, precision, title and description
   equality, and leaks (a line of a pair's own YAML in its description, or the site's chrome).
3. GitHub only: of the llm4ci study's 725 distinct pairs (Title, Description, Code), which references
   the crawl of those pages produces (whitespace-insensitive), whose descriptions agree, and why each
   other one differs; and the reverse (pairs ours has and theirs lacks), by reason.
"""
from __future__ import annotations

import argparse
import collections
import csv
import gzip
import json
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path
from urllib.parse import urlsplit

from bench.realdocs import REALDOCS, ROOT, crawl  # the same crawl of a served folder
import peers
from peers.realdocs import fences

LLM4CI = peers.LLM4CI / "GitHubActions_Docs.csv.gz"
CHROME = ["Copy", "In this article", "Help and support", "Help & feedback", "Did you find what you needed",
          "Take our survey", "Edit this page", "Was this page helpful"]


def flat(s: str) -> str:
    return " ".join(s.split())


def nospace(s: str) -> str:
    return "".join(s.split())


LANDING = """---
title: GitHub Actions documentation
shortTitle: GitHub Actions
intro: 'Automate, customize, and execute your software development workflows right in your repository.'
versions:
  fpt: '*'
  ghes: '*'
  ghec: '*'
layout: product-landing
---
"""


def render(site: str, corpus: Path, out: Path) -> None:
    if site == "github":
        # The corpus holds the study's pages, not the product's landing page (`/en/actions`, no
        # examples: links only), where a crawl starts; a landing page of that layout stands in.
        content = out.parent / "github-content" / "actions"
        shutil.rmtree(content.parent, ignore_errors=True)
        shutil.copytree(corpus / "github" / "content" / "actions", content)
        if not (content / "index.md").exists():
            (content / "index.md").write_text(LANDING)
        cmd = ["node", str(REALDOCS / "github" / "render.mjs"), "--content", str(content),
               "--data", str(corpus / "github" / "data"), "--out", str(out)]
    else:
        cmd = [sys.executable, "-m", "peers.realdocs.render_gitlab", "--content", str(corpus / "gitlab-hugo" / "doc"),
               "--out", str(out)]
    r = subprocess.run(cmd, capture_output=True, text=True, cwd=ROOT)
    if r.returncode != 0:
        sys.exit(f"render {site}: {r.stderr[-3000:]}")


def reference(site_dir: Path, profile: str) -> list[dict]:
    r = subprocess.run([sys.executable, "-m", "peers.realdocs.reference", str(site_dir), "--site", profile],
                       check=True, capture_output=True, text=True, cwd=ROOT)
    return json.loads(r.stdout)


def leaks(pairs: list[dict]) -> tuple[int, int]:
    """Pairs whose description holds a line of their own YAML; pairs whose description holds chrome."""
    own = sum(1 for p in pairs if any(len(l.strip()) > 12 and l.strip() in p["description"]
                                      for l in p["reference"].splitlines()))
    chrome = sum(1 for p in pairs if any(c in p["description"] for c in CHROME))
    return own, chrome


def compare(got: list[dict], want: list[dict]) -> dict:
    key = lambda p: (p["url"].rstrip("/"), p["reference"])  # noqa: E731
    g, w = {key(p): p for p in got}, {key(p): p for p in want}
    both = set(g) & set(w)
    return {
        "want": len(w), "got": len(g), "recall": len(both) / max(len(w), 1), "precision": len(both) / max(len(g), 1),
        "title": sum(g[k]["title"] == w[k]["title"] for k in both) / max(len(both), 1),
        "description": sum(g[k]["description"] == w[k]["description"] for k in both) / max(len(both), 1),
        "leaks": leaks(list(g.values())), "ref_leaks": leaks(list(w.values())), "missing": sorted(set(w) - set(g))[:5], "extra": sorted(set(g) - set(w))[:5],
        "desc_diff": [(k[0], w[k]["description"], g[k]["description"]) for k in sorted(both) if g[k]["description"] != w[k]["description"]][:5],
    }


# ---------- the predecessor's pairs ----------

def predecessor() -> list[dict]:
    with gzip.open(LLM4CI, "rt", newline="") as f:
        rows = list(csv.DictReader(f))
    seen, out = set(), []
    for r in rows:
        k = (flat(r["Title"]), flat(r["Description"]), flat(r["Code"]))
        if k not in seen:
            seen.add(k)
            out.append({"path": urlsplit(r["URL"]).path.removeprefix("/en").rstrip("/"), "title": r["Title"],
                        "description": r["Description"], "reference": r["Code"]})
    return out


def sources(corpus: Path) -> dict[str, str]:
    """Each page's Markdown with the reusables it includes inlined (recursively): the text it had."""
    data = corpus / "github" / "data"
    inc = re.compile(r"\{%-?\s*(?:data|indented_data_reference)\s+(reusables\.[\w.-]+)[^%]*-?%\}")

    def expand(text: str, depth: int = 0) -> str:
        if depth > 8:
            return text
        def one(m: re.Match) -> str:
            f = data.joinpath(*m.group(1).split(".")).with_suffix(".md")
            return expand(f.read_text(), depth + 1) if f.exists() else f"[[missing {m.group(1)}]]"
        return inc.sub(one, text)

    out = {}
    root = corpus / "github" / "content"
    for f in (root / "actions").rglob("*.md"):
        rel = "/" + str(f.relative_to(root).with_suffix("")).removesuffix("/index")
        out[rel] = expand(f.read_text())
    return out


def words(s: str) -> list[str]:
    return re.findall(r"[a-z0-9]+", s.lower())


# Text the predecessor's crawler kept from the page's chrome: the annotated example's view toggle
# ("Beside", "Inline") and the copy button.
THEIR_CHROME = re.compile(r"\bBesideInline\b|\bCopy to clipboard\b")


def description_agreement(theirs: str, ours: str) -> str:
    """How a recovered pair's two descriptions relate (punctuation, quotes and case aside)."""
    t, o = " ".join(words(theirs)), " ".join(words(ours))
    if t == o:
        return "equal"
    if THEIR_CHROME.search(theirs):
        return "a leak in theirs (the page's chrome)"
    if t in o:
        return "theirs omits text ours has (prose of outer headings or list items)"
    if o in t:
        return "theirs includes text ours does not"
    tw, ow = set(words(theirs)), set(words(ours))
    if len(tw & ow) * 2 >= len(tw | ow):
        return "mostly the same words (the page's prose was edited since, or the rules differ in places)"
    return "different text (the page changed, or another section's prose)"


# The renderers' and the reference's YAML check (ruamel).
yaml_loads_collection = fences.collection


def recovery(corpus: Path, ours: list[dict]) -> dict:
    theirs = predecessor()
    src = sources(corpus)
    by_page: dict[str, list[dict]] = collections.defaultdict(list)
    for p in ours:
        by_page[p["url"].removeprefix("/en").rstrip("/")].append(p)
    # The predecessor crawled old URLs too; doc2ci's render serves a page at its own path only.
    redirects = {}
    for f in (corpus / "github" / "content" / "actions").rglob("*.md"):
        head = f.read_text().split("\n---", 1)[0]
        rel = "/" + str(f.relative_to(corpus / "github" / "content").with_suffix("")).removesuffix("/index")
        for r in re.findall(r"^\s*-\s*(/\S+)\s*$", head, re.M):
            redirects[r.removeprefix("/en").rstrip("/")] = rel
    reasons, descs = collections.Counter(), collections.Counter()
    recovered, examples = 0, collections.defaultdict(list)
    ours_all: dict[str, list[dict]] = collections.defaultdict(list)
    for p in ours:
        ours_all[nospace(p["reference"])].append(p)
    for t in theirs:
        page = t["path"] if t["path"] in src else redirects.get(t["path"], t["path"])
        mine = by_page.get(page, [])
        code = nospace(t["reference"])
        # The same page first; else the same example on another page of the corpus (the site
        # repeats examples); among several, the one whose title is closest to theirs.
        cands = [p for p in mine if nospace(p["reference"]) == code] or ours_all.get(code, [])
        if cands:
            hit = max(cands, key=lambda p: len(set(words(p["title"])) & set(words(t["title"]))))
            recovered += 1
            descs[description_agreement(t["description"], hit["description"])] += 1
            continue
        text = src.get(page)
        if text is None:
            why = "page not in the stored copies"
        elif code not in nospace(text):
            lines = [nospace(l) for l in t["reference"].splitlines() if l.strip()]
            present = sum(1 for l in lines if l in nospace(text))
            best = max((len(set(lines) & {nospace(l) for l in p["reference"].splitlines()}) for p in mine), default=0)
            if "[[missing" in text and present < len(lines):
                why = "in a reusable the store lacks"
            elif present == 0:
                why = "the stored copy is another version of the page: no line of it"
            elif best * 2 >= len(lines):
                why = "the stored copy is another version of the page: one of our pairs holds at least half its lines (action versions, comments)"
            else:
                why = "the stored copy is another version of the page: some of its lines, in other examples"
        elif not yaml_loads_collection(t["reference"]):
            why = "not YAML that loads as a mapping or sequence (doc2ci keeps only those)"
        elif any(code in nospace(p["reference"]) for p in mine):
            why = "their extraction split one block (theirs is part of ours)"
        elif any(nospace(p["reference"]) in code for p in mine if len(nospace(p["reference"])) > 20):
            why = "their extraction merged blocks (ours is part of theirs)"
        else:
            why = "in the source, not in our pairs"
        reasons[why] += 1
        if len(examples[why]) < 3:
            examples[why].append((page, t["reference"].splitlines()[0][:80] if t["reference"].strip() else ""))
    # The reverse: ours, on the predecessor's pages, that theirs lacks.
    their_codes = {nospace(t["reference"]) for t in theirs}
    their_pages = {t["path"] if t["path"] in src else redirects.get(t["path"], t["path"]) for t in theirs}
    reverse = collections.Counter()
    their_on_page: dict[str, list[str]] = collections.defaultdict(list)
    for t in theirs:
        their_on_page[t["path"] if t["path"] in src else redirects.get(t["path"], t["path"])].append(t["reference"])
    for page, refs in their_on_page.items():
        codes = [nospace(r) for r in refs]
        line_sets = [{nospace(l) for l in r.splitlines() if l.strip()} for r in refs]
        for p in by_page.get(page, []):
            code = nospace(p["reference"])
            if code in their_codes:
                continue
            lines = {nospace(l) for l in p["reference"].splitlines() if l.strip()}
            if any(code in c for c in codes):
                reverse["part of one of theirs on the page (they merged blocks)"] += 1
            elif any(c in code and len(tl) >= 3 for c, tl in zip(codes, line_sets)):
                reverse["holds one of theirs on the page whole (they split a block, or the example grew)"] += 1
            elif any(len(lines & tl) * 2 >= max(len(lines), len(tl)) for tl in line_sets):
                reverse["another version of one of theirs on the page (half the lines of both shared)"] += 1
            else:
                reverse["an example theirs does not have (added in the stored version, or missed by their crawl)"] += 1
    return {"theirs": len(theirs), "recovered": recovered, "descs": descs, "reasons": reasons, "examples": examples,
            "reverse": reverse}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("corpus", type=Path)
    ap.add_argument("binary")
    ap.add_argument("--out", type=Path)
    ap.add_argument("--backends", default="http,webdriver")
    a = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        tmp = a.out or Path(tmp)
        rows, github_pairs = [], []
        for site, profile, service in [("github", "github-docs", "github-actions"), ("gitlab", "gitlab-docs", "gitlab-ci")]:
            site_dir = tmp / f"{site}-site"
            render(site, a.corpus, site_dir)
            want = reference(site_dir, profile)
            for backend in a.backends.split(","):
                got, pages, secs = crawl(a.binary, site_dir, profile, service, backend, tmp / f"{site}-{backend}")
                rows.append((profile, backend, len(pages), compare(got, want), secs))
                if site == "github" and backend == "http":
                    github_pairs = got
        print("built-in profiles on the real pages, against peers/realdocs/reference.py (BeautifulSoup):")
        print(f"{'site':<12} {'backend':<10} {'pages':>5} {'ref':>5} {'ours':>5} {'recall':>7} {'precision':>9} "
              f"{'title=':>7} {'desc=':>7} {'own-YAML leaks':>14} {'chrome leaks':>12}  (ours/reference: prose that quotes"
              " the YAML, or words such as 'Copy')")
        for profile, backend, npages, c, secs in rows:
            print(f"{profile:<12} {backend:<10} {npages:>5} {c['want']:>5} {c['got']:>5} {c['recall']:>7.1%} "
                  f"{c['precision']:>9.1%} {c['title']:>7.1%} {c['description']:>7.1%} {str(c['leaks'][0]) + '/' + str(c['ref_leaks'][0]):>14} {str(c['leaks'][1]) + '/' + str(c['ref_leaks'][1]):>12}")
            for k in c["missing"]:
                print(f"    missing {k[0]}: {k[1].splitlines()[0][:70] if k[1] else ''}")
            for k in c["extra"]:
                print(f"    extra   {k[0]}: {k[1].splitlines()[0][:70] if k[1] else ''}")
            for url, theirs, ours in c["desc_diff"]:
                print(f"    description differs on {url}:\n      reference: {theirs[:300]}\n      doc2ci:    {ours[:300]}")
        r = recovery(a.corpus, github_pairs)
        print(f"\nthe llm4ci study's {r['theirs']} distinct pairs, recovered by doc2ci's crawl of the same pages: "
              f"{r['recovered']} ({r['recovered'] / r['theirs']:.1%}); their descriptions against ours:")
        for why, n in r["descs"].most_common():
            print(f"  {n:>4}  {why}")
        print("not recovered, by reason:")
        for why, n in r["reasons"].most_common():
            print(f"  {n:>4}  {why}")
            for page, first in r["examples"][why]:
                print(f"          e.g. {page}: {first}")
        print("ours on those pages that theirs lacks, by reason:")
        for why, n in r["reverse"].most_common():
            print(f"  {n:>4}  {why}")


if __name__ == "__main__":
    main()
