#!/usr/bin/env python3
"""Renders Travis-CI-docs Markdown into a static copy of docs.travis-ci.com with Jekyll, the site's engine.

    python3 -m peers.realdocs.render_travis --out DIR [--content DIR]

Jekyll 4.3 with kramdown (GFM input) and Rouge, as the site's `_config.yml` sets, the redirect stubs of
jekyll-redirect-from, and the `en` layout reduced to the markup a crawler sees (top bar, sidebar, footer,
"Improve this page" aside, the TOC and the `#` anchors the site adds to headings, and the script that
adds Prism's toolbar in a browser). The content is the pages beside this file (written in the site's
dialect: `{: data-file=".travis.yml"}` and `{: .warning}` attribute lists, one-item numbered lists,
`note-box` divs, `{% highlight %}`) or the `user/` pages of a checkout of the site given as --content.

Besides the site it writes DIR/_fences.json: every YAML fence of every page as written in the
Markdown, and whether it loads as a mapping or a sequence (the oracle no renderer quirk can touch).
"""
from __future__ import annotations

import argparse
import re
import shutil
import sys
import tempfile
from pathlib import Path

from peers.realdocs import SOURCES, fences

HERE = SOURCES / "travis"


def permalink(md: str) -> str | None:
    m = re.search(r"^permalink:\s*(\S+)\s*$", md.split("\n---", 1)[0], re.M)
    return m.group(1) if m else None


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", type=Path, required=True)
    ap.add_argument("--content", type=Path, help="a checkout of docs-travis-ci-com: its user/ pages instead of the ones here")
    args = ap.parse_args()
    out = args.out.resolve()
    shutil.rmtree(out, ignore_errors=True)
    with tempfile.TemporaryDirectory() as tmp:
        src = HERE
        if args.content:
            # A checkout of the site: its `user/` pages with the `_includes` and `_data` they use,
            # under this folder's layout and chrome (our includes win where both have one).
            src = Path(tmp) / "site"
            for extra in ("_includes", "_data"):
                if (args.content / extra).is_dir():
                    shutil.copytree(args.content / extra, src / extra)
            shutil.copytree(HERE, src, ignore=shutil.ignore_patterns("user", "index.md", "legal.md"), dirs_exist_ok=True)
            shutil.copytree(args.content / "user", src / "user")
        fences.run_engine("jekyll", ["build", "--quiet", "--disable-disk-cache", "--source", str(src), "--destination", str(out)])
        pages = {}
        for f in sorted(src.rglob("*.md")):
            if f.name == "README.md" or any(p.startswith("_") for p in f.relative_to(src).parts):
                continue
            md = f.read_text(encoding="utf-8")
            rel = f.relative_to(src).with_suffix("")
            pages[permalink(md) or "/" + "/".join(rel.parts) + "/"] = md
        fences.write(out, pages)
    print(f"render: {sum(1 for _ in out.rglob('*.html'))} pages into {out}", file=sys.stderr)


if __name__ == "__main__":
    main()
