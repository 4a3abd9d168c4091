#!/usr/bin/env python3
"""The peer of doc2ci's webdriver crawl: a Selenium crawler in Python like the Doc2CI study's.

    python3 -m peers.realdocs.selenium_crawl ORIGIN --site github-docs > pairs.json

Same Chromium and chromedriver, same flags as doc2ci's browser, same pages: it starts from the site's
start pages and follows every link inside the site's CI section (query strings and fragments dropped;
with --pages, every link to one of the given pages), one page at a time, reading each page's DOM after load (`driver.page_source`) and extracting its pairs
with peers/realdocs/reference.py (BeautifulSoup), the extraction doc2ci is compared with. Prints the
pairs as JSON and, on stderr, `selenium: N pages in S s`.
"""
from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path

from bs4 import BeautifulSoup
from selenium import webdriver
from selenium.webdriver.chrome.service import Service

from peers.realdocs import reference

FLAGS = [
    "--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
    "--disable-component-update", "--disable-sync", "--no-first-run", "--disable-dev-shm-usage",
]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("origin", help="where the site is served, e.g. http://127.0.0.1:8000")
    ap.add_argument("--site", choices=sorted(reference.SITES), required=True)
    ap.add_argument("--chromium", default="/usr/bin/chromium")
    ap.add_argument("--chromedriver", default="/usr/bin/chromedriver")
    ap.add_argument("--pages", type=argparse.FileType(), help="a JSON list of paths: visit only these (the pages doc2ci visited)")
    args = ap.parse_args()
    site = reference.SITES[args.site]
    given = json.load(args.pages) if args.pages else None
    origin = args.origin.rstrip("/")
    t0 = time.monotonic()
    with tempfile.TemporaryDirectory() as profile:
        opts = webdriver.ChromeOptions()
        opts.binary_location = args.chromium
        for f in FLAGS + [f"--user-data-dir={profile}"]:
            opts.add_argument(f)
        driver = webdriver.Chrome(service=Service(executable_path=args.chromedriver), options=opts)
        try:
            # With --pages: those pages, in doc2ci's order (each page's links are still read, as a
            # crawler must); without: the site's start pages, then what their links reach.
            queue = list(given) if given is not None else list(site["start"])
            seen, pairs, pages = set(queue), [], 0
            while queue:
                path = queue.pop(0)
                driver.get(origin + path)
                pages += 1
                soup = BeautifulSoup(driver.page_source, "html5lib")
                for p in reference.links(soup, origin, path, site):
                    if given is None and p not in seen:
                        seen.add(p)
                        queue.append(p)
                for i, pair in enumerate(reference.extract(soup, site)):
                    pairs.append({"url": path, **pair, "position": i})
        finally:
            driver.quit()
    print(f"selenium: {pages} pages in {time.monotonic() - t0:.2f} s", file=sys.stderr)
    json.dump(pairs, sys.stdout, indent=1, ensure_ascii=False)


if __name__ == "__main__":
    main()
