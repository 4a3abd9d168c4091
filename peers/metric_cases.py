"""The (reference, output) pairs the differential tests score: real rows of the llm4ci data plus edge
cases. Shared by metrics_peer.py (live peers) and rouge_ignite_peer.py (committed ROUGE-L values), so
both score exactly the same pairs."""

import os

from peers import LLM4CI
from peers.data import read_csv

MODELS = ["codegemma-7b", "codellama-7b", "gemma3-12b", "gpt-4.1", "gpt-4o", "llama3.1-8b"]
# Every 13th ID of every model: 101 IDs x 6 models = 606 real pairs spread over the whole file.
STRIDE = 13


def default_data_dir():
    return str(LLM4CI)


def references(data_dir):
    """All references of the Docs file, in ID order, as (ID, Code)."""
    rows = read_csv(os.path.join(data_dir, "GitHubActions_Docs.csv.gz"))
    rows.sort(key=lambda r: int(r["ID"]))
    return [(int(r["ID"]), r["Code"]) for r in rows]


def outputs(data_dir, model):
    rows = read_csv(os.path.join(data_dir, f"GitHubActions_{model}_output.csv.gz"))
    return {int(r["ID"]): r["LLM_YML_Output"] or "" for r in rows}


def long_workflow(steps):
    lines = ["name: Long CI", "on:", "  push:", "    branches: [ main, 'release/**' ]", "jobs:"]
    for j in range(3):
        lines += [f"  job_{j}:", "    runs-on: ubuntu-latest", "    steps:"]
        for s in range(steps):
            lines += [
                f"      - name: Step {j}.{s}",
                f"        run: echo \"building part {s} of job {j}\" && make target-{s % 7}",
                "        env:",
                f"          LEVEL: {s % 5}",
            ]
    return "\n".join(lines) + "\n"


EDGE_CASES = [
    # (name, reference, output); a reference of None means "the Docs reference with ID 1".
    ("empty_output", None, ""),
    ("whitespace_only_output", None, "   \n\t\n  \n"),
    ("prose_output", None, "I'm sorry, but I can't generate that. The workflow should run on push, then build and test the code."),
    ("unparseable_yaml", None, "jobs:\n  build:\n    runs-on: [ubuntu-latest\n    steps: - run: echo {{\n"),
    ("both_empty", "", ""),
    ("empty_reference", "", "on: push\njobs:\n  a:\n    runs-on: ubuntu-latest\n"),
    ("identical", "on: push\njobs:\n  test:\n    runs-on: ubuntu-latest\n    steps:\n      - uses: actions/checkout@v4\n      - run: npm test\n",
     "on: push\njobs:\n  test:\n    runs-on: ubuntu-latest\n    steps:\n      - uses: actions/checkout@v4\n      - run: npm test\n"),
    ("layout_quoting_order_comments",
     "# CI\non: [push, pull_request]\njobs:\n  test:\n    runs-on: ubuntu-latest  # runner\n    steps:\n      - uses: actions/checkout@v4\n",
     "jobs:\n  test:\n    steps:\n    - {uses: 'actions/checkout@v4'}\n    runs-on: \"ubuntu-latest\"\non:\n  - push\n  - pull_request\n"),
    ("unicode",
     "name: Déploiement 🚀\non: push\njobs:\n  ΣΥΝΟΨΗ:\n    runs-on: ubuntu-latest\n    steps:\n      - run: echo \"straße ﬁle İstanbul 東京\"\n",
     "name: deploiement 🚀\non: push\njobs:\n  σύνοψη:\n    runs-on: ubuntu-latest\n    steps:\n      - run: echo \"STRASSE file istanbul 東京\u00a0ok\"\n"),
    ("long_workflow_vs_real", None, long_workflow(25)),
    # Smaller than 300 lines: zss needs minutes for two 600-node trees.
    ("long_workflow_mutated", long_workflow(12), long_workflow(11).replace("make target-3", "make tgt-3").replace("LEVEL: 2", "LEVEL: '2'")),
    ("hashes_in_quotes",
     "on: push\njobs:\n  a:\n    runs-on: ubuntu-latest\n    steps:\n      - run: echo \"#not a comment\" '#nor this'\n      - run: echo a#b # but this is\n",
     "on: push\njobs:\n  a:\n    runs-on: ubuntu-latest\n    steps:\n      - run: echo \"#not a comment\"\n      - run: echo a#b\n"),
    ("duplicate_keys", None, "on: push\non: pull_request\njobs:\n  a:\n    runs-on: ubuntu-latest\n"),
    ("anchors_and_merge",
     "defaults: &d\n  runs-on: ubuntu-latest\n  timeout-minutes: 10\njobs:\n  a:\n    <<: *d\n    steps: [{run: make}]\n  b:\n    <<: *d\n    timeout-minutes: 5\n",
     "defaults:\n  runs-on: ubuntu-latest\n  timeout-minutes: 10\njobs:\n  a:\n    runs-on: ubuntu-latest\n    timeout-minutes: 10\n    steps: [{run: make}]\n  b:\n    runs-on: ubuntu-latest\n    timeout-minutes: 5\n"),
    ("multi_document", "a: 1\n---\nb: 2\n", "a: 1\n---\nb: 3\n"),
    ("scalars_as_written",
     "version: 1.10\nport: 0x1F\nflag: True\nnothing: ~\nempty: ''\nlist: [1, 2.50, null, false]\non: yes\n",
     "version: 1.1\nport: 31\nflag: true\nnothing: null\nempty: \"\"\nlist: [1, 2.5, ~, FALSE]\non: 'yes'\n"),
    ("crlf_and_tabs", None, "on: push\r\njobs:\r\n  build:\r\n    runs-on: ubuntu-latest\r\n    steps:\r\n      - run:\techo  hi\t \r\n"),
    ("sequence_root", "- run: echo one\n- uses: actions/setup-node@v4\n  with:\n    node-version: 20\n",
     "- uses: actions/setup-node@v4\n  with:\n    node-version: '20'\n- run: echo one\n"),
    ("scalar_reference", "Use the checkout action.", "uses: actions/checkout@v4"),
    ("short_output", None, "on: push"),
    ("wildcard_key", "on:\n  push:\n    'release/*': true\n    tags: [v1]\n", "on:\n  push:\n    release/: false\n    tags: [v1]\n"),
    ("non_string_key", "jobs:\n  a: 1\n", "jobs:\n  1: a\n  a: 1\n"),
    ("python_whitespace", "on: push\nname: a\u2003b\n", "on: push\nname: a\u001fb\n"),
    ("block_scalar_with_hash", "steps:\n  - run: |\n      # install\n      npm ci\n\n      npm test\n",
     "steps:\n  - run: |\n      npm ci\n      npm test\n"),
]


def real_pairs(data_dir, refs=None):
    """[(key, reference, output)] for the sampled real rows, plus every non-ASCII output and each
    model's longest output."""
    refs = dict(refs or references(data_dir))
    pairs = []
    for model in MODELS:
        outs = outputs(data_dir, model)
        chosen = {i for i in outs if i % STRIDE == 0}
        chosen |= {i for i, o in outs.items() if any(ord(c) > 127 for c in o)}
        chosen.add(max(outs, key=lambda i: (len(outs[i].splitlines()), -i)))
        for i in sorted(chosen):
            pairs.append((f"{model}:{i}", refs[i], outs[i]))
    return pairs


def all_real_pairs(data_dir, refs=None):
    refs = dict(refs or references(data_dir))
    pairs = []
    for model in MODELS:
        outs = outputs(data_dir, model)
        for i in sorted(outs):
            pairs.append((f"{model}:{i}", refs[i], outs[i]))
    return pairs


def edge_pairs(refs):
    first = dict(refs)[1]
    return [(f"edge:{name}", first if r is None else r, o) for name, r, o in EDGE_CASES]


def cases(data_dir, everything=False):
    refs = references(data_dir)
    real = all_real_pairs(data_dir, refs) if everything else real_pairs(data_dir, refs)
    return refs, real + edge_pairs(refs)
