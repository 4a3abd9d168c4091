#!/usr/bin/env bash
# The crawler on the four documentation sites rendered by their own engines (tests/realdocs, issue 11):
# agreement with the BeautifulSoup reference per site and backend (recall, precision, title and
# description equality), and doc2ci's webdriver crawl against a Selenium crawler in Python like the
# Doc2CI study's (peers/realdocs/selenium_crawl.py; same Chromium, same pages, same extraction), pages per second.
# Needs `scripts/deps.sh test` (the engines, selenium). Env: REPEAT (default 3), DOC2CI_BIN.
set -euo pipefail
. "$(dirname "$0")/lib.sh"
bin="${DOC2CI_BIN:-$CARGO_TARGET_DIR/release/doc2ci}"
[ -n "${DOC2CI_BIN:-}" ] || flock /tmp/doc2ci-cargo.lock cargo build --quiet --release --locked --bin doc2ci
mkdir -p bench/out/realdocs
python3 -m bench.realdocs "$bin" --repeat "${REPEAT:-3}" | tee bench/out/realdocs/summary.txt
