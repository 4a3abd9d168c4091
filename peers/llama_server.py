#!/usr/bin/env python3
"""llama.cpp's own OpenAI-compatible HTTP server, serving a GGUF on loopback: the peer of the `openai`
backend tests (libs/llm/tests/server.rs, tests/e2e/generate.rs) and of bench/client.sh.

The server is llama.cpp's C++ `llama-server` code as shipped prebuilt (no native CPU flags) in the pinned
`xllamacpp` wheel that scripts/deps.sh installs: nothing is compiled on the machine, where building
llama.cpp from source took most of a cold CI run.

    python3 -m peers.llama_server --model X.gguf [--port 0] [--threads 1] [--parallel 1] [--alias NAME]

Prints `listening on http://127.0.0.1:PORT` on stdout once it serves (port 0: the OS picks a free one at
bind time, so parallel tests never race for it), then serves until it is killed; it also dies with its
parent, so a test killed with SIGKILL leaves no server behind. `start` and `post` serve the scripts that
use the server in-process (peers/smollm_reference.py, bench/smollm.sh).
"""
import argparse
import ctypes
import json
import signal
import sys
import urllib.request

import xllamacpp as xlc


def start(model: str, port: int = 0, threads: int = 1, parallel: int = 1, ctx: int = 2048,
          alias: str = "smollm2", verbose: bool = False, template: str | None = None) -> "xlc.Server":
    """The server, listening (at `server.listening_address`) until it is deleted or the process ends.
    Chat templates are rendered by llama.cpp's Jinja engine (the server's default, as doc2ci's
    llama-cpp backend runs it); `template`: a Jinja chat template used instead of the GGUF's own."""
    p = xlc.CommonParams()
    p.use_jinja = True
    if template is not None:
        p.chat_template = template
    p.model.path = model
    p.model_alias = {alias}
    p.port = port
    p.n_parallel = parallel
    p.n_ctx = ctx * parallel
    p.cpuparams.n_threads = threads
    p.cpuparams_batch.n_threads = threads
    p.verbosity = 3 if verbose else -1
    return xlc.Server(p)


def post(server: "xlc.Server", path: str, body: dict) -> dict:
    """One JSON request to the server's HTTP API (`/tokenize`, `/apply-template`, `/completion`, ...)."""
    req = urllib.request.Request(server.listening_address + path, data=json.dumps(body).encode(),
                                 headers={"content-type": "application/json"})
    with urllib.request.urlopen(req) as r:
        return json.load(r)


def get(server: "xlc.Server", path: str) -> dict:
    """One GET of the server's HTTP API (`/props`, `/health`, ...)."""
    with urllib.request.urlopen(server.listening_address + path) as r:
        return json.load(r)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--model", required=True)
    ap.add_argument("--port", type=int, default=0)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--parallel", type=int, default=1)
    ap.add_argument("--ctx", type=int, default=2048, help="context per slot")
    ap.add_argument("--alias", default="smollm2")
    ap.add_argument("--verbose", action="store_true")
    a = ap.parse_args()

    # PR_SET_PDEATHSIG: SIGTERM when the process that started us dies, however it dies.
    ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGTERM)

    server = start(a.model, a.port, a.threads, a.parallel, a.ctx, a.alias, a.verbose)
    print(f"listening on {server.listening_address}", flush=True)
    try:
        signal.pause()
    except KeyboardInterrupt:
        pass
    del server


if __name__ == "__main__":
    sys.exit(main())
