#!/usr/bin/env bash
# Crawler benchmark (issue 4): the bundled documentation site (26 pages, four services) crawled
# with the webdriver backend (headless Chromium) and the http backend: pages/s and pairs/s; then
# extraction alone over the cached pages (pages/s) against peers/docsite.py's Python extractor
# (the reference implementation) on the same pages. Run once, niced.
set -euo pipefail
. "$(dirname "$0")/lib.sh"
# DOC2CI_BIN: an already built binary (skips the build).
bin="${DOC2CI_BIN:-$CARGO_TARGET_DIR/release/doc2ci}"
[ -n "${DOC2CI_BIN:-}" ] || flock /tmp/doc2ci-cargo.lock cargo build --quiet --release --bin doc2ci
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

study() { # backend
  {
    printf '[study]\nwarehouse = "wh-%s"\nthreads = 1\n' "$1"
    for s in github-actions circleci gitlab-ci travis-ci; do
      printf '\n[[services]]\nname = "%s"\ndisplay = "%s"\n' "$s" "$s"
      printf '\n[[sources]]\nname = "%s-docs"\nkind = "crawl"\nservice = "%s"\nprofile = "%s"\nserve = "%s"\nbackend = "%s"\n' "$s" "$s" "$s" "$PWD/docsite" "$1"
    done
    python3 - <<'PY'
import re
md = open("docsite/PROFILES.md").read()
print("\n".join(b for b in re.findall(r"```toml\n(.*?)```", md, re.S) if "[profiles.traps]" not in b))
PY
    printf '\n[stages.crawl]\nrate_limit = 0\n[stages.validate]\nenabled = false\n[stages.score]\nenabled = false\n'
  } > "$work/$1.toml"
}

secs() { python3 -c "import sys; print(float(sys.argv[2]) - float(sys.argv[1]))" "$@"; }
count() { "$bin" sql --config "$work/$1.toml" --format csv "$2" | tail -1; }

for backend in http webdriver; do
  study "$backend"
  s=$(date +%s.%N)
  nice -n 10 "$bin" run --quiet --config "$work/$backend.toml" >/dev/null
  e=$(date +%s.%N)
  t=$(secs "$s" "$e")
  pages=$(count "$backend" "SELECT COUNT(*) FROM pages")
  pairs=$(count "$backend" "SELECT COUNT(*) FROM pairs_raw")
  python3 -c "p,q,t=$pages,$pairs,$t; print(f'{\"$backend\":9} crawl+extract: {p} pages, {q} pairs in {t:.2f}s = {p/t:.1f} pages/s, {q/t:.1f} pairs/s (wall time of doc2ci run: process, server and browser start included)')"
done

# Extraction only: a selector change re-runs `extract` over the cached pages, not `crawl`.
best=999
for i in 1 2 3 4 5; do
  sed -i "s/code_blocks = \[\"pre\"\]/code_blocks = [\"pre\", \".noop$i\"]/" "$work/http.toml"
  out=$(nice -n 10 "$bin" run --config "$work/http.toml" 2>&1)
  t=$(echo "$out" | python3 -c "import re,sys; print(sum(float(x) for x in re.findall(r'done extract .*? rows in ([0-9.]+)s', sys.stdin.read())))")
  best=$(python3 -c "print(min($best, $t))")
  sed -i "s/, \".noop$i\"\]/]/" "$work/http.toml"
done
pages=$(count http "SELECT COUNT(*) FROM pages WHERE html IS NOT NULL")
"$bin" sql --config "$work/http.toml" --format jsonl "SELECT requested_url AS url, html FROM pages ORDER BY service, seq" > "$work/pages.jsonl"
peer=$(nice -n 10 python3 - "$work/pages.jsonl" <<'PY'
import json, sys, time
from peers import docsite as check
profiles = check.load_profiles()
pages = [json.loads(l) for l in open(sys.argv[1])]
def prof(url):
    return profiles[url.strip("/").split("/")[0]]
best = 1e9
for _ in range(3):
    t = time.perf_counter()
    for p in pages:
        doc, _ = check.parse_html(p["html"])
        check.extract(doc, prof(p["url"]))
    best = min(best, time.perf_counter() - t)
print(best)
PY
)
python3 -c "
n, us, py = $pages, $best, $peer
print(f'extraction only ({n} cached pages): doc2ci {n/us:.0f} pages/s ({us*1000:.1f} ms, sum over partitions), check.py {n/py:.0f} pages/s ({py*1000:.1f} ms)')
print(f'ratio doc2ci/check.py: {py/us:.1f}x')"
