"""The YAML fences of Markdown pages: the renderers' source oracle (`_fences.json`), shared by the
Hugo and Jekyll renderers (and the YAML check by reference.py). Each fence is kept as written (dedented
to its fence) with whether it loads as a mapping or a sequence; a rendered page must give exactly one
pair per such fence."""
from __future__ import annotations

import io
import json
import re
import shutil
import subprocess
import sys
from pathlib import Path

from ruamel.yaml import YAML

FENCE = re.compile(r"^(\s*)(`{3,}|~{3,})\s*(yaml|yml)\b.*$")
LIQUID_YAML = re.compile(r"\{%-?\s*highlight\s+(yaml|yml)\s*-?%\}\n(.*?)\{%-?\s*endhighlight\s*-?%\}", re.S)


def fences(md: str) -> list[str]:
    """Fenced YAML blocks (inside lists and shortcodes too) and `{% highlight yaml %}` blocks."""
    out, lines, i = [], md.split("\n"), 0
    while i < len(lines):
        m = FENCE.match(lines[i])
        if not m:
            i += 1
            continue
        indent, mark = len(m.group(1)), m.group(2)
        close = re.compile(rf"^\s{{0,{indent + 3}}}{re.escape(mark[0])}{{{len(mark)},}}\s*$")
        body, i = [], i + 1
        while i < len(lines) and not close.match(lines[i]):
            line = lines[i]
            body.append(line[min(indent, len(line) - len(line.lstrip(" "))):])
            i += 1
        out.append("\n".join(body))
        i += 1
    return out + [m.group(2) for m in LIQUID_YAML.finditer(md)]


def collection(text: str) -> bool:
    # The round-trip loader keeps a tag it does not know (GitLab's `!reference [.rules, rules]`
    # is CI syntax, and its document still a mapping); the safe loader refuses such a document.
    try:
        docs = list(YAML(typ="rt", pure=True).load_all(io.StringIO(text)))
    except Exception:
        return False
    return len(docs) == 1 and isinstance(docs[0], (dict, list))


def body(md: str) -> str:
    """The page without its front matter."""
    if md.startswith("---\n"):
        end = md.find("\n---", 4)
        return md[end + 4:] if end >= 0 else md
    return md


def write(out: Path, pages: dict[str, str]) -> None:
    """`pages`: URL path → Markdown source."""
    table = {url: [{"code": c, "collection": collection(c)} for c in fences(body(md))] for url, md in pages.items()}
    (out / "_fences.json").write_text(json.dumps(table, indent=1))


def run_engine(name: str, args: list[str]) -> None:
    """Runs a site engine from PATH (hugo, jekyll), exiting with its output when it fails."""
    exe = shutil.which(name)
    if not exe:
        sys.exit(f"render.py: {name} is not on PATH (scripts/deps.sh test installs it)")
    r = subprocess.run([exe, *args], capture_output=True, text=True)
    if r.returncode != 0:
        sys.exit(f"render.py: {name} failed:\n{r.stdout}{r.stderr}")
