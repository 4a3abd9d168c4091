#!/usr/bin/env bash
# Embedded-model throughput: doc2ci-smollm (candle, Q8_0 weights) vs llama.cpp (its own server, in-process
# through the xllamacpp peer; the GGUF's own Q4_1 weights), greedy on the study prompt, 128 new tokens; prefill and generation tokens/s.
# Needs: `doc2ci setup` (the GGUF), scripts/deps.sh (xllamacpp). Env: MAX_TOKENS (default 128),
# THREADS (llama.cpp threads, default 2 = this machine's cores; candle uses all cores),
# BATCHES (batch sizes for the aggregate figure, default "4 8"),
# PROFILE (release = what `doc2ci run` is built with by scripts/test.sh and quickstart.sh, or dev).
set -euo pipefail
. "$(dirname "$0")/lib.sh"
bench_uncached
bench_assets
K="${MAX_TOKENS:-128}"; THREADS="${THREADS:-2}"

PROFILE="${PROFILE:-release}"
flock /tmp/doc2ci-cargo.lock cargo build --profile "$PROFILE" -q -p doc2ci-smollm --example bench_smollm
dir=$([ "$PROFILE" = dev ] && echo debug || echo "$PROFILE")
OURS=$("$CARGO_TARGET_DIR/$dir/examples/bench_smollm" "$GGUF" --max-tokens "$K")
echo "ours: $OURS"
PEER=$(python3 - "$GGUF" "$K" "$THREADS" <<'PY'
import json, sys, time
from peers import llama_server
import xllamacpp as xlc
gguf, k, threads = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
srv = llama_server.start(gguf, threads=threads)
def post(path, body):
    return llama_server.post(srv, path, body)
task = ("Given the description below, generate a minimal and single valid GitHub Actions YAML configuration. Do not provide any reasoning. Only output the single YAML configuration, with no comments, markdown, or extra formatting. The YAML must match the described task exactly. Do not add any unneeded directives unless told.")
pair = ("About workflows - Advanced workflow features - Creating dependent jobs: This section briefly describes some of the advanced features of GitHub Actions that help you create more complex workflows. By default, the jobs in your workflow all run in parallel at the same time. If you have a job that must only run after another job has completed, you can use the needs keyword to create this dependency. If one of the jobs fails, all dependent jobs are skipped; however, if you need the jobs to continue, you can define this using the if conditional statement.")
msgs = [{"role": "system", "content": "You are a highly skilled software developer and DevOps engineer."},
        {"role": "user", "content": f"{task}\n\n{pair}"}]
prompt = post("/apply-template", {"messages": msgs})["prompt"]
ids = post("/tokenize", {"content": prompt, "add_special": False, "parse_special": True})["tokens"]
def run(n):
    # cache_prompt off: every run prefills the whole prompt, as ours does.
    t = time.perf_counter()
    r = post("/completion", {"prompt": ids, "n_predict": n, "temperature": 0.0, "top_k": 1, "repeat_penalty": 1.0, "cache_prompt": False})
    return time.perf_counter() - t, r["timings"]["predicted_n"]
prefill = min(run(1)[0] for _ in range(3))
total, c = min(run(k) for _ in range(3))
print(json.dumps({"backend": f"llama.cpp server (xllamacpp {xlc.__version__}, Q4_1)", "prompt_tokens": len(ids), "completion_tokens": c,
                  "prefill_s": round(prefill, 3), "total_s": round(total, 3),
                  "prompt_tokens_per_s": round(len(ids) / prefill, 1), "gen_tokens_per_s": round((c - 1) / (total - prefill), 1),
                  "end_to_end_tokens_per_s": round(c / total, 1)}))
PY
)
echo "peer: $PEER"
python3 - "$OURS" "$PEER" <<'PY'
import json, sys
o, p = json.loads(sys.argv[1]), json.loads(sys.argv[2])
print(f"generation: ours {o['gen_tokens_per_s']} tok/s, llama.cpp {p['gen_tokens_per_s']} tok/s, ratio {o['gen_tokens_per_s'] / p['gen_tokens_per_s']:.2f}x")
print(f"prefill: ours {o['prompt_tokens_per_s']} tok/s, llama.cpp {p['prompt_tokens_per_s']} tok/s, ratio {o['prompt_tokens_per_s'] / p['prompt_tokens_per_s']:.2f}x")
PY
# Each decoding kernel this CPU has, forced (DOC2CI_KERNEL), against the same llama.cpp figure: an
# AVX2 machine runs the avx2 row, an old or non-x86 one the scalar row.
for kernel in avx512 avx2 scalar; do
  K_OURS=$(DOC2CI_KERNEL=$kernel "$CARGO_TARGET_DIR/$dir/examples/bench_smollm" "$GGUF" --max-tokens "$K" 2>/dev/null) || { echo "kernel $kernel: not on this CPU"; continue; }
  python3 - "$kernel" "$K_OURS" "$PEER" <<'PY'
import json, sys
k, o, p = sys.argv[1], json.loads(sys.argv[2]), json.loads(sys.argv[3])
print(f"kernel {k}: generation {o['gen_tokens_per_s']} tok/s, llama.cpp {p['gen_tokens_per_s']} tok/s, ratio {o['gen_tokens_per_s'] / p['gen_tokens_per_s']:.2f}x")
PY
done
# A partition's pairs decoded together (continuous batching in the backend; here the same batch API):
# aggregate tokens/s of BATCH answers one after another against the same answers decoded in one batch.
# The prompts are the study's for real llm4ci pairs (`Title: Description`), so they share only the
# system prompt and the instructions, as a partition's prompts do: the 8 at the description-length
# quantiles 1/16, 3/16, …, 15/16, so a partition's spread of lengths, not one outlier, sets the mix.
PAIRS="${PAIRS:-../shared/data/llm4ci/GitHubActions_Docs.csv.gz}"
DESCS=$(mktemp); trap 'rm -f "$DESCS"' EXIT
python3 - "$PAIRS" "$DESCS" <<'PY'
import csv, gzip, io, json, sys
rows = list(csv.DictReader(io.TextIOWrapper(gzip.open(sys.argv[1]), encoding="utf-8")))
rows.sort(key=lambda r: (len(r["Description"]), r["ID"]))
picked = [rows[(2 * i + 1) * len(rows) // 16] for i in range(8)]
json.dump([f"{r['Title']}: {r['Description']}" for r in picked], open(sys.argv[2], "w"))
PY
for b in ${BATCHES:-4 8}; do
  for reuse in "" --no-prefix-reuse; do
  # shellcheck disable=SC2086
  AGG=$("$CARGO_TARGET_DIR/$dir/examples/bench_smollm" "$GGUF" --max-tokens "$K" --batch "$b" --descriptions "$DESCS" $reuse)
  echo "batched: $AGG"
  python3 - "$AGG" <<'PY'
import json, sys
a = json.loads(sys.argv[1])
print(f"aggregate, {a['batch']} sequences: one at a time {a['one_at_a_time_tokens_per_s']} tok/s, "
      f"batched {a['batched_tokens_per_s']} tok/s, ratio {a['ratio']}x (same tokens: {a['same_tokens']}; "
      f"prefix reuse {'on' if a['prefix_reuse'] else 'off'}, {a['reused_positions_per_pass']} positions reused per pass); "
      f"prefill {a['prefill_s']} s of each pass, decoding alone {a['decode_ratio']}x")
PY
  done
done
