"""Every peer and reference the tests and benchmarks compare doc2ci with, as one package.

Each module is run from the repository root as ``python3 -m peers.<module>`` (the Rust tests do
exactly that) and imports the others normally (``from peers.realdocs import fences``):

- validity, lint, metrics (+ metric_cases, rouge_ignite, gawd), stats, stats_check, kappa_check,
  duckdb_check: the peers of the validate, lint, score and stats stages and of the warehouse.
- llama_server, batch_server, s3_server: the real servers the backends and the mirror are tested
  against (llama.cpp's own server, an OpenAI-style batch API, an S3-compatible store).
- docsite: the bundled site's reference crawl and golden pairs; realdocs: the real sites'
  renderers, the BeautifulSoup reference extractor, Chromium's own tree, the extraction fuzz.
- predecessor, stats_timed, embed_reference, smollm_reference: the predecessor study's pipeline
  and the reference outputs committed beside the embedder and the embedded model.
"""

from pathlib import Path

#: The repository root.
ROOT = Path(__file__).resolve().parent.parent
#: The real data of the study (next to the repository), the default input of the data peers.
LLM4CI = ROOT.parent / "shared" / "data" / "llm4ci"
