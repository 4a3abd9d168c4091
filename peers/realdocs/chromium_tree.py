#!/usr/bin/env python3
"""The reference extraction on Chromium's tree of a page, for the extraction fuzz (issue 31).

    python3 -m peers.realdocs.chromium_tree SITE_DIR --site github-docs PATH...

html5lib (the reference's parser) and html5ever (doc2ci's) both implement the HTML standard's tree
construction, but html5lib deviates on some broken markup (it does not reconstruct an unclosed
formatting element in every later block, for one). Where the two extractions differ on a fuzzed page,
the page is loaded in headless Chromium (the standard's tree, serialized) and the reference's rule
is applied to that tree: if doc2ci's pairs equal these, the difference is html5lib's.
Prints {path: [pairs]} as JSON.
"""
from __future__ import annotations

import argparse
import json
import shutil
import sys
import tempfile
from pathlib import Path

from bs4 import BeautifulSoup
from selenium import webdriver
from selenium.webdriver.chrome.service import Service

from peers.realdocs.reference import SITES, extract, page_file


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("site_dir", type=Path)
    ap.add_argument("--site", choices=sorted(SITES), required=True)
    ap.add_argument("paths", nargs="+")
    a = ap.parse_args()
    out = {}
    with tempfile.TemporaryDirectory() as profile:
        # One headless Chromium for every page (a browser per page made a large fuzz run crawl).
        opts = webdriver.ChromeOptions()
        opts.binary_location = shutil.which("chromium") or shutil.which("chromium-browser") or "chromium"
        for flag in ["--headless", "--no-sandbox", "--disable-gpu", f"--user-data-dir={profile}"]:
            opts.add_argument(flag)
        driver = webdriver.Chrome(service=Service(executable_path=shutil.which("chromedriver") or "chromedriver"), options=opts)
        try:
            for path in a.paths:
                f = page_file(a.site_dir, path)
                driver.get(f.resolve().as_uri())
                dom = driver.execute_script("return document.documentElement.outerHTML")
                # The serialized DOM closes every element it opens, so a parser that nests tags as
                # written (html.parser, no HTML5 tree repair) rebuilds Chromium's tree as it is;
                # html5lib would repair it again (a `<p>` in a `<template>` in a `<p>`, say).
                soup = BeautifulSoup(dom, "html.parser")
                out[path] = [{"url": path, **p, "position": i} for i, p in enumerate(extract(soup, SITES[a.site]))]
        finally:
            driver.quit()
    json.dump(out, sys.stdout, ensure_ascii=False)


if __name__ == "__main__":
    main()
