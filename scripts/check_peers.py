"""Imports every Python module a test or a test's peer script uses, so a machine that lacks one fails
here, at once and by name, instead of deep inside a differential test (or, worse, in a test that
falls back to recorded results). scripts/deps.sh installs them, pinned; keep both lists together."""

import importlib
import sys

MODULES = [
    # validity peers (stages/validate, peers/validity.py)
    "ruamel.yaml", "jsonschema", "check_jsonschema",
    # metric peers (peers/metrics.py) and the contamination measures (peers/contamination.py)
    "sacrebleu", "crystalbleu", "zss", "rapidfuzz", "nltk", "deepdiff",
    # the workflow differ beside the semantic metrics (peers/gawd.py)
    "gawd",
    # reading the warehouse as a user would (peers/duckdb_check.py); the lint peer
    # (peers/lint.py: its tools come from `doc2ci setup`, shellcheck from deps.sh)
    "duckdb",
    # crawl reference extraction (peers/docsite.py, peers/realdocs/reference.py, tests/e2e/crawl.rs)
    "html5lib", "bs4", "soupsieve",
    # Chromium's own tree for the extraction fuzz (peers/realdocs/chromium_tree.py) and bench/realdocs.sh
    "selenium",
    # statistics peers (peers/stats_check.py, stages/stats/tests)
    "scipy", "statsmodels", "sklearn", "numpy",
    # the comparison peer's join (peers/compare.py)
    "pandas",
    # object storage (tests/e2e/remote.rs): moto's S3 server, boto3 to list it, Polars to read it back
    "moto.server", "boto3", "polars",
    # generation peers (peers/llama_server.py: libs/llm, libs/smollm, tests/e2e/generate.rs, bench/;
    # peers/token_logprobs.py, which made libs/smollm/tests/data/llamacpp_logprobs.json)
    "xllamacpp", "openai",
]

import shutil
from pathlib import Path

missing = []
for exe in ["shellcheck", "node", "npm", "unshare", "nsenter", "setpriv"]:
    if shutil.which(exe) is None:
        missing.append(f"{exe}: not on PATH (the lint stage's tools and sandbox, the browser's namespace)")
# The documentation engines of tests/realdocs (tests/e2e/realdocs.rs renders the four sites with them).
for exe in ["hugo", "jekyll"]:
    if shutil.which(exe) is None:
        missing.append(f"{exe}: not on PATH (tests/realdocs)")
realdocs = Path(__file__).resolve().parent.parent / "tests/realdocs/node_modules"
for pkg in ["unified", "rehype-highlight", "liquidjs", "@asciidoctor/core", "@asciidoctor/tabs", "shiki"]:
    if not (realdocs / pkg / "package.json").exists():
        missing.append(f"{pkg}: not installed in tests/realdocs (npm ci there)")
for m in MODULES:
    try:
        importlib.import_module(m)
    except Exception as e:  # an ImportError, or a package that imports but is broken
        missing.append(f"{m}: {type(e).__name__}: {e}")
if missing:
    print("check_peers: these test peers do not import (run scripts/deps.sh test):", file=sys.stderr)
    for line in missing:
        print("  " + line, file=sys.stderr)
    sys.exit(1)
print(f"check_peers: {len(MODULES)} peer modules import")
