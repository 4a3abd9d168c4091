#!/usr/bin/env bash
# Generation benchmark (issue 5): the bundled default study (pipeline.toml) end to end with the
# embedded SmolLM2 — wall time, generated tokens and tokens/s — and schema-guided repair of real
# invalid outputs ($REPAIR_MODEL, default gemma3-12b, first $REPAIR_N pairs of the llm4ci data) by the embedded model,
# fixed per round. Run once, niced: it keeps both cores busy for minutes (≈ 23 min for the study).
# Env: SECTIONS (default "study repair"), REPAIR_N (default 40), REPAIR_MODEL (default gemma3-12b), KEEP=1 keeps the scratch folder,
#      BENCH_PROFILE (release, as scripts/test.sh and quickstart.sh build it, or dev).
set -euo pipefail
. "$(dirname "$0")/lib.sh"
bench_uncached
SECTIONS="${SECTIONS:-study repair}"
python3 -c "import duckdb" 2>/dev/null || python3 -m pip install -q duckdb
profile="${BENCH_PROFILE:-release}"
cargo build --quiet --profile "$profile" --bin doc2ci
if [ "$profile" = dev ]; then bin="$CARGO_TARGET_DIR/debug/doc2ci"; else bin="$CARGO_TARGET_DIR/$profile/doc2ci"; fi
work=$(mktemp -d)
study=".bench-generate-$$.toml"   # beside pipeline.toml so its relative paths still resolve
trap 'rm -f "$study"; if [ "${KEEP:-0}" = 1 ]; then echo "scratch kept in $work"; else rm -rf "$work"; fi' EXIT
sed "s#^warehouse = .*#warehouse = \"$work/wh\"#" pipeline.toml > "$study"

if [[ " $SECTIONS " == *" study "* ]]; then
s=$(date +%s.%N)
nice -n 10 "$bin" run --quiet --config "$study"
e=$(date +%s.%N)
python3 - "$work/wh" "$s" "$e" <<'PY'
import duckdb, sys
wh, s, e = sys.argv[1], float(sys.argv[2]), float(sys.argv[3])
g = f"read_parquet('{wh}/generations/**/*.parquet', hive_partitioning=true)"
n, toks, secs, err, deg, cap = duckdb.sql(f"""SELECT COUNT(*), SUM(completion_tokens), SUM(latency_ms)/1000, COUNT(error),
  COUNT(*) FILTER (WHERE degenerate), COUNT(*) FILTER (WHERE finish_reason = 'length') FROM {g} WHERE model = 'smollm2'""").fetchall()[0]
v = duckdb.sql(f"SELECT COUNT(*) FILTER (WHERE schema_ok) FROM read_parquet('{wh}/validations/**/*.parquet', hive_partitioning=true) WHERE model = 'smollm2' AND round = 0").fetchall()[0][0]
print(f"default study end to end (pipeline.toml, all stages): {e - s:.1f}s wall")
print(f"smollm2 (embedded): {n} outputs, {toks} tokens generated in {secs:.1f}s of generation → {toks / max(secs, 1e-9):.1f} tokens/s")
print(f"  {err} errors, {deg} degenerate, {cap} hit the token cap, {v} schema-valid")
PY
fi

# Repair of real invalid outputs with the embedded model.
if [[ " $SECTIONS " == *" repair "* ]]; then
n="${REPAIR_N:-40}"
rm_="${REPAIR_MODEL:-gemma3-12b}"
python3 - "$work" "$n" "$rm_" <<'PY'
import csv, gzip, sys
work, n, m = sys.argv[1], int(sys.argv[2]), sys.argv[3]
for src, dst in [("GitHubActions_Docs.csv.gz", "docs.csv"), (f"GitHubActions_{m}_output.csv.gz", "outputs.csv")]:
    with gzip.open(f"../shared/data/llm4ci/{src}", "rt", newline="") as f, open(f"{work}/{dst}", "w", newline="") as o:
        r = csv.reader(f); w = csv.writer(o)
        for i, row in enumerate(r):
            if i > n: break
            w.writerow(row)
PY
cat > "$work/repair.toml" <<TOML
[study]
warehouse = "wh-repair"
[[services]]
name = "github-actions"
display = "GitHub Actions"
[[sources]]
kind = "import"
path = "docs.csv"
service = "github-actions"
[[models]]
name = "$rm_"
backend = "import"
path = "outputs.csv"
[[models]]
name = "smollm2"
backend = "embedded"
max_tokens = 256
services = []
[stages.score]
enabled = false
[stages.repair]
enabled = true
rounds = 3
model = "smollm2"
TOML
s=$(date +%s.%N)
nice -n 10 "$bin" run --quiet --config "$work/repair.toml"
e=$(date +%s.%N)
python3 - "$work/wh-repair" "$s" "$e" "$rm_" <<'PY'
import duckdb, sys
wh, s, e = sys.argv[1], float(sys.argv[2]), float(sys.argv[3])
print(f"repair of real {sys.argv[4]} outputs by smollm2: {e - s:.1f}s")
for r in duckdb.sql(f"SELECT round, total, valid_before, attempted, fixed, still_invalid, errors, valid_after FROM read_parquet('{wh}/repairs/**/*.parquet', hive_partitioning=true) ORDER BY round").fetchall():
    print(f"  round {r[0]}: {r[3]} invalid revisited, {r[4]} fixed, {r[5]} still invalid ({r[6]} backend errors); valid {r[2]} → {r[7]} of {r[1]}")
g = f"read_parquet('{wh}/generations/**/*.parquet', hive_partitioning=true)"
v = f"read_parquet('{wh}/validations/**/*.parquet', hive_partitioning=true)"
changed = duckdb.sql(f"SELECT COUNT(*) FROM {g} WHERE round > 0 AND pair_id IN (SELECT pair_id FROM {v} WHERE round = 0 AND schema_ok)").fetchall()[0][0]
print(f"  valid outputs changed by repair: {changed}")
n, toks, secs = duckdb.sql(f"SELECT COUNT(*), SUM(completion_tokens), SUM(latency_ms)/1000 FROM {g} WHERE round > 0").fetchall()[0]
print(f"  {n} repair generations, {toks} tokens in {secs:.1f}s of generation → {toks / max(secs, 1e-9):.1f} tokens/s")
PY
fi
