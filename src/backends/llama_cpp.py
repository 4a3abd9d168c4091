"""llama.cpp's own server for doc2ci's `llama-cpp` backend (src/backends/llama_cpp.rs starts it).

The server is llama.cpp's C++ server code in the pinned xllamacpp wheel that `doc2ci setup` unpacks;
it listens on a loopback port the OS picks. One argument, JSON: model, threads, parallel, ctx (per
slot), alias, template (None: the GGUF's own) and jinja. Prints one JSON line once it serves ({"url", "version"}), then serves until its
standard input ends: doc2ci holds the other end for as long as it lives, so however doc2ci ends
(a normal exit, a crash, kill -9) the server ends with it.
"""
import ctypes
import json
import os
import signal
import sys

# PR_SET_PDEATHSIG as well: the kernel ends us if the thread that started us ends.
ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGKILL)

import xllamacpp as xlc  # noqa: E402  (after the death signal: importing takes a moment)

a = json.loads(sys.argv[1])
p = xlc.CommonParams()
p.model.path = a["model"]
p.model_alias = {a["alias"]}
p.port = 0
p.n_parallel = a["parallel"]
p.n_ctx = a["ctx"] * a["parallel"]
p.cpuparams.n_threads = a["threads"]
p.cpuparams_batch.n_threads = a["threads"]
# The GGUF's own chat template (Jinja, as llama.cpp renders it), else the one the user chose: a
# Jinja text, or a built-in by name (which llama.cpp knows only outside Jinja mode).
p.use_jinja = a["jinja"]
if a["template"] is not None:
    p.chat_template = a["template"]
p.verbosity = -1
try:
    server = xlc.Server(p)
except Exception as e:  # a file llama.cpp cannot load: its own words, on stderr
    print(f"llama.cpp could not load {a['model']}: {e}", file=sys.stderr, flush=True)
    os._exit(3)
print(json.dumps({"url": server.listening_address, "version": xlc.__version__}), flush=True)
while sys.stdin.buffer.read(65536):
    pass
os._exit(0)
