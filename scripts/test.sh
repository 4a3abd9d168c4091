#!/usr/bin/env bash
# The whole test suite, as CI runs it: dependencies, the pinned crate versions, a check that every peer
# the tests compare against imports, assets, then every crate's tests in the one optimised (release) build.
#
# `--quick`: the developers' loop: every crate's unit tests (the `src/` tests, the engine's
# included) in the same optimised build, without the test targets that run the peers, the browser,
# model servers or whole studies (`tests/`). CI runs the whole suite.
set -euo pipefail
cd "$(dirname "$0")/.."
export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-$HOME/.cache/doc2ci-target}"
if [ "${1:-}" = "--quick" ]; then
  ./scripts/lock.sh
  cargo fmt --all --check
  exec cargo test --release --workspace --locked --lib 2>&1
fi
./scripts/deps.sh test
./scripts/lock.sh
# Formatting: every module is declared where rustfmt sees it (the registries only list them).
cargo fmt --all --check
# clippy on everything, tests included; what the project allows is in Cargo.toml's [workspace.lints].
cargo clippy --workspace --all-targets --locked --quiet -- -D warnings
# A test that finds a peer missing fails instead of falling back to recorded results.
export DOC2CI_REQUIRE_PEERS=1
python3 scripts/check_peers.py
cargo test --release --workspace --locked --no-run --quiet
"$CARGO_TARGET_DIR/release/doc2ci" setup --quiet
cargo test --release --workspace --locked --no-fail-fast 2>&1
