#!/usr/bin/env python3
"""Check the bundled documentation site and compute its golden pairs.

    python3 -m peers.docsite            # all checks; fails if golden-pairs.json / golden-notes.md are stale
    python3 -m peers.docsite --write    # regenerate golden-pairs.json and golden-notes.md
    python3 -m peers.docsite --yaml     # only: does every YAML block on every page load as intended

Needs Python 3.11+ and ruamel.yaml (pip install ruamel.yaml); html5lib is used when present for a strict
HTML5 parse of every page. Nothing else: the HTML tree, the CSS selector subset and the crawl are built here.

What it checks:
- every page is well-formed (every element closed in order; strict HTML5 parse when html5lib is present),
  UTF-8 except the one deliberate ISO-8859-1 trap page, with no external resource and no host outside
  example.com in any URL, text or YAML value of the site;
- every local link resolves to a file of the site;
- a reference crawl of each site profile of PROFILES.md (start URLs, allowed prefixes, query strings
  dropped, robots.txt obeyed) followed by the extraction rule of issue 4 gives exactly golden-pairs.json,
  for the `http` backend (static HTML) and the `webdriver` backend (the page's inline scripts applied).

The extraction rule implemented here (the reference for the Rust extractor's golden test):
remove hidden elements ([hidden], style display:none) and the profile's removal selectors; take the
profile's content root; walk it in document order keeping a stack of open headings (a heading closes the
open headings of the same or deeper level); each p, li, dt and dd (or the profile's prose_blocks) is a prose
block that belongs to the innermost open heading, with its own text only: its text nodes and those of its
inline descendants (inline code and link text are kept), with runs of whitespace collapsed to one space,
trimmed; nested prose blocks, code blocks, pre, lists, tables, headings and removed elements are not part of
it (nested blocks are blocks of their own), so a step's YAML never lands in its own description; a node matching a YAML block selector is a YAML block: its title is the open
headings' texts joined with " - ", its description the prose blocks of the open headings seen so far in
document order, each text once, joined by one space, "." if there is none; it becomes a pair when its text
content loads as a YAML mapping or sequence. Nodes matching a code block selector that contain no YAML block
are skipped and counted.
"""
from __future__ import annotations

import argparse
import copy
import json
import re
import sys
import tomllib
from collections import OrderedDict
from html.parser import HTMLParser
from pathlib import Path
from urllib.parse import urldefrag, urljoin, urlsplit

SITE = Path(__file__).resolve().parent.parent / "docsite"
BASE = "http://docs.test"  # stand-in origin for the reference crawl
# Linked from traps/index.html but not files of the site: the crawler tests' server provides them (TRAPS.md).
SERVER_PROVIDED = {"/traps/http-redirect-1.html", "/traps/huge.html", "/traps/never-loads.html",
                   "/traps/missing.html"}

# --------------------------------------------------------------------------------------------------------
# YAML (YAML 1.2, ruamel.yaml safe loader; unknown local tags such as GitLab's !reference are accepted)
# --------------------------------------------------------------------------------------------------------

_yaml = None


def _loader():
    global _yaml
    if _yaml is None:
        from ruamel.yaml import YAML
        from ruamel.yaml.constructor import SafeConstructor
        from ruamel.yaml.nodes import MappingNode, SequenceNode

        class TolerantConstructor(SafeConstructor):
            pass

        def unknown_tag(constructor, suffix, node):
            if isinstance(node, MappingNode):
                return constructor.construct_mapping(node, deep=True)
            if isinstance(node, SequenceNode):
                return constructor.construct_sequence(node, deep=True)
            return constructor.construct_scalar(node)

        TolerantConstructor.add_multi_constructor("!", unknown_tag)
        y = YAML(typ="safe", pure=True)
        y.Constructor = TolerantConstructor
        _yaml = y
    return _yaml


def yaml_load(text: str):
    return _loader().load(text)


def yaml_kind(text: str) -> str:
    """'collection' (mapping or sequence: becomes a pair), 'scalar' (skipped) or 'error' (skipped)."""
    try:
        data = yaml_load(text)
    except Exception:  # noqa: BLE001 - any load failure means "does not parse"
        return "error"
    return "collection" if isinstance(data, (dict, list)) else "scalar"


def yaml_error(text: str) -> str:
    try:
        yaml_load(text)
    except Exception as e:  # noqa: BLE001
        first = str(e).strip().splitlines()
        return first[0] if first else type(e).__name__
    return ""


# --------------------------------------------------------------------------------------------------------
# A strict little DOM
# --------------------------------------------------------------------------------------------------------

VOID = {"area", "base", "br", "col", "embed", "hr", "img", "input", "link", "meta", "source", "track", "wbr"}


class Node:
    __slots__ = ("tag", "attrs", "children", "parent")

    def __init__(self, tag, attrs=None, parent=None):
        self.tag = tag
        self.attrs = dict(attrs or {})
        self.children: list = []
        self.parent = parent

    def classes(self):
        return self.attrs.get("class", "").split()

    def iter(self):
        yield self
        for c in self.children:
            if isinstance(c, Node):
                yield from c.iter()

    def text(self) -> str:
        out = []
        for c in self.children:
            out.append(c if isinstance(c, str) else c.text())
        return "".join(out)

    def ancestors(self):
        p = self.parent
        while p is not None:
            yield p
            p = p.parent


class TreeBuilder(HTMLParser):
    def __init__(self, where):
        super().__init__(convert_charrefs=True)
        self.where = where
        self.root = Node("#document")
        self.stack = [self.root]
        self.errors: list[str] = []

    def handle_starttag(self, tag, attrs):
        node = Node(tag, [(k, v if v is not None else "") for k, v in attrs], self.stack[-1])
        self.stack[-1].children.append(node)
        if tag not in VOID:
            self.stack.append(node)

    def handle_startendtag(self, tag, attrs):
        self.handle_starttag(tag, attrs)
        if tag not in VOID:
            self.stack.pop()

    def handle_endtag(self, tag):
        if tag in VOID:
            return
        if self.stack[-1].tag != tag:
            self.errors.append(f"{self.where}:{self.getpos()[0]}: </{tag}> closes <{self.stack[-1].tag}>")
            for i in range(len(self.stack) - 1, 0, -1):
                if self.stack[i].tag == tag:
                    del self.stack[i:]
                    break
            return
        self.stack.pop()

    def handle_data(self, data):
        self.stack[-1].children.append(data)


def parse_html(text: str, where: str = "") -> tuple[Node, list[str]]:
    tb = TreeBuilder(where)
    tb.feed(text)
    tb.close()
    if len(tb.stack) > 1:
        tb.errors.append(f"{where}: unclosed {[n.tag for n in tb.stack[1:]]}")
    return tb.root, tb.errors


def parse_html5(text: str) -> Node:
    """The same page through html5lib's HTML5 tree construction (the browser's algorithm)."""
    import html5lib  # type: ignore

    et = html5lib.parse(text, treebuilder="etree", namespaceHTMLElements=False)

    def conv(el, parent):
        node = Node(el.tag, el.attrib, parent)
        if el.text:
            node.children.append(el.text)
        for child in el:
            if isinstance(child.tag, str):
                node.children.append(conv(child, node))
            if child.tail:
                node.children.append(child.tail)
        return node

    root = Node("#document")
    root.children.append(conv(et, root))
    return root


def decode_page(raw: bytes) -> tuple[str, str]:
    m = re.search(rb'<meta charset="([^"]+)"', raw[:1024])
    charset = m.group(1).decode("ascii").lower() if m else "utf-8"
    return raw.decode(charset), charset


# --------------------------------------------------------------------------------------------------------
# CSS selector subset: tag, #id, .class, [attr], [attr=v], [attr*=v], [attr^=v], descendant and child
# combinators, comma-separated groups.
# --------------------------------------------------------------------------------------------------------

COMPOUND = re.compile(
    r"""(?P<tag>[a-zA-Z][a-zA-Z0-9-]*|\*)?(?P<rest>(?:\#[\w-]+|\.[\w-]+|\[[^\]]+\])*)""")
PART = re.compile(r"""\#([\w-]+)|\.([\w-]+)|\[\s*([\w-]+)\s*(?:([*^$]?=)\s*(?:"([^"]*)"|'([^']*)'|([^\]\s]+)))?\s*\]""")


def _parse_compound(s: str):
    m = COMPOUND.fullmatch(s)
    if not m or not s:
        raise ValueError(f"unsupported selector part {s!r}")
    tag = m.group("tag")
    conds = []
    for pm in PART.finditer(m.group("rest")):
        if pm.group(1):
            conds.append(("id", pm.group(1)))
        elif pm.group(2):
            conds.append(("class", pm.group(2)))
        else:
            val = next((v for v in pm.group(5, 6, 7) if v is not None), None)
            conds.append(("attr", pm.group(3), pm.group(4), val))
    return (None if tag in (None, "*") else tag.lower(), conds)


def parse_selector(sel: str):
    """Selector groups; each group is a list of (combinator, compound), combinator ' ' or '>'."""
    groups = []
    for group in sel.split(","):
        chain, buf, depth, pending = [], "", 0, None
        for ch in group.strip():
            if ch == "[":
                depth += 1
            elif ch == "]":
                depth -= 1
            if depth == 0 and ch in " >":
                if buf:
                    chain.append((pending or " ", _parse_compound(buf)))
                    buf, pending = "", None
                if ch == ">":
                    pending = ">"
                continue
            buf += ch
        if buf:
            chain.append((pending or " ", _parse_compound(buf)))
        if not chain:
            raise ValueError(f"empty selector in {sel!r}")
        groups.append(chain)
    return groups


def _match_compound(node: Node, comp) -> bool:
    tag, conds = comp
    if tag and node.tag != tag:
        return False
    for c in conds:
        if c[0] == "id":
            if node.attrs.get("id") != c[1]:
                return False
        elif c[0] == "class":
            if c[1] not in node.classes():
                return False
        else:
            _, name, op, val = c
            if name not in node.attrs:
                return False
            have = node.attrs[name]
            if op == "=" and have != val:
                return False
            if op == "*=" and val not in have:
                return False
            if op == "^=" and not have.startswith(val):
                return False
            if op == "$=" and not have.endswith(val):
                return False
    return True


def _match_chain(node: Node, chain, i: int) -> bool:
    comb, comp = chain[i]
    if not _match_compound(node, comp):
        return False
    if i == 0:
        return True
    if comb == ">":
        return node.parent is not None and node.parent.tag != "#document" and _match_chain(node.parent, chain, i - 1)
    for anc in node.ancestors():
        if anc.tag == "#document":
            break
        if _match_chain(anc, chain, i - 1):
            return True
    return False


def matches(node: Node, groups) -> bool:
    return any(_match_chain(node, chain, len(chain) - 1) for chain in groups)


def select(root: Node, sel: str) -> list[Node]:
    groups = parse_selector(sel)
    return [n for n in root.iter() if n.tag != "#document" and matches(n, groups)]


# --------------------------------------------------------------------------------------------------------
# Profiles (the ```toml blocks of PROFILES.md)
# --------------------------------------------------------------------------------------------------------


def load_profiles() -> dict:
    md = (SITE / "PROFILES.md").read_text(encoding="utf-8")
    profiles: dict = {}
    for block in re.findall(r"```toml\n(.*?)```", md, re.S):
        data = tomllib.loads(block)
        for name, p in data.get("profiles", {}).items():
            profiles[name] = p
    return profiles


# --------------------------------------------------------------------------------------------------------
# Extraction
# --------------------------------------------------------------------------------------------------------

HEADINGS = {"h1": 1, "h2": 2, "h3": 3, "h4": 4, "h5": 5, "h6": 6}
# Never part of an enclosing prose block's own text (the Rust extractor's `block_level`).
BLOCK_LEVEL = {"pre", "ul", "ol", "dl", "table", "script", "style", "template", *HEADINGS}


def collapse(s: str) -> str:
    return " ".join(s.split())


def normalize_reference(s: str) -> str:
    lines = [ln.rstrip() for ln in s.split("\n")]
    while lines and not lines[0]:
        lines.pop(0)
    while lines and not lines[-1]:
        lines.pop()
    return "\n".join(lines)


def is_hidden(node: Node) -> bool:
    if "hidden" in node.attrs:
        return True
    style = node.attrs.get("style", "").replace(" ", "").lower()
    return "display:none" in style


def apply_scripts(doc: Node) -> int:
    """What a browser does to these pages at load time: the inline example scripts fill their slots.
    Only the site's own script shape is understood: var html = "<json string>"; getElementById("id")."""
    n = 0
    for script in [x for x in doc.iter() if x.tag == "script"]:
        src = script.text()
        m_html = re.search(r'var html = ("(?:[^"\\]|\\.)*");', src)
        m_id = re.search(r'getElementById\("([^"]+)"\)', src)
        if not (m_html and m_id):
            continue
        markup = json.loads(m_html.group(1))
        slot = next((x for x in doc.iter() if x.attrs.get("id") == m_id.group(1)), None)
        if slot is None:
            continue
        frag, errs = parse_html(markup, "script")
        assert not errs, errs
        slot.children = []
        for c in frag.children:
            if isinstance(c, Node):
                c.parent = slot
            slot.children.append(c)
        n += 1
    return n


def first_line(s: str) -> str:
    for ln in s.split("\n"):
        if ln.strip():
            return ln.rstrip()
    return ""


def block_lang(node: Node) -> str:
    for n in [node, *node.iter()]:
        for c in n.classes():
            if c.startswith("language-"):
                return c[len("language-"):]
        if "data-lang" in n.attrs:
            return n.attrs["data-lang"]
    for anc in node.ancestors():
        if "data-lang" in anc.attrs:
            return anc.attrs["data-lang"]
        for c in anc.classes():
            if c.startswith("language-"):
                return c[len("language-"):]
    cls = node.classes()
    return cls[0] if cls else "?"


def extract(doc: Node, profile: dict) -> dict:
    """Pairs and skipped blocks of one page, following the rule in the module docstring."""
    roots = select(doc, profile["content_root"])
    result = {"pairs": [], "skipped": [], "removed": [], "error": None}
    yaml_groups = parse_selector(", ".join(profile["yaml_blocks"]))
    code_groups = parse_selector(", ".join(profile["code_blocks"]))
    remove_groups = parse_selector(", ".join(profile["remove"]))
    prose_groups = parse_selector(", ".join(profile.get("prose_blocks", ["p", "li", "dt", "dd"])))
    keep_groups = parse_selector(", ".join(profile.get("keep_hidden", []))) if profile.get("keep_hidden") else []
    root = roots[0] if roots else None
    if root is None:
        result["error"] = f"content root {profile['content_root']!r} not found"

    def removed(node: Node) -> str | None:
        if matches(node, remove_groups):
            return "removal selector"
        if is_hidden(node) and not (keep_groups and matches(node, keep_groups)):
            return "hidden element"
        return None

    # YAML blocks that exist in the page but never reach extraction, each with why: outside the
    # content root, or the outermost removed element around it (removing it drops all it holds).
    # A block inside another block is part of that one.
    for n in doc.iter():
        if n.tag == "#document" or not matches(n, yaml_groups):
            continue
        if any(matches(a, yaml_groups) for a in n.ancestors() if a.tag != "#document"):
            continue
        inside = root is not None and (n is root or any(a is root for a in n.ancestors()))
        why = None
        if not inside:
            why = "outside the content root"
        else:
            chain = []
            for a in [n, *n.ancestors()]:
                if a is root:
                    break
                chain.append(a)
            for a in reversed(chain):
                r = removed(a)
                if r:
                    why = f"{r} ({describe(a)})"
                    break
        if why:
            result["removed"].append({"why": why, "first_line": first_line(n.text())})
    if root is None:
        return result

    def is_code(node: Node) -> bool:
        return matches(node, yaml_groups) or matches(node, code_groups)

    def text_of(node: Node, stand_in) -> str:
        """The text under `node`; `stand_in(child)` is what an element stands for instead of its
        text (None: its text)."""
        out: list[str] = []

        def push(n: Node):
            for c in n.children:
                if isinstance(c, str):
                    out.append(c)
                    continue
                instead = stand_in(c)
                if instead is None:
                    push(c)
                else:
                    out.append(instead)

        push(node)
        return "".join(out)

    def own_text(node: Node) -> str:
        """A prose element's own words: a line break, and a nested block, code or prose element,
        stand for a space."""
        boundary = lambda c: (c.tag == "br" or removed(c) or c.tag in BLOCK_LEVEL or is_code(c)
                              or matches(c, prose_groups))
        return collapse(text_of(node, lambda c: " " if boundary(c) else None))

    def block_text(node: Node) -> str:
        """Everything a block says, but removed elements and scripts, styles and templates."""
        return text_of(node, lambda c: "" if removed(c) or c.tag in ("script", "style", "template") else None)

    stack: list[dict] = []  # {"level", "text", "prose": [..]}
    position = 0

    def description() -> str:
        seen, parts = set(), []
        for h in stack:
            for p in h["prose"]:
                if p not in seen:
                    seen.add(p)
                    parts.append(p)
        return " ".join(parts) if parts else "."

    def walk(node: Node):
        nonlocal position
        for child in node.children:
            if not isinstance(child, Node):
                continue
            if removed(child):
                continue
            if child.tag in ("script", "style", "template"):
                continue
            if child.tag in HEADINGS:
                level = HEADINGS[child.tag]
                while stack and stack[-1]["level"] >= level:
                    stack.pop()
                stack.append({"level": level, "text": collapse(block_text(child)), "prose": []})
                continue
            if matches(child, yaml_groups):
                text = block_text(child)
                title = " - ".join(h["text"] for h in stack)
                kind = yaml_kind(text)
                if kind == "collection":
                    result["pairs"].append({
                        "title": title,
                        "description": description(),
                        "reference": normalize_reference(text),
                        "position": position,
                    })
                    position += 1
                else:
                    result["skipped"].append({
                        "title": title, "reason": "yaml parse error" if kind == "error" else "yaml scalar",
                        "detail": yaml_error(text) if kind == "error" else repr(yaml_load(text)),
                        "first_line": first_line(text),
                    })
                continue
            if matches(child, code_groups):
                has_yaml = any(matches(d, yaml_groups) for d in child.iter() if d is not child)
                if not has_yaml:
                    result["skipped"].append({
                        "title": " - ".join(h["text"] for h in stack), "reason": "not yaml",
                        "detail": block_lang(child), "first_line": first_line(block_text(child)),
                    })
                    continue
            if matches(child, prose_groups):
                prose = own_text(child)
                if prose and stack:
                    stack[-1]["prose"].append(prose)
            walk(child)

    walk(root)
    return result


def describe(node: Node) -> str:
    s = node.tag
    if "id" in node.attrs:
        s += "#" + node.attrs["id"]
    for c in node.classes():
        s += "." + c
    if "hidden" in node.attrs:
        s += "[hidden]"
    if "style" in node.attrs:
        s += f'[style="{node.attrs["style"]}"]'
    return s


# --------------------------------------------------------------------------------------------------------
# Reference crawl
# --------------------------------------------------------------------------------------------------------


def robots_disallow() -> list[str]:
    rules, applies = [], False
    for line in (SITE / "robots.txt").read_text().splitlines():
        line = line.split("#", 1)[0].strip()
        if not line:
            continue
        k, _, v = line.partition(":")
        k, v = k.strip().lower(), v.strip()
        if k == "user-agent":
            applies = v == "*"
        elif k == "disallow" and applies and v:
            rules.append(v)
    return rules


def url_to_file(path: str) -> Path:
    p = path.lstrip("/")
    if not p or p.endswith("/"):
        p += "index.html"
    return SITE / p


def page_links(doc: Node, url: str) -> list[str]:
    out = []
    for n in doc.iter():
        if n.tag == "a" and "href" in n.attrs:
            out.append(urljoin(url, n.attrs["href"]))
        if n.tag == "meta" and n.attrs.get("http-equiv", "").lower() == "refresh":
            m = re.search(r"url=(.+)$", n.attrs.get("content", ""), re.I)
            if m:
                out.append(urljoin(url, m.group(1).strip()))
    return out


def normalize_url(url: str, keep_query: bool) -> str:
    url, _ = urldefrag(url)
    if not keep_query:
        url = url.split("?", 1)[0]
    return url


def crawl(profile: dict) -> tuple[list[tuple[str, Node]], list[str]]:
    disallow = robots_disallow()
    allowed = profile["allowed_prefixes"]
    keep_query = profile.get("keep_query", False)
    queue = [normalize_url(BASE + u, keep_query) for u in profile["start_urls"]]
    seen = set(queue)
    pages = []
    server_only: list[str] = []
    while queue:
        url = queue.pop(0)
        path = urlsplit(url).path
        if path in SERVER_PROVIDED:
            server_only.append(url[len(BASE):])
            continue
        raw = url_to_file(path).read_bytes()
        text, _ = decode_page(raw)
        doc, errs = parse_html(text, path)
        assert not errs, errs
        pages.append((url[len(BASE):], doc))
        for link in page_links(doc, url):
            parts = urlsplit(link)
            if parts.scheme not in ("http", "https") or f"{parts.scheme}://{parts.netloc}" != BASE:
                continue
            if not any(parts.path.startswith(p) for p in allowed):
                continue
            if any(parts.path.startswith(d) for d in disallow):
                continue
            link = normalize_url(link, keep_query)
            if link not in seen:
                seen.add(link)
                queue.append(link)
    return pages, server_only


REMOVED_REASONS = {"outside the content root": "outside the content root", "hidden element": "hidden",
                   "removal selector": "removed by profile rule"}


def golden() -> dict:
    profiles = load_profiles()
    out_pairs, pages_out, summary = [], [], OrderedDict()
    for name, profile in profiles.items():
        pages, server_only = crawl(profile)
        s = {"pages": [], "pairs_http": 0, "pairs_webdriver": 0, "skipped": {}, "removed_http": {},
             "distinct_pairs": 0}
        if server_only:
            s["server_provided"] = server_only
        distinct = set()
        for url, doc in pages:
            static = extract(doc, profile)
            live_doc = copy.deepcopy(doc)
            n_scripts = apply_scripts(live_doc)
            live = extract(live_doc, profile)
            static_keys = [(p["title"], p["description"], p["reference"], p["position"]) for p in static["pairs"]]
            for p in live["pairs"]:
                key = (p["title"], p["description"], p["reference"], p["position"])
                backends = ["http", "webdriver"] if key in static_keys else ["webdriver"]
                out_pairs.append({"profile": name, "service": profile["service"], "url": url, **p,
                                  "backends": backends})
                distinct.add((collapse(p["title"]), collapse(p["description"]), p["reference"]))
            assert all(k in [(p["title"], p["description"], p["reference"], p["position"]) for p in live["pairs"]]
                       for k in static_keys), f"{url}: a static pair disappears in the browser"
            for sk in live["skipped"]:
                s["skipped"][sk["reason"]] = s["skipped"].get(sk["reason"], 0) + 1
            # What the http backend's extraction reports for YAML blocks it never reaches, by reason
            # (the Rust extractor's `code_blocks` words).
            for r in static["removed"]:
                reason = next(v for k, v in REMOVED_REASONS.items() if r["why"].startswith(k))
                s["removed_http"][reason] = s["removed_http"].get(reason, 0) + 1
            s["pages"].append(url)
            s["pairs_http"] += len(static["pairs"])
            s["pairs_webdriver"] += len(live["pairs"])
            pages_out.append({"profile": name, "url": url, "error": live["error"], "scripts": n_scripts,
                              "pairs": live["pairs"], "static_pairs": len(static["pairs"]),
                              "skipped": live["skipped"], "removed": live["removed"]})
        s["distinct_pairs"] = len(distinct)
        summary[name] = s
    return {"summary": summary, "pairs": out_pairs, "pages": pages_out}


# --------------------------------------------------------------------------------------------------------
# Site checks
# --------------------------------------------------------------------------------------------------------

HOST_RE = re.compile(r"(?:https?|ftp)://([^/\s\"'<>:\\]+)|(?<![\w/])//([a-z0-9.-]+\.[a-z]{2,})/", re.I)
BARE_DOMAIN_RE = re.compile(r"\b((?:[a-z0-9-]+\.)+(?:com|org|net|io|dev|cloud|app))\b", re.I)


def host_ok(host: str) -> bool:
    host = host.lower()
    return host in ("example.com", "docs.test") or host.endswith(".example.com")


def site_files() -> list[Path]:
    return sorted(p for p in SITE.rglob("*") if p.is_file() and "__pycache__" not in p.parts)


def check_site() -> list[str]:
    errors: list[str] = []
    try:
        import html5lib  # type: ignore
    except ImportError:
        html5lib = None
        print("note: html5lib not installed, strict HTML5 parse skipped", file=sys.stderr)
    for f in site_files():
        rel = f.relative_to(SITE).as_posix()
        raw = f.read_bytes()
        if f.suffix in (".html", ".md", ".css", ".txt", ".py", ".json") and rel != "check.py":
            try:
                text = raw.decode("utf-8")
            except UnicodeDecodeError:
                if rel != "traps/latin1.html":
                    errors.append(f"{rel}: not UTF-8")
                text = raw.decode("iso-8859-1")
            for m in HOST_RE.finditer(text):
                host = m.group(1) or m.group(2)
                if not host_ok(host):
                    errors.append(f"{rel}: URL host {host!r} is not an example.com host")
            for m in BARE_DOMAIN_RE.finditer(text):
                if not host_ok(m.group(1)):
                    errors.append(f"{rel}: names the domain {m.group(1)!r}")
        if f.suffix != ".html":
            continue
        text, charset = decode_page(raw)
        doc, errs = parse_html(text, rel)
        errors += errs
        if html5lib is not None:
            p = html5lib.HTMLParser(strict=False, namespaceHTMLElements=False)
            p.parse(text)
            for pos, code, data in p.errors:
                errors.append(f"{rel}:{pos[0]}: HTML5 parse error {code} {data}")
        if not text.startswith("<!DOCTYPE html>"):
            errors.append(f"{rel}: no <!DOCTYPE html>")
        ids = [n.attrs["id"] for n in doc.iter() if "id" in n.attrs]
        for dup in sorted({i for i in ids if ids.count(i) > 1}):
            errors.append(f"{rel}: duplicate id {dup!r}")
        for n in doc.iter():
            for a in ("src", "srcset", "data", "poster", "action"):
                if a in n.attrs:
                    errors.append(f"{rel}: <{n.tag} {a}=…> loads a resource")
            if n.tag == "link":
                href = n.attrs.get("href", "")
                if re.match(r"^(https?:)?//", href):
                    errors.append(f"{rel}: external <link href={href}>")
            if n.tag in ("iframe", "object", "embed", "img", "video", "audio"):
                errors.append(f"{rel}: <{n.tag}> element")
            if n.tag == "a" and "href" in n.attrs:
                href = n.attrs["href"]
                if re.match(r"^[a-z]+:|^//", href) or href.startswith("#"):
                    continue
                target = urljoin(BASE + "/" + rel, href)
                path = urlsplit(target).path
                if not url_to_file(path).is_file() and path not in SERVER_PROVIDED:
                    errors.append(f"{rel}: broken link {href}")
    css = (SITE / "style.css").read_text()
    if re.search(r"url\(|@import", css):
        errors.append("style.css loads a resource")
    return errors


def check_yaml_blocks() -> tuple[int, list[str]]:
    """Every YAML-marked block of every page, as the profiles select them, with its load result."""
    profiles = load_profiles()
    n, report = 0, []
    for name, profile in profiles.items():
        for prefix in profile["allowed_prefixes"]:
            for f in sorted((SITE / prefix.strip("/")).rglob("*.html")):
                text, _ = decode_page(f.read_bytes())
                doc, _ = parse_html(text)
                apply_scripts(doc)
                for node in select(doc, ", ".join(profile["yaml_blocks"])):
                    n += 1
                    kind = yaml_kind(node.text())
                    report.append(f"{kind:10} {f.relative_to(SITE)}  {first_line(node.text())}")
    return n, report


# --------------------------------------------------------------------------------------------------------
# Golden files
# --------------------------------------------------------------------------------------------------------

NOTES_HEAD = (SITE / "_src" / "golden-notes-head.md")


def notes_md(g: dict) -> str:
    out = [NOTES_HEAD.read_text(encoding="utf-8").rstrip() + "\n"]
    out.append("## Totals (reference crawl with the profiles of PROFILES.md)\n")
    out.append("| profile | pages fetched | pairs, `http` | pairs, `webdriver` | distinct pairs after dedupe "
               "(webdriver) | skipped blocks (webdriver) |")
    out.append("|---|---|---|---|---|---|")
    for name, s in g["summary"].items():
        sk = ", ".join(f"{k}: {v}" for k, v in sorted(s["skipped"].items())) or "none"
        out.append(f"| {name} | {len(s['pages'])} | {s['pairs_http']} | {s['pairs_webdriver']} | "
                   f"{s['distinct_pairs']} | {sk} |")
    out.append("")
    by_content: dict = {}
    for page in g["pages"]:
        key = json.dumps([(p["title"], p["description"], p["reference"]) for p in page["pairs"]])
        by_content.setdefault(key, []).append(page["url"])
    current = None
    for page in g["pages"]:
        if page["profile"] != current:
            current = page["profile"]
            out.append(f"## Profile `{current}`\n")
        out.append(f"### `{page['url']}`\n")
        key = json.dumps([(p["title"], p["description"], p["reference"]) for p in page["pairs"]])
        twins = [u for u in by_content[key] if u != page["url"]]
        if twins and page["pairs"]:
            out.append(f"Same pairs as {', '.join(f'`{u}`' for u in twins)} (exact duplicates: dedupe keeps the "
                       "first in source order).\n")
        if page["scripts"]:
            out.append(f"{page['scripts']} example(s) inserted by JavaScript: found by `webdriver` only.\n")
        if page["pairs"]:
            out.append("Pairs (title, then first line of the reference):\n")
            for p in page["pairs"]:
                js = " **(webdriver only)**" if page["static_pairs"] <= p["position"] else ""
                desc = " (description: `.`)" if p["description"] == "." else ""
                out.append(f"{p['position'] + 1}. {p['title']}: `{first_line(p['reference'])}`{js}{desc}")
            out.append("")
        else:
            out.append("No pairs.\n")
        if page["skipped"]:
            out.append("Skipped code blocks:\n")
            for sk in page["skipped"]:
                out.append(f"- `{sk['first_line']}` under “{sk['title']}”: {sk['reason']} ({sk['detail']})")
            out.append("")
        if page["removed"]:
            out.append("YAML blocks removed before extraction:\n")
            for r in page["removed"]:
                out.append(f"- `{r['first_line']}`: {r['why']}")
            out.append("")
    return "\n".join(out).rstrip() + "\n"


def golden_json(g: dict) -> str:
    slim = {"note": "Generated by peers/docsite.py --write from the HTML and PROFILES.md; see golden-notes.md.",
            "base": "paths are relative to the origin the site is served from",
            "summary": g["summary"],
            "pairs": g["pairs"]}
    return json.dumps(slim, indent=1, ensure_ascii=False) + "\n"


def browser_check(g: dict, chromium: str) -> list[str]:
    """Load every crawled page in headless Chromium over HTTP, dump the live DOM and extract from it:
    the pairs must be the golden `webdriver` pairs."""
    import functools
    import http.server
    import shutil
    import subprocess
    import tempfile
    import threading

    exe = shutil.which(chromium)
    if not exe:
        return [f"--browser: {chromium} not found"]
    class Quiet(http.server.SimpleHTTPRequestHandler):
        def log_message(self, *args):
            pass

    handler = functools.partial(Quiet, directory=str(SITE))
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    origin = f"http://127.0.0.1:{server.server_address[1]}"
    profiles = load_profiles()
    errors, n = [], 0
    try:
        with tempfile.TemporaryDirectory() as profile_dir:
            for page in g["pages"]:
                if "refresh" in page["url"] or "redirect-" in page["url"]:
                    continue  # the browser follows meta refresh: covered by TRAPS.md, not by this check
                out = subprocess.run(
                    [exe, "--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
                     "--disable-component-update", "--disable-sync", "--no-first-run",
                     f"--user-data-dir={profile_dir}", "--dump-dom", origin + page["url"]],
                    capture_output=True, text=True, timeout=60)
                doc, _ = parse_html(out.stdout, page["url"])
                got = extract(doc, profiles[page["profile"]])["pairs"]
                n += 1
                if got != page["pairs"]:
                    errors.append(f"browser: {page['url']}: {len(got)} pairs, golden has {len(page['pairs'])}")
                    for a, b in zip(got, page["pairs"]):
                        if a != b:
                            errors.append(f"  first difference: {json.dumps(a)[:300]}\n  golden: {json.dumps(b)[:300]}")
                            break
    finally:
        server.shutdown()
    print(f"browser: {n} pages loaded in {chromium}, {len(errors)} mismatch(es)")
    return errors


def html5_check(g: dict) -> list[str]:
    """The static pairs must not depend on the HTML parser: html5lib's tree gives the same."""
    try:
        import html5lib  # noqa: F401
    except ImportError:
        return []
    profiles = load_profiles()
    errors = []
    for page in g["pages"]:
        text, _ = decode_page(url_to_file(page["url"].split("?")[0]).read_bytes())
        doc = parse_html5(text)
        apply_scripts(doc)
        got = extract(doc, profiles[page["profile"]])["pairs"]
        if got != page["pairs"]:
            errors.append(f"html5lib tree: {page['url']}: pairs differ from the strict tree's")
    return errors


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--write", action="store_true", help="regenerate golden-pairs.json and golden-notes.md")
    ap.add_argument("--yaml", action="store_true", help="only list every YAML block and how it loads")
    ap.add_argument("--browser", nargs="?", const="chromium", metavar="EXE",
                    help="also load every page in headless Chromium and compare its live DOM with the golden "
                         "webdriver pairs (default executable: chromium)")
    args = ap.parse_args()
    if args.yaml:
        n, report = check_yaml_blocks()
        print("\n".join(report))
        print(f"{n} YAML blocks")
        return 0
    errors = check_site()
    g = golden()
    for page in g["pages"]:
        if page["error"]:
            errors.append(f"{page['url']}: {page['error']}")
    errors += html5_check(g)
    if args.browser:
        errors += browser_check(g, args.browser)
    files = {"golden-pairs.json": golden_json(g), "golden-notes.md": notes_md(g)}
    for name, content in files.items():
        p = SITE / name
        if args.write:
            p.write_text(content, encoding="utf-8")
        elif not p.exists() or p.read_text(encoding="utf-8") != content:
            errors.append(f"{name} is stale: run python3 -m peers.docsite --write")
    for name, s in g["summary"].items():
        print(f"{name:15} pages {len(s['pages']):3}  pairs http {s['pairs_http']:3}  webdriver "
              f"{s['pairs_webdriver']:3}  distinct {s['distinct_pairs']:3}  skipped {s['skipped']}")
    if errors:
        print("\n".join(errors), file=sys.stderr)
        print(f"{len(errors)} problem(s)", file=sys.stderr)
        return 1
    print("ok")
    return 0


if __name__ == "__main__":
    sys.exit(main())
