#!/usr/bin/env python3
"""Peer for doc2ci's validate stage: parse_ok and schema_ok of real GitHub Actions texts,
computed the way check-jsonschema does (its own YAML loader and its own validator factory).

parse_ok: check-jsonschema's loader (ruamel.yaml safe, pure Python; timestamps kept as text)
          returns a dict. Any exception counts as a parse failure, with its type recorded
          (check-jsonschema itself would crash on the few non-YAMLError ones, e.g. int('')).
schema_ok: parse_ok and no error from check-jsonschema's validator for its builtin
           `vendor.github-workflows` schema: jsonschema's class for the declared draft
           (draft-07), its format checker, `regress` for `pattern`.

Output: one tab-separated line per text,
`source  ID  parse_ok  schema_ok  n_errors  detail  canon`, where detail is the exception type
for parse failures, else the sorted distinct instance paths of the schema errors
(space-separated, `$` for the root), and canon checks doc2ci-yaml's `canon_json` (SPEC §5):
the sha256 of `json.dumps(v, sort_keys=True, ensure_ascii=False, separators=(',', ':'),
default=str)` of plain `ruamel.yaml.YAML(typ='safe', pure=True).load(text)`, `-` when that
load raises, `!` when the dump raises.

Usage: validity_peer.py OUT.tsv [DATA_DIR]   (DATA_DIR defaults to ../shared/data/llm4ci
beside the repository).

       validity_peer.py --canon IN.jsonl OUT.txt
           the canonical JSON of each {"text": ...} as above, unhashed (hex of its UTF-8), a line each.

       validity_peer.py --cases IN.jsonl OUT.tsv
           judges crafted cases, one JSON object per line {"service": ..., "text": ...} with
           doc2ci's service names (github-actions, circleci, gitlab-ci, travis-ci); writes
           `index  parse_ok  schema_ok  n_errors  detail` per case. GitLab texts get
           check-jsonschema's gitlab-ci transform (the `!reference` tag).
"""

import csv
import gzip
import hashlib
import io
import json
import multiprocessing
import os
import sys

from peers import LLM4CI

MODELS = ["codegemma-7b", "codellama-7b", "gemma3-12b", "gpt-4.1", "gpt-4o", "llama3.1-8b"]

BUILTIN = {
    "github-actions": "vendor.github-workflows",
    "circleci": "vendor.circle-ci",
    "gitlab-ci": "vendor.gitlab-ci",
    "travis-ci": "vendor.travis",
}

_state = {}


def make_checker(service):
    """check-jsonschema's loader and validator for `--builtin-schema vendor.<name>`."""
    from check_jsonschema.formats import FormatOptions
    from check_jsonschema.parsers import yaml as cj_yaml
    from check_jsonschema.regex_variants import RegexImplementation, RegexVariantName
    from check_jsonschema.schema_loader import BuiltinSchemaLoader
    from check_jsonschema.transforms import TRANSFORM_LIBRARY

    impls = [cj_yaml.construct_yaml_implementation(), cj_yaml.construct_yaml_implementation(pure=True)]
    transform = TRANSFORM_LIBRARY.get("gitlab-ci") if service == "gitlab-ci" else None
    if transform is not None:
        for impl in impls:
            transform.modify_yaml_implementation(impl)
    load = cj_yaml.impl2loader(*impls)
    regex = RegexImplementation(RegexVariantName.default)
    validator = BuiltinSchemaLoader(BUILTIN[service]).get_validator(
        "<peer>", {}, FormatOptions(regex_impl=regex), regex, False
    )
    return load, validator


def _init():
    import ruamel.yaml

    _state["load"], _state["validator"] = make_checker("github-actions")
    _state["safe"] = ruamel.yaml.YAML(typ="safe", pure=True)


def canon(text):
    try:
        value = _state["safe"].load(text)
    except Exception:  # noqa: BLE001 - any load failure
        return "-"
    try:
        dumped = json.dumps(value, sort_keys=True, ensure_ascii=False, separators=(",", ":"), default=str)
    except Exception:  # noqa: BLE001 - any dump failure
        return "!"
    return hashlib.sha256(dumped.encode("utf-8", "surrogatepass")).hexdigest()


def check(item):
    line = judge(item)
    return f"{line}\t{canon(item[2])}"


def judge(item, load=None, validator=None):
    source, ident, text = item
    load = load or _state["load"]
    validator = validator or _state["validator"]
    try:
        data = load(io.BytesIO(text.encode("utf-8")))
    except BaseException as e:  # noqa: BLE001 - every failure is a parse failure here
        if isinstance(e, KeyboardInterrupt):
            raise
        return f"{source}\t{ident}\t0\t0\t0\t{type(e).__name__}"
    if not isinstance(data, dict):
        return f"{source}\t{ident}\t0\t0\t0\tnot-a-mapping:{type(data).__name__}"
    paths = set()
    n = 0
    for err in validator.iter_errors(data):
        n += 1
        paths.add("/".join(str(p) for p in err.absolute_path) or "$")
    return f"{source}\t{ident}\t1\t{int(n == 0)}\t{n}\t{' '.join(sorted(paths))}"


def rows(data_dir):
    csv.field_size_limit(1 << 30)
    for model in MODELS:
        path = os.path.join(data_dir, f"GitHubActions_{model}_output.csv.gz")
        with gzip.open(path, "rt", encoding="utf-8", newline="") as f:
            for row in csv.DictReader(f):
                yield (model, row["ID"], row["LLM_YML_Output"])
    with gzip.open(os.path.join(data_dir, "GitHubActions_Docs.csv.gz"), "rt", encoding="utf-8", newline="") as f:
        for row in csv.DictReader(f):
            yield ("reference", row["ID"], row["Code"])


def cases(inp, out):
    checkers = {}
    lines = []
    with open(inp, encoding="utf-8") as f:
        for i, line in enumerate(f):
            case = json.loads(line)
            service = case["service"]
            if service not in checkers:
                checkers[service] = make_checker(service)
            load, validator = checkers[service]
            lines.append(judge(("case", str(i), case["text"]), load, validator).split("\t", 1)[1])
    with open(out, "w", encoding="utf-8") as f:
        for line in lines:
            f.write(line.replace("\n", " ") + "\n")


def canon_dumps(inp, out):
    """`--canon IN.jsonl OUT.txt`: for each {"text": ...} a line holding the dumped JSON of the safe
    load as hex of its UTF-8 bytes (lone surrogates kept), or "-" when the load raises, "!" when
    the dump does (the YAML loader's differential fuzz)."""
    import ruamel.yaml

    with open(inp, encoding="utf-8") as f, open(out, "w", encoding="utf-8") as o:
        for line in f:
            text = json.loads(line)["text"]
            try:
                # A loader per text: one that raised may be left in a state that fails the next.
                value = ruamel.yaml.YAML(typ="safe", pure=True).load(text)
            except Exception:  # noqa: BLE001 - any load failure
                r = "-"
            else:
                try:
                    d = json.dumps(value, sort_keys=True, ensure_ascii=False, separators=(",", ":"), default=str)
                    r = d.encode("utf-8", "surrogatepass").hex()
                except Exception:  # noqa: BLE001 - any dump failure
                    r = "!"
            o.write(r + "\n")


def main():
    if sys.argv[1] == "--cases":
        cases(sys.argv[2], sys.argv[3])
        return
    if sys.argv[1] == "--canon":
        canon_dumps(sys.argv[2], sys.argv[3])
        return
    out = sys.argv[1]
    data_dir = sys.argv[2] if len(sys.argv) > 2 else str(LLM4CI)
    items = list(rows(data_dir))
    with multiprocessing.Pool(os.cpu_count() or 1, initializer=_init) as pool:
        lines = pool.map(check, items, chunksize=64)
    with open(out + ".tmp", "w", encoding="utf-8") as f:
        for line in lines:
            f.write(line.replace("\n", " ") + "\n")
    os.replace(out + ".tmp", out)


if __name__ == "__main__":
    main()
