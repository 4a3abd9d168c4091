#!/usr/bin/env python3
"""Hostile inputs in every stage (issue 12): each case is a small real study with one poisoned
input, run by the real binary under GNU time; the table says what happened, how long it took and
the peak memory.

    python3 tests/crash/hostile.py --doc2ci target/release/doc2ci [--out table.md] [--max-secs 10] [--max-mib 1024]

A case passes when the run ends (exit 0 with the poisoned row recorded as an error or flag, or a
non-zero exit whose message names the file and line, the model or the URL) within the bounds,
and nothing finished is lost (the clean rows of the same study are all there).
"""
from __future__ import annotations

import argparse
import csv
import gzip
import http.server
import json
import os
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
SHARED = ROOT.parent / "shared" / "data" / "llm4ci"
N = 12  # clean pairs per study


def base_rows() -> list[dict]:
    csv.field_size_limit(1 << 31)
    with gzip.open(SHARED / "GitHubActions_Docs.csv.gz", "rt", newline="") as f:
        return list(csv.DictReader(f))[:N]


def outputs_for(rows: list[dict]) -> list[dict]:
    want = {r["ID"] for r in rows}
    with gzip.open(SHARED / "GitHubActions_gpt-4o_output.csv.gz", "rt", newline="") as f:
        return [r for r in csv.DictReader(f) if r["ID"] in want]


def write_csv(path: Path, rows: list[dict]):
    with open(path, "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=list(rows[0].keys()))
        w.writeheader()
        w.writerows(rows)


def alias_bomb() -> str:
    s = "a: &a [x,x,x,x,x,x,x,x,x,x]\n"
    names = "abcdefghi"
    for p, n in zip(names, names[1:]):
        s += f"{n}: &{n} [" + ",".join([f"*{p}"] * 10) + "]\n"
    return s


class Stub(http.server.ThreadingHTTPServer):
    daemon_threads = True

    def handle_error(self, request, client_address):
        pass  # the client hung up on a hostile answer: expected here


def hostile_server(mode: str) -> tuple[Stub, str]:
    class H(http.server.BaseHTTPRequestHandler):
        def log_message(self, *a):
            pass

        def do_POST(self):
            self.rfile.read(int(self.headers.get("content-length", "0")))
            if mode == "garbage":
                body = b"\x00\xff<html>not json" * 1000
                self.send_response(200)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)
                return
            # endless: headers, then an unending body, as fast as the client reads it
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.end_headers()
            try:
                self.wfile.write(b'{"choices": [{"message": {"content": "')
                chunk = b"x" * 65536
                for _ in range(1 << 16):
                    self.wfile.write(chunk)
            except OSError:
                pass

    srv = Stub(("127.0.0.1", 0), H)
    threading.Thread(target=srv.serve_forever, daemon=True).start()
    return srv, f"http://127.0.0.1:{srv.server_address[1]}/v1"


def study(d: Path, docs: Path, model: str, extra: str = "") -> Path:
    s = (f'[study]\nwarehouse = "wh"\nthreads = 2\n[[services]]\nname = "github-actions"\ndisplay = "GitHub Actions"\n'
         f'[[sources]]\nname = "docs"\nkind = "import"\nformat = "llm4ci"\npath = "{docs}"\nservice = "github-actions"\n'
         f"{model}\n{extra}\n")
    p = d / "pipeline.toml"
    p.write_text(s)
    return p


def run(doc2ci: str, cfg: Path, timeout: float = 600) -> tuple[int, str, float, float]:
    t = subprocess.run(["/usr/bin/time", "-f", "TIME %e %M", doc2ci, "run", "--quiet", "--config", str(cfg)],
                       capture_output=True, text=True, errors="replace", timeout=timeout,
                       env={**os.environ, "DOC2CI_REQUEST_CACHE": "off"})
    err = t.stderr
    line = [l for l in err.splitlines() if l.startswith("TIME ")][-1]
    secs, kib = float(line.split()[1]), float(line.split()[2])
    msg = "\n".join(l for l in err.splitlines() if not l.startswith("TIME ")).strip()
    return t.returncode, msg, secs, kib / 1024


def duck(wh: Path, sql: str):
    import duckdb
    return duckdb.connect().execute(sql.replace("{wh}", str(wh))).fetchall()


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--doc2ci", required=True)
    ap.add_argument("--out", type=Path)
    ap.add_argument("--max-secs", type=float, default=10.0)
    ap.add_argument("--max-mib", type=float, default=1024.0)
    a = ap.parse_args()
    rows = base_rows()
    outs = outputs_for(rows)
    results = []
    with tempfile.TemporaryDirectory(prefix="doc2ci-hostile-") as tmp:
        tmp = Path(tmp)

        def case(name: str, stage: str, make, check):
            d = tmp / name
            d.mkdir()
            cfg = make(d)
            code, msg, secs, mib = run(a.doc2ci, cfg)
            ok, why = check(d / "wh", code, msg)
            bounded = secs <= a.max_secs and mib <= a.max_mib
            results.append({"case": name, "stage": stage, "exit": code, "message": why or msg.splitlines()[-1:] ,
                            "seconds": secs, "peak_mib": round(mib, 1), "ok": ok and bounded,
                            "bounded": bounded})
            print(f"{name}: exit {code}, {secs:.1f} s, {mib:.0f} MiB, {'ok' if ok and bounded else 'FAIL'}: {why}",
                  file=sys.stderr)

        def with_output(text: str, i: int = 0):
            def make(d: Path) -> Path:
                docs = d / "docs.csv"
                write_csv(docs, rows)
                o = [dict(r) for r in outs]
                o[i]["LLM_YML_Output"] = text
                write_csv(d / "out.csv", o)
                return study(d, docs, f'[[models]]\nname = "gpt-4o"\nbackend = "import"\npath = "{d / "out.csv"}"\n')
            return make

        def row_flagged(expect: str):
            def check(wh: Path, code: int, msg: str):
                if code != 0:
                    return False, f"run failed: {msg[-300:]}"
                n = duck(wh, "SELECT COUNT(*) FROM read_parquet('{wh}/scores/**/*.parquet')")[0][0]
                errs = duck(wh, "SELECT errors FROM read_parquet('{wh}/validations/**/*.parquet') WHERE NOT parse_ok")
                trunc = duck(wh, "SELECT COUNT(*) FROM read_parquet('{wh}/scores/**/*.parquet') WHERE truncated")[0][0]
                text = " | ".join(" ".join(e[0])[:160] for e in errs)
                if n != len(outs):
                    return False, f"{n} scores for {len(outs)} outputs: finished work lost"
                if expect not in text and expect != "truncated":
                    return False, f"no '{expect}' in the validation errors: {text[:300]}"
                if expect == "truncated" and trunc == 0:
                    return False, "the huge text is not flagged truncated"
                return True, f"{len(outs)} rows scored; invalid row: {text[:200]}" + (f"; {trunc} truncated" if trunc else "")
            return check

        big = "jobs:\n" + "".join(f"  job{i}:\n    runs-on: ubuntu-latest\n" for i in range(2_500_000))  # ~100 MB
        def refused(file: str, column: str):
            def check(wh: Path, code: int, msg: str):
                line = next((l for l in msg.splitlines() if "exceeds the 8 MiB limit" in l), "")
                if code == 0 or f"{file}:" not in line or f"column `{column}`" not in line:
                    return False, f"expected a refusal naming {file}:LINE and {column}: {msg[-300:]}"
                # What finished is kept: the pairs of the study (or, for a refused pair file, nothing half-written).
                kept = duck(wh, "SELECT COUNT(*) FROM read_parquet('{wh}/pairs/**/*.parquet')")[0][0] if (wh / "pairs").exists() else 0
                return True, line.split("failed: ", 1)[-1][:200] + (f"; {kept} pairs kept" if kept else "")
            return check

        case("100 MB output", "import", with_output(big), refused("out.csv", "LLM_YML_Output"))
        one_mb = "jobs:\n" + "".join(f"  job{i}:\n    runs-on: ubuntu-latest\n" for i in range(26_000))
        case("1 MB output", "validate, score", with_output(one_mb), row_flagged("truncated"))
        case("10k-deep nesting", "validate, score", with_output("[" * 10_000 + "]" * 10_000), row_flagged("recursion limit"))
        case("alias bomb", "validate, score", with_output(alias_bomb()), row_flagged("alias"))
        case("NUL bytes", "validate, score", with_output("on: push\x00\njobs: {}\n"), row_flagged(""))
        case("20 MB line", "import", with_output("run: " + "x" * (20 << 20)), refused("out.csv", "LLM_YML_Output"))

        def huge_reference(d: Path) -> Path:
            docs = d / "docs.csv"
            r = [dict(x) for x in rows]
            r[0]["Code"] = big
            r[1]["Description"] = "d" * (50 << 20)  # a 50 MB CSV cell
            write_csv(docs, r)
            write_csv(d / "out.csv", outs)
            return study(d, docs, f'[[models]]\nname = "gpt-4o"\nbackend = "import"\npath = "{d / "out.csv"}"\n')

        def ref_check(wh: Path, code: int, msg: str):
            if code != 0:
                return False, msg[-300:]
            n = duck(wh, "SELECT COUNT(*) FROM read_parquet('{wh}/scores/**/*.parquet')")[0][0]
            t = duck(wh, "SELECT COUNT(*) FROM read_parquet('{wh}/scores/**/*.parquet') WHERE truncated")[0][0]
            return n == len(outs) and t >= 1, f"{n} rows scored, {t} flagged truncated (100 MB reference, 50 MB description)"
        case("100 MB reference + 50 MB CSV cell", "import", huge_reference, refused("docs.csv", "Code"))

        def non_utf8(d: Path) -> Path:
            docs = d / "docs.csv"
            write_csv(docs, rows)
            raw = docs.read_bytes().replace(rows[3]["Title"].encode(), b"\xff\xfe binary \xc3(", 1)
            docs.write_bytes(raw)
            return study(d, docs, "", "[stages.score]\nenabled = false\n")

        def names_line(wh: Path, code: int, msg: str):
            ok = code != 0 and "docs.csv:" in msg and "UTF-8" in msg
            return ok, msg.splitlines()[0][:200] if msg else "(no message)"
        case("non-UTF-8 cell", "import", non_utf8, names_line)

        for mode in ["garbage", "endless"]:
            srv, url = hostile_server(mode)

            def gen(d: Path, url=url) -> Path:
                docs = d / "docs.csv"
                write_csv(docs, rows)
                return study(d, docs, f'[[models]]\nname = "hostile"\nbackend = "openai"\nbase_url = "{url}"\nmodel = "m"\n'
                                      f"retries = 0\ntimeout_ms = 3000\n", "[stages.score]\nenabled = false\n")

            def gen_check(wh: Path, code: int, msg: str):
                if code != 0:
                    return False, msg[-300:]
                e = duck(wh, "SELECT COUNT(*), COUNT(error), any_value(error) FROM read_parquet('{wh}/generations/**/*.parquet')")[0]
                return e[0] == N and e[1] == N and "hostile" in e[2], f"{e[1]}/{e[0]} error rows, e.g. {str(e[2])[:160]}"
            case(f"{mode} model stream", "generate", gen, gen_check)
            srv.shutdown()

        def traps(d: Path) -> Path:
            import re
            md = (ROOT / "docsite" / "PROFILES.md").read_text()
            prof = [b for b in re.findall(r"```toml\n(.*?)```", md, re.S) if "[profiles.traps]" in b][0]
            s = ('[study]\nwarehouse = "wh"\n[[services]]\nname = "traps"\ndisplay = "Traps"\n'
                 f'[[sources]]\nname = "traps"\nkind = "crawl"\nservice = "traps"\nprofile = "traps"\n'
                 f'serve = "{ROOT / "docsite"}"\nbackend = "http"\n{prof}\n'
                 '[stages.crawl]\nrate_limit = 0\ntimeout_secs = 2\nretries = 0\nmax_page_bytes = 2000000\n'
                 '[stages.validate]\nenabled = false\n[stages.score]\nenabled = false\n'
                 '[stages.lint]\nenabled = false\n')
            p = d / "pipeline.toml"
            p.write_text(s)
            return p

        def traps_check(wh: Path, code: int, msg: str):
            if code != 0:
                return False, msg[-300:]
            e = duck(wh, "SELECT COUNT(*), COUNT(error) FROM read_parquet('{wh}/pages/**/*.parquet')")[0]
            return e[1] >= 2, f"{e[0]} pages, {e[1]} recorded as failed (huge, never-loads, missing …)"
        case("crawler traps", "crawl", traps, traps_check)

    table = ["| case | stage | outcome | seconds | peak MiB | within bounds |", "|---|---|---|---|---|---|"]
    for r in results:
        m = r["message"] if isinstance(r["message"], str) else " ".join(r["message"])
        table.append(f"| {r['case']} | {r['stage']} | {m.replace('|', '/')[:220]} | {r['seconds']:.1f} | "
                     f"{r['peak_mib']:.0f} | {'yes' if r['ok'] else 'NO'} |")
    text = "\n".join(table)
    print(text)
    if a.out:
        a.out.write_text(text + "\n")
    return 0 if all(r["ok"] for r in results) else 1


if __name__ == "__main__":
    sys.exit(main())
