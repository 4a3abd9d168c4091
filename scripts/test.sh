#!/usr/bin/env bash
# The whole test suite, as CI runs it: dependencies, assets, then every crate's tests.
set -euo pipefail
cd "$(dirname "$0")/.."
export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-$HOME/.cache/doc2ci-target}"
./scripts/deps.sh
# The same build as `cargo test --workspace` below (same feature set, so one warm cache serves both).
cargo build --quiet --workspace --tests
"$CARGO_TARGET_DIR/debug/doc2ci" setup --quiet
cargo test --workspace --no-fail-fast 2>&1
