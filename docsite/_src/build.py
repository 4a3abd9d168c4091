#!/usr/bin/env python3
"""Generate the bundled documentation site from the page sources in docsite/_src/pages.

    python3 -m docsite._src.build        # rewrites the generated HTML under docsite/

The sources are a small Markdown dialect (see docsite/README.md); each service is rendered with the markup
its real documentation site uses, so the crawler's site profiles, not its code, must say what to strip and
where the YAML is. The generated HTML is committed: the crawler and its tests read only the HTML.

Every YAML block is checked while building: a block marked valid must load as a mapping or a sequence with
a YAML 1.2 loader (ruamel.yaml, pip install ruamel.yaml), a block marked `broken` must fail to load, and a
block marked `scalar` must load as a scalar. Highlighted code must give back its exact text.
"""
from __future__ import annotations

import html
import json
import posixpath
import re
import sys
from dataclasses import dataclass, field
from pathlib import Path

HERE = Path(__file__).resolve().parent
SITE = HERE.parent
PAGES = HERE / "pages"

from peers.docsite import yaml_kind  # shared loader: one definition of "parses"

# --------------------------------------------------------------------------------------------------------
# Site structure
# --------------------------------------------------------------------------------------------------------

SERVICES = {
    "github-actions": {
        "display": "GitHub Actions",
        "pages": [  # (source, label); index first
            ("index", "Understanding GitHub Actions"),
            ("workflow-syntax", "Workflow syntax"),
            ("jobs", "Using jobs"),
            ("caching", "Caching dependencies"),
            ("secrets-and-artifacts", "Variables, secrets and artifacts"),
            ("deployment", "Deploying"),
            ("drafts/larger-runners", "Larger runners (draft)"),
        ],
        # sidebar hrefs that differ from the page path (the same page reachable through two URLs)
        "sidebar_query": {"caching": "?ref=sidebar"},
        "copies": {"guides/caching": "caching"},
        "no_sidebar_entry": [],
    },
    "circleci": {
        "display": "CircleCI",
        "pages": [
            ("index", "Configuration introduction"),
            ("executors", "Executors and images"),
            ("workflows", "Workflows"),
            ("caching", "Caches, workspaces and artifacts"),
            ("variables", "Environment variables and contexts"),
        ],
        "sidebar_query": {},
        "copies": {"2.0/workflows": "workflows"},
    },
    "gitlab-ci": {
        "display": "GitLab CI/CD",
        "pages": [
            ("index", "Get started"),
            ("jobs", "Jobs and pipeline flow"),
            ("caching", "Caching and artifacts"),
            ("variables", "CI/CD variables"),
            ("deployment", "Environments and deployments"),
            ("examples", "Example files"),
        ],
        "sidebar_query": {},
        "copies": {"ee/variables": "variables"},
    },
    "travis-ci": {
        "display": "Travis CI",
        "pages": [
            ("index", "Tutorial"),
            ("build-matrix", "Build matrix"),
            ("stages", "Build stages"),
            ("caching", "Caching"),
            ("deployment", "Deployment"),
        ],
        "sidebar_query": {},
        "copies": {"user/build-matrix": "build-matrix"},
    },
}

# Travis CI: older pages use <pre class="yaml">, newer ones <figure class="code" data-lang="yaml">.
TRAVIS_FIGURE_PAGES = {"caching", "deployment"}

OFFSITE_FOOTER = [
    ("Community forum", "https://community.example.com/"),
    ("Status", "https://status.example.com/"),
    ("Privacy", "https://www.example.com/legal/privacy"),
]

# --------------------------------------------------------------------------------------------------------
# Markdown dialect
# --------------------------------------------------------------------------------------------------------


@dataclass
class Block:
    kind: str  # heading p ul ol note code table raw hidden
    level: int = 0
    text: str = ""
    items: list = field(default_factory=list)
    lang: str = ""
    flags: dict = field(default_factory=dict)
    children: list = field(default_factory=list)


def parse_md(src: str) -> tuple[dict, list[Block]]:
    lines = src.split("\n")
    meta: dict = {}
    i = 0
    while i < len(lines) and re.match(r"^[a-z_]+: ", lines[i]):
        k, v = lines[i].split(": ", 1)
        meta[k] = v
        i += 1
    blocks, i = _parse_blocks(lines, i, end_marker=None)
    return meta, blocks


def _parse_flags(info: str) -> tuple[str, dict]:
    parts = info.split()
    lang = parts[0] if parts else ""
    flags: dict = {}
    for p in parts[1:]:
        if "=" in p:
            k, v = p.split("=", 1)
            flags[k] = v
        else:
            flags[p] = True
    return lang, flags


def _parse_blocks(lines, i, end_marker):
    blocks: list[Block] = []
    para: list[str] = []

    def flush():
        if para:
            blocks.append(Block("p", text="\n".join(para)))
            para.clear()

    while i < len(lines):
        line = lines[i]
        if end_marker and line.strip() == end_marker:
            flush()
            return blocks, i + 1
        if not line.strip():
            flush()
            i += 1
            continue
        m = re.match(r"^(#{1,4}) (.*)$", line)
        if m:
            flush()
            blocks.append(Block("heading", level=len(m.group(1)), text=m.group(2).strip()))
            i += 1
            continue
        if line.startswith("```"):
            flush()
            lang, flags = _parse_flags(line[3:].strip())
            body = []
            i += 1
            while lines[i] != "```":
                body.append(lines[i])
                i += 1
            blocks.append(Block("code", lang=lang, flags=flags, text="\n".join(body)))
            i += 1
            continue
        if line.startswith("::raw"):
            flush()
            body = []
            i += 1
            while lines[i].strip() != "::endraw":
                body.append(lines[i])
                i += 1
            blocks.append(Block("raw", text="\n".join(body)))
            i += 1
            continue
        if line.startswith("::table"):
            flush()
            rows = []
            i += 1
            while lines[i].strip() != "::endtable":
                rows.append([c.strip() for c in lines[i].split("|")])
                i += 1
            blocks.append(Block("table", items=rows))
            i += 1
            continue
        if line.startswith("::hidden"):
            flush()
            _, flags = _parse_flags("x " + line[len("::hidden"):].strip())
            children, i = _parse_blocks(lines, i + 1, "::endhidden")
            blocks.append(Block("hidden", flags=flags, children=children))
            continue
        m = re.match(r"^(- |\d+\. )(.*)$", line)
        if m:
            flush()
            kind = "ul" if m.group(1) == "- " else "ol"
            items = []
            while i < len(lines) and re.match(r"^(- |\d+\. )", lines[i]):
                items.append(re.sub(r"^(- |\d+\. )", "", lines[i]))
                i += 1
            blocks.append(Block(kind, items=items))
            continue
        if line.startswith("> "):
            flush()
            body = []
            while i < len(lines) and lines[i].startswith("> "):
                body.append(lines[i][2:])
                i += 1
            blocks.append(Block("note", text="\n".join(body)))
            continue
        para.append(line)
        i += 1
    flush()
    return blocks, i


INLINE = re.compile(r"`([^`]+)`|\[([^\]]+)\]\(([^)]+)\)|\*\*([^*]+)\*\*")


def plain_text(src: str) -> str:
    """Text of an inline source as a browser would show it (used for ids, titles and the TOC)."""
    out = []
    pos = 0
    for m in INLINE.finditer(src):
        out.append(src[pos:m.start()])
        out.append(m.group(1) or m.group(2) or m.group(4))
        pos = m.end()
    out.append(src[pos:])
    return "".join(out)


def slug(text: str) -> str:
    s = re.sub(r"[^a-z0-9]+", "-", plain_text(text).lower()).strip("-")
    return s or "section"


# --------------------------------------------------------------------------------------------------------
# YAML highlighting (Rouge-like for GitLab, Pygments-like for CircleCI); the text content stays exact
# --------------------------------------------------------------------------------------------------------

KEY_RE = re.compile(r"""^("[^"]*"|'[^']*'|[^\s#"'\[\]{},][^#]*?)(:)(?=\s|$)""")
NUM_RE = re.compile(r"^-?\d+(\.\d+)?$")
CONST = {"true", "false", "null", "~"}


def yaml_tokens(text: str):
    """Yield (role, text) pieces; role None is unhighlighted. Concatenation equals the input."""
    block_indent = None
    lines = text.split("\n")
    for n, line in enumerate(lines):
        toks = []
        stripped = line.lstrip(" ")
        indent = len(line) - len(stripped)
        if block_indent is not None:
            if not stripped or indent > block_indent:
                if line:
                    toks.append(("string", line))
                yield from toks
                if n < len(lines) - 1:
                    yield (None, "\n")
                continue
            block_indent = None
        if indent:
            toks.append((None, line[:indent]))
        rest = stripped
        while rest.startswith("- ") or rest == "-":
            toks.append(("indicator", "-"))
            rest = rest[1:]
            sp = len(rest) - len(rest.lstrip(" "))
            if sp:
                toks.append((None, rest[:sp]))
            rest = rest[sp:]
        if rest.startswith("#"):
            toks.append(("comment", rest))
            rest = ""
        km = KEY_RE.match(rest)
        if km and not rest.startswith(("- ", "!")):
            toks.append(("key", km.group(1)))
            toks.append(("indicator", ":"))
            rest = rest[km.end():]
            sp = len(rest) - len(rest.lstrip(" "))
            if sp:
                toks.append((None, rest[:sp]))
            rest = rest[sp:]
        if rest:
            cm = re.search(r"\s#", rest)
            value, comment = (rest[: cm.start()], rest[cm.start():]) if cm else (rest, "")
            core = value.rstrip(" ")
            trail = value[len(core):]
            if core:
                if re.match(r"^[|>][-+]?$", core):
                    role = "indicator"
                    # lines indented deeper than this line belong to the block scalar
                    block_indent = indent
                elif NUM_RE.match(core):
                    role = "number"
                elif core in CONST:
                    role = "constant"
                elif core[0] in "\"'":
                    role = "quoted"
                elif core[0] in "&*":
                    role = "anchor"
                elif core[0] == "!":
                    role = "tag"
                else:
                    role = "string"
                toks.append((role, core))
            if trail:
                toks.append((None, trail))
            if comment:
                ws = len(comment) - len(comment.lstrip())
                toks.append((None, comment[:ws]))
                toks.append(("comment", comment[ws:]))
        yield from toks
        if n < len(lines) - 1:
            yield (None, "\n")


ROUGE = {"key": "na", "indicator": "pi", "string": "s", "quoted": "s2", "number": "m", "constant": "kc",
         "comment": "c1", "anchor": "nv", "tag": "nt"}
PYGMENTS = {"key": "nt", "indicator": "p", "string": "l l-Scalar l-Scalar-Plain", "quoted": "s",
            "number": "m", "constant": "kc", "comment": "c1", "anchor": "nv", "tag": "kt"}


def highlight(text: str, classes: dict) -> str:
    out = []
    for role, piece in yaml_tokens(text):
        if role is None:
            out.append(esc(piece))
        else:
            out.append(f'<span class="{classes[role]}">{esc(piece)}</span>')
    result = "".join(out)
    back = html.unescape(re.sub(r"<[^>]+>", "", result))
    assert back == text, f"highlighting changed the text:\n{text!r}\n{back!r}"
    return result


def esc(s: str) -> str:
    return html.escape(s, quote=False)


def attr(s: str) -> str:
    return html.escape(s, quote=True)


# --------------------------------------------------------------------------------------------------------
# Renderers
# --------------------------------------------------------------------------------------------------------


class Renderer:
    service = ""
    body_class = ""

    def __init__(self, out_path: str, source: str):
        self.out_path = out_path  # e.g. "github-actions/guides/caching.html"
        self.source = source  # e.g. "caching"
        self.ids: set[str] = set()
        self.toc: list[tuple[int, str, str]] = []
        self.scripts: list[str] = []

    # links are written site-absolute in the sources and made relative to the page here
    def href(self, target: str) -> str:
        if re.match(r"^[a-z]+:", target) or target.startswith("#"):
            return target
        path, sep, rest = target.partition("#")
        path, qsep, query = path.partition("?")
        rel = posixpath.relpath(path.lstrip("/"), posixpath.dirname(self.out_path) or ".")
        if qsep:
            rel += "?" + query
        if sep:
            rel += "#" + rest
        return rel

    def inline(self, src: str) -> str:
        out = []
        pos = 0
        for m in INLINE.finditer(src):
            out.append(esc(src[pos:m.start()]))
            if m.group(1) is not None:
                out.append(f"<code>{esc(m.group(1))}</code>")
            elif m.group(2) is not None:
                out.append(f'<a href="{attr(self.href(m.group(3)))}">{self.inline(m.group(2))}</a>')
            else:
                out.append(f"<strong>{self.inline(m.group(4))}</strong>")
            pos = m.end()
        out.append(esc(src[pos:]))
        return "".join(out)

    def new_id(self, text: str) -> str:
        base = slug(text)
        i, cand = 1, base
        while cand in self.ids:
            i += 1
            cand = f"{base}-{i}"
        self.ids.add(cand)
        return cand

    # ---- blocks
    def render_blocks(self, blocks: list[Block], hidden=False) -> str:
        return "\n".join(self.block(b, hidden) for b in blocks)

    def block(self, b: Block, hidden=False) -> str:
        if b.kind == "heading":
            hid = self.new_id(b.text)
            if not hidden and b.level in (2, 3):
                self.toc.append((b.level, hid, plain_text(b.text)))
            return self.heading(b.level, b.text, hid)
        if b.kind == "p":
            return f"<p>{self.inline(b.text)}</p>"
        if b.kind in ("ul", "ol"):
            return self.list(b.kind, b.items)
        if b.kind == "note":
            return self.note(b.text)
        if b.kind == "raw":
            return b.text
        if b.kind == "table":
            return self.table(b.items)
        if b.kind == "hidden":
            inner = self.render_blocks(b.children, hidden=True)
            cls = b.flags.get("class", "")
            cls_attr = f' class="{attr(cls)}"' if cls else ""
            if "style" in b.flags:
                return f'<div{cls_attr} style="display:none">\n{inner}\n</div>'
            return f"<div{cls_attr} hidden>\n{inner}\n</div>"
        if b.kind == "code":
            return self.code(b)
        raise ValueError(b.kind)

    def code(self, b: Block) -> str:
        if b.lang == "yaml":
            check_yaml_intent(b, self.out_path)
            if "js" in b.flags:
                return self.js_block(b.flags["js"], self.yaml(b.text, b.flags.get("title")))
            return self.yaml(b.text, b.flags.get("title"))
        return self.other_code(b.lang, b.text, b.flags.get("title"))

    def js_block(self, slot_id: str, markup: str) -> str:
        payload = json.dumps(markup).replace("</", "<\\/")
        self.scripts.append(
            "(function () {\n"
            '  "use strict";\n'
            f"  var html = {payload};\n"
            "  function render() {\n"
            f'    var slot = document.getElementById("{slot_id}");\n'
            "    if (slot) { slot.innerHTML = html; }\n"
            "  }\n"
            '  if (document.readyState === "loading") {\n'
            '    document.addEventListener("DOMContentLoaded", render);\n'
            "  } else {\n"
            "    render();\n"
            "  }\n"
            "})();"
        )
        return self.js_slot(slot_id)

    def js_slot(self, slot_id: str) -> str:
        return f'<div class="tab-panel" id="{slot_id}" data-example="{slot_id}"></div>'

    def list(self, kind, items):
        lis = "\n".join(f"<li>{self.inline(it)}</li>" for it in items)
        return f"<{kind}>\n{lis}\n</{kind}>"

    def table(self, rows, cls="reference-table"):
        head = "".join(f"<th>{self.inline(c)}</th>" for c in rows[0])
        body = "\n".join("<tr>" + "".join(f"<td>{self.inline(c)}</td>" for c in r) + "</tr>" for r in rows[1:])
        return f'<table class="{cls}">\n<thead><tr>{head}</tr></thead>\n<tbody>\n{body}\n</tbody>\n</table>'

    def toc_html(self, title="On this page") -> str:
        items = []
        open_sub = False
        for level, hid, text in self.toc:
            if level == 2:
                if open_sub:
                    items.append("</ul></li>")
                    open_sub = False
                elif items:
                    items.append("</li>")
                items.append(f'<li><a href="#{hid}">{esc(text)}</a>')
            else:
                if not open_sub:
                    items.append("<ul>")
                    open_sub = True
                items.append(f'<li><a href="#{hid}">{esc(text)}</a></li>')
        if open_sub:
            items.append("</ul></li>")
        elif items:
            items.append("</li>")
        return (f'<nav class="toc" aria-labelledby="toc-title-{self.service}">\n'
                f'<h2 id="toc-title-{self.service}">{esc(title)}</h2>\n<ul>\n' + "\n".join(items) + "\n</ul>\n</nav>")

    def sidebar_links(self):
        cfg = SERVICES[self.service]
        out = []
        for src, label in cfg["pages"]:
            target = f"/{self.service}/{src}.html" + cfg["sidebar_query"].get(src, "")
            current = ' aria-current="page"' if src == self.source else ""
            out.append(f'<li><a href="{attr(self.href(target))}"{current}>{esc(label)}</a></li>')
        return "\n".join(out)

    def head(self, title: str) -> str:
        return (
            "<!DOCTYPE html>\n"
            '<html lang="en">\n<head>\n<meta charset="utf-8">\n'
            '<meta name="viewport" content="width=device-width, initial-scale=1">\n'
            f"<title>{esc(title)} | {esc(SERVICES[self.service]['display'])} documentation</title>\n"
            '<link rel="icon" href="data:,">\n'
            f'<link rel="stylesheet" href="{self.href("/style.css")}">\n'
            "</head>\n"
        )

    def service_nav(self, cls: str) -> str:
        links = "".join(
            f'<li><a href="{attr(self.href(f"/{s}/index.html"))}">{esc(c["display"])}</a></li>'
            for s, c in SERVICES.items()
        )
        return (f'<nav class="{cls}" aria-label="Main">\n<a class="brand" href="{self.href("/index.html")}">CI Docs</a>\n'
                f'<ul>{links}<li><a href="https://blog.example.com/">Blog</a></li></ul>\n</nav>')

    def footer_links(self) -> str:
        return "".join(f'<li><a href="{u}">{esc(t)}</a></li>' for t, u in OFFSITE_FOOTER)

    def script_tags(self) -> str:
        return "".join(f"\n<script>\n{s}\n</script>" for s in self.scripts)


class GitHubRenderer(Renderer):
    """GitHub docs-like: <article class="markdown-body">, <pre><code class="language-yaml">, TOC inside."""
    service = "github-actions"

    def heading(self, level, text, hid):
        return f'<h{level} id="{hid}"><a class="heading-link" href="#{hid}">{self.inline(text)}</a></h{level}>'

    def note(self, text):
        return f'<div class="note" role="note"><p><strong>Note:</strong> {self.inline(text)}</p></div>'

    def yaml(self, text, title):
        cap = f'<div class="code-title">{esc(title)}</div>' if title else ""
        return (f'<div class="code-example">{cap}<pre><code class="language-yaml">{esc(text)}</code></pre>'
                '<button class="copy-button" type="button">Copy</button></div>')

    def other_code(self, lang, text, title):
        return (f'<div class="code-example"><pre><code class="language-{lang}">{esc(text)}</code></pre>'
                '<button class="copy-button" type="button">Copy</button></div>')

    def page(self, title, blocks):
        h1, rest = blocks[0], blocks[1:]
        h1_html = self.block(h1)
        body = self.render_blocks(rest)
        return (
            self.head(plain_text(title))
            + '<body class="site-gha">\n<a class="skip-link" href="#main-content">Skip to main content</a>\n'
            + '<header class="site-header">\n' + self.service_nav("topnav") + "\n</header>\n"
            + '<div class="layout">\n<aside class="sidebar">\n<nav aria-label="GitHub Actions">\n'
            + '<p class="sidebar-title">GitHub Actions</p>\n<ul>\n' + self.sidebar_links() + "\n</ul>\n</nav>\n</aside>\n"
            + '<main id="main-content">\n'
            + f'<nav class="breadcrumbs" aria-label="Breadcrumb"><ol><li><a href="{self.href("/index.html")}">Docs</a></li>'
            + f'<li><a href="{self.href("/github-actions/index.html")}">GitHub Actions</a></li><li>{esc(plain_text(title))}</li></ol></nav>\n'
            + '<article class="markdown-body">\n' + h1_html + "\n" + self.toc_html("In this article") + "\n"
            + body + "\n</article>\n"
            + '<section class="related-examples">\n<h2>Popular examples</h2>\n'
            + "<p>Other readers of this page also copied this workflow.</p>\n"
            + '<div class="code-example"><pre><code class="language-yaml">on:\n  workflow_dispatch:</code></pre></div>\n'
            + "</section>\n"
            + '<div class="feedback"><p>Did this page help you?</p><button type="button">Yes</button>'
            + '<button type="button">No</button></div>\n</main>\n</div>\n'
            + '<footer class="site-footer">\n<p>Help and support</p>\n<ul>' + self.footer_links() + "</ul>\n"
            + "<p>Written for the doc2ci test suite. Not affiliated with any CI vendor.</p>\n</footer>\n"
            + '<div class="cookie-banner" hidden>\n<p>We use cookies to remember your preferences.</p>\n'
            + '<pre><code class="language-yaml">cookies:\n  analytics: false\n  preferences: true</code></pre>\n'
            + '<button type="button">Accept</button>\n</div>'
            + self.script_tags()
            + "\n</body>\n</html>\n"
        )


class CircleRenderer(Renderer):
    """Antora/Asciidoctor-like: nested div.sectN, div.paragraph > p, admonition tables,
    <div class="highlight" data-lang="yaml"><pre> with Pygments spans."""
    service = "circleci"

    def heading(self, level, text, hid):
        return f'<h{level} id="_{hid}"><a class="anchor" href="#_{hid}"></a>{self.inline(text)}</h{level}>'

    def block(self, b, hidden=False):
        if b.kind == "p":
            return f'<div class="paragraph">\n<p>{self.inline(b.text)}</p>\n</div>'
        return super().block(b, hidden)

    def toc_html(self, title="Contents"):
        t = super().toc_html(title)
        return t.replace('href="#', 'href="#_')

    def list(self, kind, items):
        cls = "ulist" if kind == "ul" else "olist arabic"
        lis = "\n".join(f"<li>\n<p>{self.inline(it)}</p>\n</li>" for it in items)
        return f'<div class="{cls}">\n<{kind}>\n{lis}\n</{kind}>\n</div>'

    def note(self, text):
        return ('<div class="admonitionblock note">\n<table>\n<tbody><tr>\n'
                '<td class="icon"><div class="title">Note</div></td>\n'
                f'<td class="content">\n<div class="paragraph">\n<p>{self.inline(text)}</p>\n</div>\n</td>\n'
                "</tr></tbody>\n</table>\n</div>")

    def table(self, rows, cls="tableblock frame-all grid-all stretch"):
        cell = 'class="tableblock halign-left valign-top"'
        head = "".join(f"<th {cell}>{self.inline(c)}</th>" for c in rows[0])
        body = "\n".join("<tr>" + "".join(f'<td {cell}><p class="tableblock">{self.inline(c)}</p></td>' for c in r)
                         + "</tr>" for r in rows[1:])
        return f'<table class="{cls}">\n<thead><tr>{head}</tr></thead>\n<tbody>\n{body}\n</tbody>\n</table>'

    def yaml(self, text, title):
        cap = f'<div class="title">{esc(title)}</div>\n' if title else ""
        return (f'<div class="listingblock">\n{cap}<div class="content">\n'
                f'<div class="highlight" data-lang="yaml"><pre>{highlight(text, PYGMENTS)}</pre></div>\n</div>\n</div>')

    def other_code(self, lang, text, title):
        return ('<div class="listingblock">\n<div class="content">\n'
                f'<div class="highlight" data-lang="{lang}"><pre>{esc(text)}</pre></div>\n</div>\n</div>')

    def js_slot(self, slot_id):
        return f'<div class="listingblock js-tab-panel" id="{slot_id}"></div>'

    def js_block(self, slot_id, markup):
        inner = markup.removeprefix('<div class="listingblock">\n').removesuffix("\n</div>")
        return super().js_block(slot_id, inner)

    def sections(self, blocks):
        """Asciidoctor wraps sections: sect1 > h2 + sectionbody; sect2 > h3; sect3 > h4."""
        out = ['<div id="preamble">\n<div class="sectionbody">']
        depth = 0  # number of open sectN
        for b in blocks:
            if b.kind == "heading" and b.level >= 2:
                lvl = b.level - 1
                while depth >= lvl:
                    out.append("</div>\n</div>" if depth == 1 else "</div>")
                    depth -= 1
                if depth == 0 and out[0].startswith('<div id="preamble">') and "preamble-closed" not in out:
                    out.append("</div>\n</div>")
                    out.append("preamble-closed")
                while depth < lvl - 1:  # skipped levels: open empty wrappers
                    depth += 1
                    out.append(f'<div class="sect{depth}">')
                depth += 1
                if lvl == 1:
                    out.append(f'<div class="sect1">\n{self.block(b)}\n<div class="sectionbody">')
                else:
                    out.append(f'<div class="sect{lvl}">\n{self.block(b)}')
            else:
                out.append(self.block(b))
        while depth > 0:
            out.append("</div>\n</div>" if depth == 1 else "</div>")
            depth -= 1
        if "preamble-closed" not in out:
            out.append("</div>\n</div>")
        return "\n".join(x for x in out if x != "preamble-closed")

    def page(self, title, blocks):
        h1, rest = blocks[0], blocks[1:]
        self.ids.add(slug(h1.text))
        body = self.sections(rest)
        legacy = self.href("/circleci/2.0/workflows.html")
        return (
            self.head(plain_text(title))
            + '<body class="site-circleci">\n<header class="header">\n' + self.service_nav("navbar") + "\n</header>\n"
            + '<div class="body">\n<aside class="sidebar nav-container">\n<nav class="nav-menu" aria-label="CircleCI">\n'
            + '<h3 class="title">CircleCI docs</h3>\n<ul class="nav-list">\n' + self.sidebar_links()
            + "\n</ul>\n</nav>\n</aside>\n"
            + '<main class="main-content">\n<div class="toolbar" role="navigation">\n'
            + f'<nav class="breadcrumbs" aria-label="Breadcrumbs"><ul><li><a href="{self.href("/circleci/index.html")}">CircleCI</a></li>'
            + f"<li>{esc(plain_text(title))}</li></ul></nav>\n"
            + '<div class="page-versions"><span>Cloud</span></div>\n</div>\n'
            + '<div class="content">\n<article class="doc">\n'
            + f'<h1 class="page">{self.inline(h1.text)}</h1>\n'
            + self.toc_html("Contents") + "\n"
            + body + "\n</article>\n</div>\n</main>\n</div>\n"
            + '<footer class="footer">\n<p>CircleCI documentation for the doc2ci test suite.</p>\n<ul>'
            + self.footer_links()
            + f'<li><a href="{legacy}">Legacy 2.0 docs: Workflows</a></li></ul>\n</footer>\n'
            + '<div id="cookie-consent" style="display:none">\n<p>Cookie settings</p>\n'
            + '<div class="highlight" data-lang="yaml"><pre>consent:\n  necessary: true\n  marketing: false</pre></div>\n</div>'
            + self.script_tags()
            + "\n</body>\n</html>\n"
        )


class GitLabRenderer(Renderer):
    """Hugo/Nanoc-like with Rouge: <div class="language-yaml highlighter-rouge"><div class="highlight">
    <pre class="highlight"><code>…spans…</code></pre></div></div>; history <details>, tier badges."""
    service = "gitlab-ci"

    def heading(self, level, text, hid):
        return (f'<h{level} id="{hid}">{self.inline(text)}'
                f'<a class="anchor" href="#{hid}" aria-label="Link to this section"></a></h{level}>')

    def note(self, text):
        return f'<div class="alert alert-info" role="note">\n<p>{self.inline(text)}</p>\n</div>'

    def rouge(self, lang, inner):
        return (f'<div class="language-{lang} highlighter-rouge"><div class="highlight">'
                f'<pre class="highlight"><code>{inner}</code></pre></div></div>')

    def yaml(self, text, title):
        cap = f'<div class="code-filename">{esc(title)}</div>\n' if title else ""
        return cap + self.rouge("yaml", highlight(text, ROUGE))

    def other_code(self, lang, text, title):
        return self.rouge(lang, esc(text))

    def js_slot(self, slot_id):
        return f'<div class="js-code-tab" id="{slot_id}"></div>'

    def page(self, title, blocks):
        h1, rest = blocks[0], blocks[1:]
        self.ids.add(slug(h1.text))
        body = self.render_blocks(rest)
        return (
            self.head(plain_text(title))
            + '<body class="site-gitlab">\n<header class="gl-header">\n' + self.service_nav("header-nav")
            + '\n<div class="search" role="search"><input type="search" aria-label="Search the docs" placeholder="Search"></div>\n</header>\n'
            + '<div class="gl-layout">\n<aside class="sidebar gl-sidebar">\n<nav aria-label="GitLab CI/CD">\n<ul>\n'
            + self.sidebar_links() + "\n</ul>\n</nav>\n</aside>\n"
            + '<main id="content-body" class="gl-main">\n<div class="docs-content">\n'
            + f'<nav class="breadcrumbs" aria-label="Breadcrumb"><ul><li><a href="{self.href("/gitlab-ci/index.html")}">CI/CD</a></li>'
            + f"<li>{esc(plain_text(title))}</li></ul></nav>\n"
            + f"<h1>{self.inline(h1.text)}</h1>\n"
            + '<div class="tier-badges"><span class="badge">Tier: Free, Premium, Ultimate</span>'
            + '<span class="badge">Offering: hosted, self-managed</span></div>\n'
            + self.toc_html("On this page") + "\n"
            + body + "\n</div>\n"
            + '<aside class="page-actions"><a href="https://www.example.com/edit">Edit this page</a></aside>\n'
            + "</main>\n</div>\n"
            + '<footer class="gl-footer">\n<p>GitLab CI/CD documentation for the doc2ci test suite.</p>\n<ul>'
            + self.footer_links() + "</ul>\n</footer>\n"
            + '<div class="cookie-banner" hidden>\n<p>This site uses cookies.</p>\n'
            + self.rouge("yaml", "tracking:\n  enabled: false") + "\n</div>"
            + self.script_tags()
            + "\n</body>\n</html>\n"
        )


class TravisRenderer(Renderer):
    """Older Jekyll-like: #main with div#content.content; <pre class="yaml"> on older pages and
    <figure class="code" data-lang="yaml"><figcaption>…</figcaption><pre><code> on newer ones. The hidden
    cookie banner sits inside the content root."""
    service = "travis-ci"

    @property
    def figures(self):
        return self.source in TRAVIS_FIGURE_PAGES

    def heading(self, level, text, hid):
        return f'<h{level} id="{hid}">{self.inline(text)}</h{level}>'

    def note(self, text):
        return f'<blockquote class="note">\n<p>{self.inline(text)}</p>\n</blockquote>'

    def yaml(self, text, title):
        if self.figures:
            return (f'<figure class="code" data-lang="yaml"><figcaption>{esc(title or ".travis.yml")}</figcaption>'
                    f"<pre><code>{esc(text)}</code></pre></figure>")
        return f'<pre class="yaml">{esc(text)}</pre>'

    def other_code(self, lang, text, title):
        if self.figures:
            return (f'<figure class="code" data-lang="{lang}"><figcaption>{lang}</figcaption>'
                    f"<pre><code>{esc(text)}</code></pre></figure>")
        return f'<pre class="{lang}">{esc(text)}</pre>'

    def js_slot(self, slot_id):
        return f'<div class="example-switcher" id="{slot_id}"></div>'

    def page(self, title, blocks):
        h1, rest = blocks[0], blocks[1:]
        self.ids.add(slug(h1.text))
        body = self.render_blocks(rest)
        return (
            self.head(plain_text(title))
            + '<body class="site-travis">\n<div id="navigation">\n' + self.service_nav("topbar") + "\n</div>\n"
            + '<div id="main">\n<aside class="sidebar" id="sidebar">\n<h2>Travis CI docs</h2>\n<ul>\n'
            + self.sidebar_links() + "\n</ul>\n</aside>\n"
            + '<div id="content" class="content">\n'
            + '<div class="cookie-banner" hidden>\n<p>We use cookies. By continuing you accept them, for example:</p>\n'
            + '<pre class="yaml">cookies: accepted</pre>\n</div>\n'
            + f"<h1>{self.inline(h1.text)}</h1>\n"
            + self.toc_html("Contents") + "\n"
            + body + "\n</div>\n</div>\n"
            + '<footer id="footer">\n<p>Travis CI documentation for the doc2ci test suite.</p>\n<ul>'
            + self.footer_links() + "</ul>\n</footer>"
            + self.script_tags()
            + "\n</body>\n</html>\n"
        )


RENDERERS = {"github-actions": GitHubRenderer, "circleci": CircleRenderer, "gitlab-ci": GitLabRenderer,
             "travis-ci": TravisRenderer}

# --------------------------------------------------------------------------------------------------------
# Build-time checks of intent
# --------------------------------------------------------------------------------------------------------

BUILD_ERRORS: list[str] = []


def check_yaml_intent(b: Block, where: str):
    kind = yaml_kind(b.text)
    want = "error" if "broken" in b.flags else "scalar" if "scalar" in b.flags else "collection"
    if kind != want:
        BUILD_ERRORS.append(f"{where}: YAML block starting {b.text.splitlines()[0]!r} is {kind}, marked {want}")


# --------------------------------------------------------------------------------------------------------
# Root index, traps, private page, robots.txt
# --------------------------------------------------------------------------------------------------------


def simple_page(title: str, body: str, depth: int, head_extra: str = "", charset: str = "utf-8") -> str:
    up = "../" * depth
    return (
        "<!DOCTYPE html>\n"
        f'<html lang="en">\n<head>\n<meta charset="{charset}">\n{head_extra}'
        '<meta name="viewport" content="width=device-width, initial-scale=1">\n'
        f"<title>{esc(title)}</title>\n"
        '<link rel="icon" href="data:,">\n'
        f'<link rel="stylesheet" href="{up}style.css">\n'
        "</head>\n"
        f'<body class="site-plain">\n<header class="site-header"><nav class="topnav" aria-label="Main">'
        f'<a class="brand" href="{up}index.html">CI Docs</a></nav></header>\n'
        f'<main id="main-content">\n<article class="markdown-body">\n{body}\n</article>\n</main>\n'
        '<footer class="site-footer"><p>doc2ci crawler test pages.</p></footer>\n'
        "</body>\n</html>\n"
    )


def yaml_pre(text: str) -> str:
    assert yaml_kind(text) == "collection", text
    return f'<pre><code class="language-yaml">{esc(text)}</code></pre>'


def root_index() -> str:
    cards = "\n".join(
        f'<li><a href="{s}/index.html">{esc(c["display"])}</a>: '
        f'{len([p for p in c["pages"] if not p[0].startswith("drafts/")])} pages</li>'
        for s, c in SERVICES.items()
    )
    body = (
        "<h1>CI documentation</h1>\n"
        "<p>A small documentation site written for doc2ci: four CI services, each with the markup its real "
        "documentation uses, so that the crawler's site profiles can be tested end to end without a network.</p>\n"
        f'<ul class="service-list">\n{cards}\n</ul>\n'
        '<p>Pages that exercise the crawler\'s safety rules are collected under '
        '<a href="traps/index.html">crawler traps</a>.</p>'
    )
    return simple_page("CI documentation", body, 0)


def traps() -> dict[str, bytes]:
    pages: dict[str, bytes] = {}

    def put(path, title, body, head_extra="", scripts=""):
        depth = path.count("/")
        pages[path] = simple_page(title, body + scripts, depth, head_extra).encode("utf-8")

    put("traps/index.html", "Crawler traps", (
        "<h1>Crawler traps</h1>\n"
        "<p>Each page below tests one safety rule of the crawler. TRAPS.md next to this site says what a correct "
        "crawler does with each.</p>\n<ul>\n"
        '<li><a href="loop-a.html">A link loop with changing query strings</a></li>\n'
        '<li><a href="offsite.html">Links that leave the site</a></li>\n'
        '<li><a href="redirect-1.html">A chain of meta refresh redirects</a></li>\n'
        '<li><a href="refresh-loop-a.html">A meta refresh loop</a></li>\n'
        '<li><a href="latin1.html">A page in ISO-8859-1</a></li>\n'
        '<li><a href="../private/internal.html">A page disallowed by robots.txt</a></li>\n'
        "</ul>\n"
        "<p>The pages below are not files of this site: the test server provides them (see TRAPS.md), and a "
        "plain static server answers 404 for them.</p>\n<ul>\n"
        '<li><a href="http-redirect-1.html">A chain of HTTP redirects</a></li>\n'
        '<li><a href="huge.html">A 10 MB page</a></li>\n'
        '<li><a href="never-loads.html">A page that never finishes loading</a></li>\n'
        '<li><a href="missing.html">A page that does not exist</a></li>\n'
        "</ul>\n"
        "<h2>Trap index</h2>\n<p>This index page itself has one example.</p>\n"
        + yaml_pre("traps:\n  index: true")
    ))

    loop_js = (
        "\n<script>\n(function () {\n"
        '  "use strict";\n'
        '  var m = /[?&]page=(\\d+)/.exec(window.location.search);\n'
        "  var n = m ? parseInt(m[1], 10) : 0;\n"
        '  var next = document.getElementById("next-page");\n'
        '  if (next) { next.href = next.getAttribute("data-target") + "?page=" + (n + 1); }\n'
        "})();\n</script>"
    )
    for me, other, static_n in (("a", "b", 1), ("b", "a", 2)):
        put(f"traps/loop-{me}.html", f"Loop page {me.upper()}", (
            f"<h1>Loop page {me.upper()}</h1>\n"
            f"<p>Page {me.upper()} links to page {other.upper()}, which links back. In a browser a script "
            "raises the page number in the link on every visit, so the query string never repeats.</p>\n"
            f'<p><a id="next-page" data-target="loop-{other}.html" href="loop-{other}.html?page={static_n}">'
            "Next page</a></p>\n"
            + yaml_pre(f"loop:\n  page: {me}")
        ), scripts=loop_js)

    put("traps/offsite.html", "Leaving the site", (
        "<h1>Leaving the site</h1>\n"
        "<p>None of these links may be followed by a crawl limited to this site's allowed prefixes.</p>\n<ul>\n"
        '<li><a href="https://off-site.example.com/docs/start.html">An absolute link to another host</a></li>\n'
        '<li><a href="//off-site.example.com/protocol-relative.html">A protocol-relative link</a></li>\n'
        '<li><a href="http://off-site.example.com:8080/other-port.html">Another host and port</a></li>\n'
        '<li><a href="ftp://files.example.com/pub/readme.txt">Another scheme</a></li>\n'
        '<li><a href="mailto:docs@example.com">A mail address</a></li>\n'
        '<li><a href="javascript:void(0)">A script URL</a></li>\n'
        '<li><a href="../github-actions/index.html">The same host, outside the traps prefix</a></li>\n'
        "</ul>\n"
        "<h2>Off-site example</h2>\n<p>The page itself is on the site, so its example counts.</p>\n"
        + yaml_pre("offsite:\n  followed: false")
    ))

    chain = ["redirect-1.html", "redirect-2.html", "redirect-3.html", "redirect-final.html"]
    for i, name in enumerate(chain[:-1]):
        nxt = chain[i + 1]
        put(f"traps/{name}", f"Redirect {i + 1}", (
            f"<h1>Redirect {i + 1}</h1>\n"
            f'<p>This page refreshes at once to <a href="{nxt}">the next page of the chain</a>.</p>'
        ), head_extra=f'<meta http-equiv="refresh" content="0; url={nxt}">\n')
    put("traps/redirect-final.html", "End of the redirect chain", (
        "<h1>End of the redirect chain</h1>\n<p>Three refreshes lead here.</p>\n"
        + yaml_pre("redirect:\n  hops: 3")
    ))
    for me, other in (("a", "b"), ("b", "a")):
        put(f"traps/refresh-loop-{me}.html", f"Refresh loop {me.upper()}", (
            f"<h1>Refresh loop {me.upper()}</h1>\n"
            f'<p>After one second this page refreshes to <a href="refresh-loop-{other}.html">the other page of '
            "the loop</a>, forever.</p>"
        ), head_extra=f'<meta http-equiv="refresh" content="1; url=refresh-loop-{other}.html">\n')

    # a page in ISO-8859-1 (the only non-UTF-8 file of the site, on purpose)
    latin = simple_page("Déploiement continu", (
        "<h1>Déploiement continu</h1>\n"
        "<p>Cette page est encodée en ISO-8859-1 ; son en-tête le déclare. Un robot qui la lit comme de "
        "l'UTF-8 abîme les accents.</p>\n"
        + yaml_pre("name: Déploiement\non: push\njobs:\n  déployer:\n    runs-on: ubuntu-latest\n"
                   "    steps:\n      - run: echo \"Étape terminée\"")
    ), 1, charset="iso-8859-1")
    pages["traps/latin1.html"] = latin.replace('<html lang="en">', '<html lang="fr">').encode("iso-8859-1")

    pages["private/internal.html"] = simple_page("Internal notes", (
        "<h1>Internal notes</h1>\n<p>robots.txt disallows this folder: a polite crawler never fetches this "
        "page, so the example below must never become a pair.</p>\n"
        + yaml_pre("private:\n  must_not_be_crawled: true")
    ), 1).encode("utf-8")
    return pages


ROBOTS = """# Crawler rules for the bundled doc2ci documentation site.
User-agent: *
Disallow: /private/
Disallow: /github-actions/drafts/
"""

# --------------------------------------------------------------------------------------------------------


def render_service_page(service: str, source: str, out_path: str) -> str:
    meta, blocks = parse_md((PAGES / service / f"{source}.md").read_text(encoding="utf-8"))
    assert blocks and blocks[0].kind == "heading" and blocks[0].level == 1, f"{service}/{source}: no h1 first"
    r = RENDERERS[service](out_path, source)
    return r.page(meta.get("title", plain_text(blocks[0].text)), blocks)


def build() -> list[str]:
    written: list[str] = []

    def write(rel: str, data):
        p = SITE / rel
        p.parent.mkdir(parents=True, exist_ok=True)
        if isinstance(data, str):
            data = data.encode("utf-8")
        p.write_bytes(data)
        written.append(rel)

    for service, cfg in SERVICES.items():
        for source, _ in cfg["pages"]:
            out = f"{service}/{source}.html"
            write(out, render_service_page(service, source, out))
        for copy, source in cfg["copies"].items():
            out = f"{service}/{copy}.html"
            write(out, render_service_page(service, source, out))
    write("index.html", root_index())
    for rel, data in traps().items():
        write(rel, data)
    write("robots.txt", ROBOTS)
    return written


if __name__ == "__main__":
    files = build()
    if BUILD_ERRORS:
        print("\n".join(BUILD_ERRORS), file=sys.stderr)
        sys.exit(1)
    print(f"wrote {len(files)} files")
