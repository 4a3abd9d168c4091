#!/usr/bin/env bash
# Client overhead: doc2ci-llm's `openai` backend vs the `openai` Python client (AsyncOpenAI + asyncio) against the
# same local llama.cpp server (peers/llama_server.py) serving SmolLM2-135M, same concurrency, max_tokens 1 so the
# client's share of each request shows. Prints requests/s of both and the ratio (ours / peer), and the client
# process's own CPU time per request (the overhead proper: requests/s converge on the server's limit).
#
# Needs: `doc2ci setup` (the GGUF), scripts/deps.sh (xllamacpp, openai).
# Env: REQUESTS (per side, default 300), CONCURRENCY (default 4), MAX_TOKENS (default 1), ROUNDS (default 2,
#      sides alternate, best kept).
set -euo pipefail
. "$(dirname "$0")/lib.sh"
bench_uncached
bench_assets
N="${REQUESTS:-2000}"; C="${CONCURRENCY:-4}"; K="${MAX_TOKENS:-1}"; ROUNDS="${ROUNDS:-3}"

flock /tmp/doc2ci-cargo.lock cargo build --release -q -p doc2ci-llm --example bench_client
LOG=$(mktemp)
python3 -m peers.llama_server --model "$GGUF" --alias smollm2 --threads 1 --parallel "$C" >"$LOG" &
SERVER=$!
trap 'kill $SERVER 2>/dev/null || true; rm -f "$LOG"' EXIT
for _ in $(seq 300); do grep -q "listening on" "$LOG" && break; sleep 0.2; done
URL="$(sed -n 's/^listening on //p' "$LOG")/v1"

peer() {
python3 - "$URL" "$N" "$C" "$K" <<'PY'
import asyncio, json, sys, time
from openai import AsyncOpenAI
url, n, c, k = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])
async def main():
    client = AsyncOpenAI(base_url=url, api_key="none", max_retries=0)
    sem = asyncio.Semaphore(c)
    async def one():
        async with sem:
            r = await client.chat.completions.create(model="smollm2", messages=[{"role": "user", "content": "Hi"}],
                                                     temperature=0, max_tokens=k)
            return r.usage.completion_tokens
    await one()
    cpu, t = time.process_time(), time.perf_counter()
    toks = sum(await asyncio.gather(*[one() for _ in range(n)]))
    s, cpu = time.perf_counter() - t, time.process_time() - cpu
    print(json.dumps({"client": "openai-python asyncio", "requests": n, "concurrency": c, "seconds": round(s, 3),
                      "requests_per_s": round(n / s, 2), "client_cpu_ms_per_request": round(cpu * 1e3 / n, 4), "completion_tokens": toks}))
asyncio.run(main())
PY
}
best_ours=0; best_peer=0; cpu_ours=1e9; cpu_peer=1e9
for r in $(seq "$ROUNDS"); do
  O=$("$CARGO_TARGET_DIR/release/examples/bench_client" "$URL" --requests "$N" --concurrency "$C" --max-tokens "$K")
  P=$(peer)
  echo "round $r: $O"; echo "round $r: $P"
  best_ours=$(python3 -c "import json,sys; print(max($best_ours, json.loads(sys.argv[1])['requests_per_s']))" "$O")
  best_peer=$(python3 -c "import json,sys; print(max($best_peer, json.loads(sys.argv[1])['requests_per_s']))" "$P")
  cpu_ours=$(python3 -c "import json,sys; print(min($cpu_ours, json.loads(sys.argv[1])['client_cpu_ms_per_request']))" "$O")
  cpu_peer=$(python3 -c "import json,sys; print(min($cpu_peer, json.loads(sys.argv[1])['client_cpu_ms_per_request']))" "$P")
done
echo "doc2ci-llm: $best_ours req/s; openai-python asyncio: $best_peer req/s (concurrency $C, max_tokens $K, $N requests)"
python3 -c "print(f'ratio (ours / peer): {$best_ours / $best_peer:.2f}x (both wait on the one llama.cpp server)')"
echo "client CPU per request: doc2ci-llm $cpu_ours ms, openai-python $cpu_peer ms"
python3 -c "print(f'overhead ratio (peer CPU / ours): {$cpu_peer / max($cpu_ours, 1e-9):.1f}x')"
