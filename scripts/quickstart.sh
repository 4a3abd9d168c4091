#!/usr/bin/env bash
# Sets up a fresh machine and runs the default study (pipeline.toml), then prints where the report is.
# Installs only what `doc2ci run` needs (the test peers are the test command's business) and builds
# only the binary, in the release profile: the same binary as `cargo install --path .`.
set -euo pipefail
cd "$(dirname "$0")/.."
export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-$HOME/.cache/doc2ci-target}"
./scripts/deps.sh runtime
cargo build --release --quiet --bin doc2ci
bin="$CARGO_TARGET_DIR/release/doc2ci"
"$bin" setup
"$bin" plan
"$bin" run
"$bin" status
"$bin" sql "SELECT * FROM pair_counts"
"$bin" sql "SELECT * FROM model_summary"
echo "report: $(pwd)/warehouse/report/index.html"
