"""gawd (the GitHub Actions workflow differ) on pairs of workflow texts: reads JSON lines
{"id", "a", "b"} on stdin, loads each text as gawd's own `diff_workflow_files` does (ruamel.yaml,
safe, pure) and writes {"id", "changes": [kind, ...]} per line (null where gawd raises). Used by stages/score/tests/gawd_agree.rs."""

import json
import sys

import gawd
import ruamel.yaml

parser = ruamel.yaml.YAML(typ="safe", pure=True)
for line in sys.stdin:
    row = json.loads(line)
    a, b = parser.load(row["a"]), parser.load(row["b"])
    try:
        changes = [c[0] for c in gawd.diff_workflows({} if a is None else a, {} if b is None else b)]
    except Exception as e:  # gawd assumes `jobs` is a mapping, and so on
        changes = None
        print(f"gawd_peer: pair {row['id']}: {type(e).__name__}: {e}", file=sys.stderr)
    print(json.dumps({"id": row["id"], "changes": changes}))
