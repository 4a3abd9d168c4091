#!/usr/bin/env python3
"""Synthetic workloads for bench/quality.sh, made from the real llm4ci data by small deterministic mutations.
Nothing random: the same data always gives byte-identical files. Generated files go to a folder you name
(a temp folder; never commit them).

  scale.py mutate-model SRC.csv.gz OUT.csv.gz [--salt S]
      A seventh model: SRC's rows with LLM_YML_Output mutated per row (a renamed key, a changed value or a
      dropped line, chosen per row), so every non-empty output becomes a new text.

  scale.py build OUT_DIR [--data DIR]
      The Doc2CI scale: 3,363 pairs x 16 models = 53,808 configurations over four services.
      Pairs (one llm4ci source file per service, dedupe must keep exactly the target count):
        github-actions  725   the real GitHubActions_Docs.csv.gz as is (1,318 rows, dedupe keeps 725)
        circleci        786   } pair j is the j % 725-th kept real pair with its title, description and
        gitlab-ci       841   } reference mutated by a seed of (service, j); every 10th pair is followed by a
        travis-ci     1,011   } copy with extra whitespace and another URL, which dedupe must drop
      Models: 16 per service. Model names must be unique across [[models]] entries (a name is a partition),
      so each (model, service) gets its own name, m01-github-actions ... m16-travis-ci: 64 entries.
      Model k answers with real model (k-1) % 6's output for the pair's real ID; for github-actions m01-m06
      are the six real output files unchanged and m07-m16 mutated copies; for the other services every
      output is mutated with a seed of (k, service, j).
      Writes OUT_DIR/pipeline.toml (warehouse OUT_DIR/warehouse), the CSVs, and OUT_DIR/expected.json.
"""

import argparse
import csv
import gzip
import io
import json
import re
import sys
import zlib
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
DEFAULT_DATA = REPO.parent / "shared" / "data" / "llm4ci"
MODELS = ["gpt-4o", "gpt-4.1", "llama3.1-8b", "codellama-7b", "gemma3-12b", "codegemma-7b"]
FAMILY = {"gpt-4o": "gpt", "gpt-4.1": "gpt", "llama3.1-8b": "llama", "codellama-7b": "llama",
          "gemma3-12b": "gemma", "codegemma-7b": "gemma"}
SERVICES = [("github-actions", "GitHub Actions", 725), ("circleci", "CircleCI", 786),
            ("gitlab-ci", "GitLab CI", 841), ("travis-ci", "Travis CI", 1011)]
N_MODELS = 16
DOCS_COLS = ["ID", "URL", "Title", "Description", "Code"]
OUT_COLS = DOCS_COLS + ["LLM_YML_Output", "Time"]


def seed_of(*parts):
    return zlib.crc32("|".join(str(p) for p in parts).encode("utf-8"))


# --- reading / writing llm4ci CSVs -----------------------------------------------------------------

def read_csv(path):
    with open(path, "rb") as raw:
        gz = raw.read(2) == b"\x1f\x8b"
    with (gzip.open(path, "rb") if gz else open(path, "rb")) as f:
        return list(csv.DictReader(io.TextIOWrapper(f, encoding="utf-8", newline="")))


def write_csv(path, cols, rows):
    # mtime=0: byte-identical output on every run.
    with open(path, "wb") as raw, gzip.GzipFile(fileobj=raw, mode="wb", mtime=0) as gz:
        with io.TextIOWrapper(gz, encoding="utf-8", newline="") as f:
            w = csv.DictWriter(f, fieldnames=cols, extrasaction="ignore")
            w.writeheader()
            for r in rows:
                w.writerow({c: r.get(c, "") for c in cols})


# --- SPEC §1 dedupe key (as in peers/predecessor.py) --------------------------------------------

def collapse_ws(s):
    return " ".join(s.split())


def normalize_reference(s):
    lines = [l.rstrip() for l in s.split("\n")]
    start = next((i for i, l in enumerate(lines) if l), len(lines))
    end = next((i + 1 for i in range(len(lines) - 1, -1, -1) if lines[i]), start)
    return "\n".join(lines[start:end])


def dedupe_key(service, r):
    return (service, collapse_ws(r["Title"]), collapse_ws(r["Description"]), normalize_reference(r["Code"]))


def kept(service, rows):
    seen, out = set(), []
    for r in rows:
        k = dedupe_key(service, r)
        if k not in seen:
            seen.add(k)
            out.append(r)
    return out


# --- mutations ------------------------------------------------------------------------------------

KEY_LINE = re.compile(r"^(\s*(?:-\s+)?)([A-Za-z_][\w.-]*)(\s*:)(.*)$")


def _rename_key(lines, seed):
    cands = [i for i, l in enumerate(lines) if KEY_LINE.match(l)]
    if not cands:
        return None
    i = cands[seed % len(cands)]
    m = KEY_LINE.match(lines[i])
    lines = list(lines)
    lines[i] = f"{m.group(1)}{m.group(2)}_{'xyzw'[seed % 4]}{m.group(3)}{m.group(4)}"
    return lines


def _change_value(lines, seed):
    cands = []
    for i, l in enumerate(lines):
        m = KEY_LINE.match(l)
        if m:
            v = m.group(4).strip()
            if v and v[0] not in "|>&*{[#!" and "#" not in v:
                cands.append(i)
    if not cands:
        return None
    i = cands[seed % len(cands)]
    l = lines[i].rstrip()
    suffix = f"-{seed % 97}"
    l = l[:-1] + suffix + l[-1] if l[-1] in "\"'" else l + suffix
    lines = list(lines)
    lines[i] = l
    return lines


def _drop_line(lines, seed):
    cands = [i for i, l in enumerate(lines) if l.strip() and not l.strip().startswith("#")]
    if len(cands) < 3:
        return None
    i = cands[1 + seed % (len(cands) - 1)]  # never the first line
    return lines[:i] + lines[i + 1:]


def mutate(text, seed):
    """A small deterministic edit that survives clean(): a renamed key, a changed value or a dropped line."""
    lines = text.split("\n")
    ops = [_rename_key, _change_value, _drop_line]
    first = seed % 3
    for k in range(3):
        got = ops[(first + k) % 3](lines, seed // 3)
        if got is not None:
            return "\n".join(got)
    return (text.rstrip("\n") + "\n" if text.strip() else "") + f"mutated_{seed % 1000}: true"


def mutate_prose(text, seed, tag):
    words = text.split(" ")
    if len(words) > 4:
        i = 1 + seed % (len(words) - 1)
        words.insert(i, tag)
        return " ".join(words)
    return f"{text} {tag}".strip()


# --- commands -------------------------------------------------------------------------------------

def mutate_model(args):
    rows = read_csv(args.src)
    for r in rows:
        r["LLM_YML_Output"] = mutate(r["LLM_YML_Output"], seed_of(args.salt, r["ID"]))
    cols = [c for c in OUT_COLS if c in rows[0]]
    write_csv(args.out, cols, rows)
    print(f"{len(rows)} outputs mutated into {args.out}", file=sys.stderr)


def build(args):
    data, out = Path(args.data), Path(args.out_dir)
    out.mkdir(parents=True, exist_ok=True)
    docs = read_csv(data / "GitHubActions_Docs.csv.gz")
    base = kept("github-actions", docs)
    assert len(base) == 725, len(base)
    real_out = {m: {r["ID"]: r for r in read_csv(data / f"GitHubActions_{m}_output.csv.gz")} for m in MODELS}

    toml = ["# Generated by bench/scale.py: the Doc2CI scale (3,363 pairs x 16 models) from mutated real data.",
            "[study]", f'warehouse = "{out / "warehouse"}"', ""]
    for name, display, _ in SERVICES:
        toml += ["[[services]]", f'name = "{name}"', f'display = "{display}"', ""]
    expected = {"pairs": {}, "raw_rows": {}, "configurations": 0}
    model_entries = []

    for name, display, n in SERVICES:
        if name == "github-actions":
            src_path = data / "GitHubActions_Docs.csv.gz"
            raw_rows = docs
            pair_rows = base
        else:
            raw_rows, pair_rows = [], []
            for j in range(n):
                b = base[j % 725]
                rnd = j // 725
                s = seed_of(name, j)
                tag = f"[{display}{'' if rnd == 0 else f' part {rnd + 1}'}]"
                r = {"ID": f"{name}-{j + 1}", "URL": f"{b['URL']}#{name}-{j + 1}",
                     "Title": f"{b['Title']} {tag}", "Description": mutate_prose(b["Description"], s, display),
                     "Code": mutate(b["Code"], s), "_base": b["ID"]}
                raw_rows.append(r)
                pair_rows.append(r)
                if j % 10 == 9:  # a copy reached through another URL, layout-only differences: dedupe drops it
                    c = dict(r)
                    c["ID"] = f"{name}-{j + 1}-copy"
                    c["URL"] = r["URL"] + "?learn=copy"
                    c["Description"] = "  " + r["Description"].replace(" ", "  ", 3) + "\n"
                    c["Code"] = "\n" + "\n".join(l + "  " for l in r["Code"].split("\n")) + "\n\n"
                    raw_rows.append(c)
            src_path = out / f"{name}_docs.csv.gz"
            write_csv(src_path, DOCS_COLS, raw_rows)
        got = len(kept(name, raw_rows))
        assert got == n, (name, got, n)
        expected["pairs"][name] = got
        expected["raw_rows"][name] = len(raw_rows)
        toml += ["[[sources]]", f'name = "{name}-docs"', 'kind = "import"', 'format = "llm4ci"',
                 f'path = "{src_path}"', f'service = "{name}"', ""]

        for k in range(1, N_MODELS + 1):
            real = MODELS[(k - 1) % 6]
            mname = f"m{k:02d}-{name}"
            if name == "github-actions" and k <= 6:
                path = data / f"GitHubActions_{real}_output.csv.gz"
            else:
                path = out / f"{mname}_output.csv.gz"
                rows = []
                for r in raw_rows:
                    base_id = r.get("_base", r["ID"])
                    o = real_out[real].get(base_id)
                    if o is None:
                        continue
                    rows.append({"ID": r["ID"], "URL": r["URL"], "Title": r["Title"], "Description": r["Description"],
                                 "Code": r["Code"], "Time": o.get("Time", ""),
                                 "LLM_YML_Output": mutate(o["LLM_YML_Output"], seed_of(k, name, r["ID"]))})
                write_csv(path, OUT_COLS, rows)
            expected["configurations"] += n
            model_entries += ["[[models]]", f'name = "{mname}"', 'backend = "import"', 'format = "llm4ci"',
                              f'path = "{path}"', f'service = "{name}"', f'family = "{FAMILY[real]}"', ""]
    (out / "pipeline.toml").write_text("\n".join(toml + model_entries), encoding="utf-8")
    expected["pairs_total"] = sum(expected["pairs"].values())
    expected["models"] = N_MODELS
    (out / "expected.json").write_text(json.dumps(expected, indent=1), encoding="utf-8")
    print(json.dumps(expected))


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = ap.add_subparsers(dest="cmd", required=True)
    m = sub.add_parser("mutate-model")
    m.add_argument("src")
    m.add_argument("out")
    m.add_argument("--salt", default="model-7")
    b = sub.add_parser("build")
    b.add_argument("out_dir")
    b.add_argument("--data", default=str(DEFAULT_DATA))
    a = ap.parse_args()
    {"mutate-model": mutate_model, "build": build}[a.cmd](a)


if __name__ == "__main__":
    main()
