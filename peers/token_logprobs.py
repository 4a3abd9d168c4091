"""Reference log-probabilities of real llm4ci references under SmolLM2-135M-Instruct from llama.cpp's own
server (the `xllamacpp` peer): the peer of the embedded kernel's teacher forcing (`Embedded::token_logprobs`),
which Min-K% Prob reads.

llama.cpp's server has no prompt log-probabilities, so each token is asked for on its own: the prompt is
the ids before it, one token is predicted with that token's logit biased to win, and `n_probs` reports
its log-probability under the model's raw logits (before any sampler, the bias included).

Run: python3 -m peers.token_logprobs [gguf] > libs/smollm/tests/data/llamacpp_logprobs.json
(the peer is installed by scripts/deps.sh). The GGUF defaults to $DOC2CI_ASSETS (or
~/.cache/doc2ci/assets)/models/smollm2-135m-instruct/SmolLM2-135M-Instruct.Q4_1.gguf. The texts are the
first TEXTS references of the llm4ci data (in ID order) of 40 to 120 tokens.
"""
import json
import os
import sys
from pathlib import Path

from peers import llama_server
from peers.data import read_csv

TEXTS = 4

assets = os.environ.get("DOC2CI_ASSETS") or os.path.expanduser("~/.cache/doc2ci/assets")
gguf = sys.argv[1] if len(sys.argv) > 1 else os.path.join(
    assets, "models/smollm2-135m-instruct/SmolLM2-135M-Instruct.Q4_1.gguf")
data = Path(__file__).resolve().parents[1].parent / "shared" / "data" / "llm4ci" / "GitHubActions_Docs.csv.gz"

server = llama_server.start(gguf, threads=2)


def post(path, body):
    return llama_server.post(server, path, body)


def tokenize(text):
    return post("/tokenize", {"content": text, "add_special": False, "parse_special": True})["tokens"]


def logprob_of(prefix, token):
    r = post("/completion", {"prompt": prefix, "n_predict": 1, "n_probs": 1, "temperature": 0,
                             "logit_bias": [[token, 100]], "cache_prompt": True})
    p = r["completion_probabilities"][0]
    assert p["id"] == token, (p, token)
    return p["logprob"]


rows = sorted(read_csv(data), key=lambda r: int(r["ID"]))
out = []
for r in rows:
    ids = tokenize(r["Code"])
    if not 40 <= len(ids) <= 120:
        continue
    out.append({"id": r["ID"], "text": r["Code"], "ids": ids,
                "logprobs": [logprob_of(ids[:i], ids[i]) for i in range(1, len(ids))]})
    if len(out) == TEXTS:
        break
json.dump({"model": os.path.basename(gguf), "texts": out}, sys.stdout, indent=1)
print()
