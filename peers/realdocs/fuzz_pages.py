#!/usr/bin/env python3
"""Generated and mutated documentation pages, for the extraction fuzz (issue 31).

    python3 -m peers.realdocs.fuzz_pages OUT_DIR --site github-docs --pages 200 --seed 1

Writes a site in the markup of one of the four documentation sites (the root, code blocks and chrome
the site's renderer emits, as in this folder's renderers) whose pages are random compositions of what
pages hold (headings at random levels, paragraphs with inline code, links, entities and comments,
nested lists with code in their items, tables, hidden blocks, chrome inside the article, YAML that is
a mapping, a sequence, a scalar or no YAML at all, highlighted or not), then mutated the way real
HTML is broken (an end tag dropped or doubled, a stray end tag, upper-case names, unquoted
attributes, CRLF). The start page links every page. doc2ci's crawl and `reference.py` then read the
same folder; the test compares their pairs.
"""
from __future__ import annotations

import argparse
import html
import random
from pathlib import Path

# Per site: the start page, the article's wrapper, a YAML block (code already escaped), chrome.
SITES = {
    "github-docs": {
        "start": "en/actions",
        "page": "en/actions/fuzz/p{i}",
        "wrap": '<div data-container="nav"><nav><a href="/en/actions">Actions</a></nav></div>'
                '<main id="main-content"><div id="article-contents"><h1 id="title-h1">{title}</h1>'
                '<div id="article-intro"><p>Intro that is not the page.</p></div>'
                '<div data-container="toc"><h2>In this article</h2></div>{body}</div></main>'
                '<footer><p>Footer text.</p></footer>',
        "yaml": '<div class="code-example"><header><button aria-label="Copy">Copy</button></header>'
                '<pre><code class="hljs language-{lang}">{code}</code></pre>'
                '<pre hidden data-clipboard="x">{code}</pre></div>',
        "other": '<pre><code class="hljs language-{lang}">{code}</code></pre>',
    },
    "gitlab-docs": {
        "start": "ci",
        "page": "ci/fuzz/p{i}",
        "wrap": '<nav class="gl-sidebar"><a href="/ci/">CI</a></nav><main><div class="docs-content">'
                '<h1>{title}</h1><div data-vue-app="survey-banner"><p>Take our survey</p></div>{body}'
                '<div class="help-feedback"><h2>Help &amp; feedback</h2><p>Ask.</p></div></div></main>',
        "yaml": '<div class="highlight"><div data-vue-app="codeblock-toolbar"></div>'
                '<pre class="chroma"><code data-lang="{lang}">{code}</code></pre></div>',
        "other": '<div class="highlight"><pre class="chroma"><code data-lang="{lang}">{code}</code></pre></div>',
    },
    "circleci-docs": {
        "start": "docs/guides/getting-started/first-steps",
        "page": "docs/guides/fuzz/p{i}",
        "wrap": '<nav class="navbar"><a href="/docs/">Docs</a></nav><main class="main-content"><article class="doc">'
                '<h1 class="page">{title}</h1><p>What this page is about.</p>{body}</article></main>'
                '<footer><p>Footer.</p></footer>',
        "yaml": '<div class="listingblock"><div class="content"><pre class="shiki highlight">'
                '<code data-lang="{lang}">{code}</code></pre></div></div>',
        "other": '<div class="listingblock"><div class="content"><pre class="shiki highlight">'
                 '<code data-lang="{lang}">{code}</code></pre></div></div>',
    },
    "travis-docs": {
        "start": "user/for-beginners",
        "page": "user/fuzz/p{i}",
        "wrap": '<nav id="sidebar"><a href="/user/for-beginners/">Start</a></nav><main id="main">'
                '<aside class="improve-page"><a>Improve this page</a></aside><h1>{title}</h1>'
                '<ul id="toc"><li>TOC</li></ul>{body}</main><footer><p>Footer.</p></footer>',
        "yaml": '<div class="language-{lang} highlighter-rouge"><div class="highlight"><pre class="highlight">'
                '<code>{code}</code></pre></div></div>',
        "other": '<div class="language-{lang} highlighter-rouge"><div class="highlight"><pre class="highlight">'
                 '<code>{code}</code></pre></div></div>',
    },
}

WORDS = ("build test deploy cache matrix runner job step workflow artifact secret token image "
         "service stage pipeline trigger branch tag release schedule environment variable").split()
SCALARS = ["true", "42", "ubuntu-latest", '"quoted <b>"', "a & b"]
ODD = ["&amp;", "&lt;", "&gt;", "&nbsp;", "&#x41;", "&#169;", "é", "—", "日本", "🚀", "\t", "  ", "\n", "&quot;"]


class Gen:
    def __init__(self, rng: random.Random, site: dict):
        self.r, self.site = rng, site

    def words(self, lo: int, hi: int) -> str:
        out = []
        for _ in range(self.r.randint(lo, hi)):
            out.append(self.r.choice(WORDS))
            if self.r.random() < 0.12:
                out.append(self.r.choice(ODD))
        return " ".join(out)

    def inline(self) -> str:
        parts = []
        for _ in range(self.r.randint(1, 4)):
            k = self.r.random()
            if k < 0.45:
                parts.append(self.words(1, 8))
            elif k < 0.6:
                parts.append(f"<code>{html.escape(self.r.choice(WORDS))}: {self.r.randint(1, 9)}</code>")
            elif k < 0.72:
                parts.append(f'<a href="/elsewhere/{self.r.randint(1, 99)}">{self.words(1, 3)}</a>')
            elif k < 0.8:
                parts.append(f"<em>{self.words(1, 3)}</em>")
            elif k < 0.86:
                parts.append("<br>")
            elif k < 0.92:
                parts.append(f"<!-- {self.words(1, 3)} -->")
            else:
                parts.append(f"<span>{self.words(1, 3)}</span>")
        return " ".join(parts)

    def yaml_text(self) -> str:
        k = self.r.random()
        key = lambda: self.r.choice(WORDS)  # noqa: E731
        if k < 0.45:
            lines = []
            for _ in range(self.r.randint(1, 5)):
                if self.r.random() < 0.4:
                    lines.append(f"{key()}:")
                    for _ in range(self.r.randint(1, 3)):
                        lines.append(f"  {key()}: {self.words(1, 3).strip() or 'x'}")
                else:
                    lines.append(f"{key()}: {self.r.choice(SCALARS)}")
            text = "\n".join(lines)
        elif k < 0.65:
            text = "\n".join(f"- {key()}: {self.r.randint(0, 9)}" for _ in range(self.r.randint(1, 4)))
        elif k < 0.75:
            text = self.r.choice(["just a scalar", "42", "'quoted'", "~"])
        elif k < 0.85:
            text = self.r.choice(["key: [unclosed", "a: b: c", "- a\nb: c", "{ x: 1", "key: @at"])
        else:
            text = f"# a comment\n{key()}:\n  - run: echo \"{self.words(1, 3)}\"\n  - uses: actions/checkout@v4"
        if self.r.random() < 0.2:
            text = "\n" + text
        if self.r.random() < 0.2:
            text += "\n\n"
        if self.r.random() < 0.1:
            text = text.replace("\n", "   \n")
        return text

    def code(self, text: str) -> str:
        esc = html.escape(text, quote=False)
        if self.r.random() < 0.4:  # a highlighter's spans around keys
            esc = "\n".join(
                f'<span class="hljs-attr">{ln.split(":", 1)[0]}</span>:{ln.split(":", 1)[1]}' if ":" in ln and not ln.startswith((" ", "-", "#")) else ln
                for ln in esc.split("\n")
            )
        return esc

    def block(self, depth: int) -> str:
        k = self.r.random()
        if k < 0.3:
            return f"<p>{self.inline()}</p>"
        if k < 0.5:
            lang = self.r.choice(["yaml", "yaml", "yaml", "yml"])
            return self.site["yaml"].format(lang=lang, code=self.code(self.yaml_text()))
        if k < 0.56:
            lang = self.r.choice(["shell", "json", "text"])
            return self.site["other"].format(lang=lang, code=self.code(self.yaml_text()))
        if k < 0.7 and depth < 3:
            tag = self.r.choice(["ul", "ol"])
            items = []
            for _ in range(self.r.randint(1, 3)):
                inner = self.inline()
                if self.r.random() < 0.5:
                    inner = f"<p>{inner}</p>" + self.block(depth + 1)
                items.append(f"<li>{inner}</li>")
            return f"<{tag}>{''.join(items)}</{tag}>"
        if k < 0.76:
            rows = "".join(f"<tr><td>{self.words(1, 3)}</td><td><code>{self.r.choice(WORDS)}</code></td></tr>" for _ in range(2))
            return f"<table><thead><tr><th>Key</th><th>Value</th></tr></thead><tbody>{rows}</tbody></table>"
        if k < 0.82 and depth < 3:
            hide = self.r.choice(['hidden', 'style="display: none"', 'style="DISPLAY:NONE;"'])
            return f"<div {hide}>{self.block(depth + 1)}</div>"
        if k < 0.88:
            return self.r.choice([
                f"<nav><p>{self.words(1, 3)}</p></nav>",
                "<button>Copy</button>",
                f"<script>var s = '<pre><code class=\"language-yaml\">a: 1</code></pre>';</script>",
                f"<template><p>{self.words(1, 3)}</p></template>",
                '<svg viewBox="0 0 1 1"><title>icon</title></svg>',
            ])
        if k < 0.94 and depth < 3:
            return f"<div class=\"box\">{self.block(depth + 1)}{self.block(depth + 1)}</div>"
        return f"<dl><dt>{self.words(1, 2)}</dt><dd>{self.inline()}</dd></dl>"

    def body(self) -> str:
        out = []
        for _ in range(self.r.randint(2, 10)):
            if self.r.random() < 0.35:
                lvl = self.r.randint(2, 4)
                out.append(f"<h{lvl} id=\"h{self.r.randint(0, 999)}\">{self.inline()}</h{lvl}>")
            out.append(self.block(0))
        return "".join(out)

    def mutate(self, page: str) -> str:
        r = self.r
        for _ in range(r.randint(0, 3)):
            k = r.random()
            if k < 0.25:  # an end tag dropped
                for t in ("</p>", "</li>", "</td>", "</dd>", "</span>", "</em>"):
                    if t in page and r.random() < 0.5:
                        i = r.choice([j for j in range(len(page)) if page.startswith(t, j)])
                        page = page[:i] + page[i + len(t):]
                        break
            elif k < 0.4:  # a stray end tag
                i = page.find("<p>", r.randrange(max(1, len(page))))
                if i > 0:
                    page = page[:i] + r.choice(["</div>", "</p>", "</span>", "</li>"]) + page[i:]
            elif k < 0.55:
                page = page.replace("<p>", "<P>").replace("</p>", "</P>")
            elif k < 0.65:
                page = page.replace('<a href="/elsewhere/', "<a href=/elsewhere/").replace('">', '" >', 1)
            elif k < 0.75:
                page = page.replace("\n", "\r\n")
            elif k < 0.85:  # doubled end tag
                page = page.replace("</li>", "</li></li>", 1)
            else:  # misnested inline
                page = page.replace("<em>", "<b><em>", 1).replace("</em>", "</b></em>", 1)
        return page


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("out", type=Path)
    ap.add_argument("--site", choices=sorted(SITES), required=True)
    ap.add_argument("--pages", type=int, default=100)
    ap.add_argument("--seed", type=int, default=1)
    a = ap.parse_args()
    site = SITES[a.site]
    rng = random.Random(f"{a.site}/{a.seed}")
    g = Gen(rng, site)
    links = []
    for i in range(a.pages):
        path = site["page"].format(i=i)
        body = g.mutate(g.body())
        page = ("<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\"><title>Fuzz</title></head><body>"
                + site["wrap"].format(title=f"Page {i}", body=body) + "</body></html>\n")
        f = a.out / path / "index.html"
        f.parent.mkdir(parents=True, exist_ok=True)
        f.write_text(page, encoding="utf-8")
        links.append(f'<li><a href="/{path}/">Page {i}</a></li>')
    start = ("<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\"><title>Start</title></head><body>"
             + site["wrap"].format(title="Start", body="<ul>" + "".join(links) + "</ul>") + "</body></html>\n")
    f = a.out / site["start"] / "index.html"
    f.parent.mkdir(parents=True, exist_ok=True)
    f.write_text(start, encoding="utf-8")


if __name__ == "__main__":
    main()
