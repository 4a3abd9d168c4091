#!/usr/bin/env python3
"""Reference extractor for the rendered copies of the real documentation sites (BeautifulSoup).

    python3 -m peers.realdocs.reference SITE_DIR --site github-docs > expected.json

An implementation independent of doc2ci's (html5lib's tree and soupsieve's selectors, not html5ever
and scraper): it crawls the rendered folder the way a visitor of the site would (the start pages, then
every link inside the CI section, query strings and fragments dropped, only pages that exist), and
applies the extraction rule of SPEC.md to each page:

- drop what a reader of the real site does not read as the page's text: the site's chrome (navigation,
  sidebars, footers, buttons, icons), the copy-button twins of code blocks, and, per site, what its
  renderer adds around the article (see SITES);
- walk the article in document order with a stack of open headings; each paragraph-like block is its
  own text only (inline code and link text kept, nested blocks and code excluded), so an example's YAML
  never reaches the description of its own pair;
- a YAML example whose text loads as a mapping or a sequence is a pair: its title the open headings
  joined with " - ", its description the prose of the open headings so far, each text once.

Prints a JSON list of {url, title, description, reference, position}.
"""
from __future__ import annotations

import argparse
import json
import posixpath
import sys
from pathlib import Path
from urllib.parse import urljoin, urlsplit

from bs4 import BeautifulSoup, NavigableString, Tag

from peers.docsite import collapse, normalize_reference as trim_lines  # the docsite's reference: same rule
from peers.realdocs.fences import collection as loads_as_collection  # the renderers' oracle: same YAML check

# What each site's renderer produces, in this extractor's own words (not doc2ci's profile).
SITES = {
    # docs.github.com (github/docs: Next.js, unified). The article with its title is `main`; the
    # intro, the mini TOC and the breadcrumbs sit beside it in `main`. A copy button's code is
    # repeated in a hidden `pre`; an annotated example repeats its code as rows beside the notes
    # and whole inline: the inline copy is the example. Platform and tool variants are all examples.
    "github-docs": {
        "start": ["/en/actions"],
        "scope": "/en/actions",
        "root": "main",
        "drop": [
            "nav", "aside", "footer", "button", "svg", "script", "style", "template",
            "#article-intro", "[data-container=toc]", ".code-example > header",
            ".annotate-header", ".annotate-beside", "p.ghd-alert-title", ".heading-link-symbol",
        ],
        "yaml": "pre > code.language-yaml, pre > code.language-yml",
        "code": "pre",
        "prose": "p, li, dt, dd",
    },
    # docs.gitlab.com (GitLab's `doc/` rendered by the docs site's Hugo theme). The article with its
    # title is `.docs-content`; inside it sit the survey banner, the tier box (`details`), the
    # version-history box and the "Help & feedback" block. Chroma code sits in `div.highlight`;
    # `alert` boxes hold a lone paragraph as bare text; each tab's title precedes its panel.
    "gitlab-docs": {
        "start": ["/ci/"],
        "scope": "/ci/",
        "root": ".docs-content",
        "drop": [
            "nav", "aside", "footer", "button", "svg", "script", "style", "template", "a.anchor",
            "[data-vue-app=survey-banner]", "[data-vue-app=codeblock-toolbar]", ".availability",
            ".version-history", ".help-feedback",
        ],
        "yaml": "div.highlight > pre > code[data-lang=yaml], div.highlight > pre > code[data-lang=yml]",
        "code": "pre",
        "prose": "p, li, dt, dd, div.alert, div.tab-title",
    },
    # circleci.com/docs (Antora 3 with the CircleCI UI; Asciidoctor, Asciidoctor Tabs, Shiki). The
    # article is `article.doc`: its title, the info bar after it (platform badges, Markdown menu),
    # then the page. Callout markers sit inside the code lines; a paragraph admonition puts its text
    # straight into the table cell beside the icon, a callout list its text into the second cell; a
    # block's title (a listing's caption) is a line of its own.
    # The tab strip lists every label before the first panel, so it is not prose.
    "circleci-docs": {
        "start": ["/docs/guides/getting-started/first-steps/", "/docs/reference/configuration-reference/", "/docs/orbs/use/orb-intro/"],
        "scope": ["/docs/guides/", "/docs/reference/", "/docs/orbs/"],
        "root": "article.doc",
        "drop": [
            "nav", "aside", "footer", "button", "svg", "script", "style", "template",
            "h1.page + div", "a.anchor", "code i.conum", "code b", "td.icon", ".tablist", ".source-toolbox",
        ],
        "yaml": "pre > code[data-lang=yaml], pre > code[data-lang=yml]",
        "code": "pre",
        "prose": "p, li, dt, dd, div.title, .admonitionblock td.content, .colist td:last-child, td.hdlist2",
    },
    # docs.travis-ci.com (Jekyll, kramdown with GFM input, Rouge). The article is `main#main`: the
    # "Improve this page" aside, the title, the TOC, then the page, every heading ending in a `#`
    # link. Code is kramdown's `div.language-yaml.highlighter-rouge` (or Jekyll's `figure.highlight`
    # for `{% highlight %}`); note boxes hold their text directly. Travis CI Enterprise and the dated
    # build-environment notes are not user documentation. A language page's "at a glance" aside
    # (its defaults and a minimal example) is part of the page. In a browser, Prism wraps each block in
    # `div.code-toolbar` with a toolbar naming the language.
    "travis-docs": {
        "start": ["/user/for-beginners/", "/user/tutorial/", "/user/customizing-the-build/"],
        "scope": ["/user/"],
        "exclude": ["/user/enterprise/", "/user/build-environment-updates/"],
        "root": "main#main",
        "drop": [
            "nav", "aside.improve-page", "footer", "button", "svg", "script", "style", "template",
            "#toc", "a.toc-anchor", ".code-toolbar > .toolbar",
        ],
        "yaml": "div.language-yaml.highlighter-rouge pre > code, div.language-yml.highlighter-rouge pre > code, "
                "figure.highlight pre > code[data-lang=yaml]",
        "code": "pre",
        "prose": "p, li, dt, dd, .note-box",
    },
}

# What never belongs to an enclosing prose block's own text (SPEC: nested blocks, lists, tables, code);
# other elements (a `div` inside a list item, say) are part of the text around them.
BLOCK = {"pre", "ul", "ol", "dl", "table", "script", "style", "template", "h1", "h2", "h3", "h4", "h5", "h6"}
HEADING = {f"h{i}": i for i in range(1, 7)}



def hidden(el: Tag) -> bool:
    return el.has_attr("hidden") or "display:none" in el.get("style", "").replace(" ", "").lower()


def extract(soup: BeautifulSoup, site: dict) -> list[dict]:
    root = soup.select_one(site["root"])
    if root is None:
        return []
    for el in root.select(", ".join(site["drop"])):
        el.decompose()
    for el in [e for e in root.find_all(True) if hidden(e)]:
        if not el.decomposed:
            el.decompose()
    yaml_nodes = set(map(id, root.select(site["yaml"])))
    code_nodes = set(map(id, root.select(site["code"])))
    prose_nodes = set(map(id, root.select(site["prose"])))

    def own_text(el: Tag) -> str:
        out: list[str] = []
        for c in el.children:
            if isinstance(c, NavigableString):
                if type(c) is NavigableString:  # not a comment or CDATA
                    out.append(str(c))
            elif c.name == "br":
                out.append(" ")
            elif c.name in BLOCK or id(c) in yaml_nodes or id(c) in code_nodes or id(c) in prose_nodes:
                out.append(" ")
            else:
                out.append(own_text(c))
        return collapse("".join(out))

    pairs: list[dict] = []
    stack: list[tuple[int, str, list[str]]] = []

    def description() -> str:
        seen: list[str] = []
        for _, _, prose in stack:
            for p in prose:
                if p not in seen:
                    seen.append(p)
        return " ".join(seen) or "."

    def walk(el: Tag) -> None:
        for c in el.children:
            if not isinstance(c, Tag):
                continue
            if c.name in HEADING:
                while stack and stack[-1][0] >= HEADING[c.name]:
                    stack.pop()
                stack.append((HEADING[c.name], collapse(c.get_text()), []))
            elif id(c) in yaml_nodes:
                text = c.get_text()
                if loads_as_collection(text):
                    pairs.append({
                        "title": " - ".join(t for _, t, _ in stack),
                        "description": description(),
                        "reference": trim_lines(text),
                    })
            elif id(c) in code_nodes and not c.select(site["yaml"]):
                continue
            else:
                if id(c) in prose_nodes and stack:
                    text = own_text(c)
                    if text:
                        stack[-1][2].append(text)
                walk(c)

    walk(root)
    return pairs


def page_file(site_dir: Path, path: str) -> Path | None:
    f = site_dir / path.lstrip("/")
    if f.is_dir():
        f = f / "index.html"
    return f if f.is_file() else None


def in_scope(path: str, scope: str | list[str]) -> bool:
    if isinstance(scope, list):
        return any(in_scope(path, s) for s in scope)
    return path == scope or path.startswith(scope.rstrip("/") + "/")


def links(soup: BeautifulSoup, origin: str, path: str, site: dict) -> list[str]:
    """The paths of a page's links a crawl of `site` follows: same origin, inside the CI section."""
    out = []
    for a in soup.find_all(["a", "link"], href=True):
        u = urlsplit(urljoin(origin + path, a["href"]))
        if u.scheme + "://" + u.netloc != origin:
            continue
        p = posixpath.normpath(u.path) if u.path not in ("", "/") else "/"
        if u.path.endswith("/") and p != "/":
            p += "/"
        if in_scope(p, site["scope"]) and not any(p.startswith(x) for x in site.get("exclude", [])):
            out.append(p)
    return out


def crawl(site_dir: Path, site: dict) -> list[dict]:
    origin = "http://site.example.com"
    queue = list(site["start"])
    seen = set(queue)
    out: list[dict] = []
    while queue:
        path = queue.pop(0)
        f = page_file(site_dir, path)
        if f is None:
            continue
        soup = BeautifulSoup(f.read_bytes(), "html5lib")
        for p in links(soup, origin, path, site):
            if p not in seen and p.rstrip("/") not in seen:
                seen.add(p)
                queue.append(p)
        for i, pair in enumerate(extract(soup, site)):
            out.append({"url": path, **pair, "position": i})
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("site_dir", type=Path)
    ap.add_argument("--site", choices=sorted(SITES), required=True)
    args = ap.parse_args()
    json.dump(crawl(args.site_dir, SITES[args.site]), sys.stdout, indent=1, ensure_ascii=False)
    sys.stdout.write("\n")


if __name__ == "__main__":
    main()
