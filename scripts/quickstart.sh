#!/usr/bin/env bash
# Sets up a fresh machine and runs the default study (pipeline.toml), then prints a summary.
set -euo pipefail
cd "$(dirname "$0")/.."
export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-$HOME/.cache/doc2ci-target}"
./scripts/deps.sh
# The same build as the test suite's `cargo test --workspace` (same feature set: one warm cache serves both).
cargo build --quiet --workspace --tests
bin="$CARGO_TARGET_DIR/debug/doc2ci"
"$bin" setup
"$bin" plan
"$bin" run
"$bin" status
"$bin" sql "SELECT * FROM pair_counts"
"$bin" sql "SELECT * FROM model_summary"
echo "report: $(pwd)/warehouse/report/index.html"
