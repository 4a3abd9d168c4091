#!/usr/bin/env python3
"""Renders GitLab-docs Markdown into a static copy of docs.gitlab.com with Hugo, the site's engine.

    python3 -m peers.realdocs.render_gitlab --out DIR [--content DIR]

The content is the pages beside this file (written in the dialect of GitLab's `doc/` folder: Hugo
shortcodes `details`, `alert`, `tabs`/`tab`, `history`) or the `doc/` folder of a GitLab checkout
copied under `content/ci/`. The layouts are those of the docs site's Hugo theme, reduced to the
markup a crawler sees (render hook for code blocks, the shortcodes, the page chrome).

Besides the site it writes DIR/_fences.json: every YAML fence of every page as written in the
Markdown, and whether it loads as a mapping or a sequence (the oracle no renderer quirk can touch).
"""
from __future__ import annotations

import argparse
import shutil
import sys
from pathlib import Path

from peers.realdocs import SOURCES, fences

HERE = SOURCES / "gitlab"


def url_of(content: Path, f: Path) -> str:
    rel = f.relative_to(content).with_suffix("")
    parts = list(rel.parts)
    if parts[-1] in ("_index", "index"):
        parts.pop()
    return "/" + "/".join(parts) + ("/" if parts else "")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", type=Path, required=True)
    ap.add_argument("--content", type=Path, default=HERE / "content")
    args = ap.parse_args()
    out = args.out.resolve()
    shutil.rmtree(out, ignore_errors=True)
    fences.run_engine("hugo", ["--quiet", "--noBuildLock", "--source", str(HERE), "--contentDir", str(args.content.resolve()),
                               "--destination", str(out)])
    content = args.content.resolve()
    fences.write(out, {url_of(content, f): f.read_text(encoding="utf-8") for f in sorted(content.rglob("*.md"))})
    print(f"render: {sum(1 for _ in out.rglob('*.html'))} pages into {out}", file=sys.stderr)


if __name__ == "__main__":
    main()
