#!/usr/bin/env bash
# Installs what doc2ci and its tests need beyond the Rust toolchain: Debian packages and the
# Python peers the differential tests compare against. Idempotent; safe to re-run.
set -euo pipefail
cd "$(dirname "$0")/.."

# chromium + chromium-driver: the crawler's webdriver backend (headless, driven by chromedriver);
# time: GNU time, the benchmarks' peak-memory figures.
APT_PACKAGES=(pkg-config chromium chromium-driver time)
# The peers of the differential tests (torch-based ones are not here: their outputs are committed).
PIP_PACKAGES=(
  duckdb==2.0.1
  ruamel.yaml==0.19.1 jsonschema==4.26.0 check-jsonschema==0.39.0
  sacrebleu==2.6.0 zss==1.2.0 rapidfuzz==3.14.6 crystalbleu==0.2 nltk==3.10.4
  html5lib==1.1
  scipy==1.17.1 statsmodels==0.15.0 scikit-learn==1.9.1 numpy==2.4.6
)

missing=()
for p in "${APT_PACKAGES[@]}"; do
  dpkg -s "$p" >/dev/null 2>&1 || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  echo "deps: apt-get install ${missing[*]}" >&2
  apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${missing[@]}" >/dev/null
fi

need_pip=0
for p in "${PIP_PACKAGES[@]}"; do
  name="${p%%[=<>]*}"
  python3 -m pip show -q "$name" >/dev/null 2>&1 || need_pip=1
done
if [ "$need_pip" = 1 ]; then
  echo "deps: pip install ${PIP_PACKAGES[*]}" >&2
  python3 -m pip install -q --disable-pip-version-check "${PIP_PACKAGES[@]}"
fi

# Model backends (issue 5): llama.cpp's OpenAI-compatible server and the `openai` client, the peers of the
# doc2ci-llm/doc2ci-smollm tests and bench/client.sh. pip builds llama.cpp from source: it needs cmake and a C++
# compiler, and must not use native CPU flags (its AMX kernel crashes in this VM; SPEC §9).
LLM_APT=(cmake build-essential)
llm_missing=()
for p in "${LLM_APT[@]}"; do
  dpkg -s "$p" >/dev/null 2>&1 || llm_missing+=("$p")
done
if [ ${#llm_missing[@]} -gt 0 ]; then
  echo "deps: apt-get install ${llm_missing[*]}" >&2
  apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${llm_missing[@]}" >/dev/null
fi
if ! python3 -c 'import llama_cpp, llama_cpp.server, openai; assert llama_cpp.__version__ == "0.3.36"' >/dev/null 2>&1; then
  echo "deps: pip install llama-cpp-python[server]==0.3.36 openai==3.57.0 (builds llama.cpp, several minutes)" >&2
  CMAKE_ARGS="-DGGML_NATIVE=OFF" python3 -m pip install -q --disable-pip-version-check \
    "llama-cpp-python[server]==0.3.36" openai==3.57.0
fi
