#!/usr/bin/env bash
# Sets up a fresh machine and runs the default study (pipeline.toml), then prints where the report is.
# Installs only what `doc2ci run` needs (the test peers are the test command's business) and builds
# only the binary, in the release profile: the same binary as `cargo install --path .`.
# Each phase prints `quickstart: PHASE N s` on stderr (bench/fresh.sh reads them).
set -euo pipefail
cd "$(dirname "$0")/.."
export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-$HOME/.cache/doc2ci-target}"
bin="$CARGO_TARGET_DIR/release/doc2ci"

phase() {
    local name=$1 t0=$SECONDS
    shift
    "$@"
    echo "quickstart: $name $((SECONDS - t0)) s" >&2
}

phase deps ./scripts/deps.sh runtime
phase lock ./scripts/lock.sh
phase build cargo build --release --locked --quiet --bin doc2ci
phase setup "$bin" setup
"$bin" plan
phase run "$bin" run
"$bin" status
"$bin" sql "SELECT * FROM pair_counts"
"$bin" sql "SELECT * FROM model_summary"
echo "report: $(pwd)/warehouse/report/index.html"
