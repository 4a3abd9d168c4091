#!/usr/bin/env bash
# Runs the README's test command (or COMMAND) the way a new machine would: from a fresh clone of the
# current commit, with an empty HOME, CARGO_HOME (no crate cache), CARGO_TARGET_DIR (a cold build) and a
# fresh Python environment (a venv first on PATH, so no peer installed by hand is visible).
# Only the Rust toolchain (RUSTUP_HOME) and Debian's packages are shared with this machine; the
# project's own scripts must install everything else.
#
#   scripts/clean-env.sh [WORKDIR [COMMAND...]]
#
# WORKDIR defaults to a new folder under /tmp; COMMAND (run in the clone) to `bash .ci/run`; its
# output goes to WORKDIR/log. bench/fresh.sh runs the first README command through it.
set -euo pipefail
repo="$(cd "$(dirname "$0")/.." && pwd)"
work="${1:-$(mktemp -d /tmp/doc2ci-clean-XXXXXX)}"
shift || true
[ $# -gt 0 ] || set -- bash .ci/run
mkdir -p "$work"
rev="$(git -C "$repo" rev-parse HEAD)"
echo "clean-env: commit $rev in $work" >&2

git clone -q "$repo" "$work/main"
git -C "$work/main" checkout -q "$rev"
# The tests read the real data from ../shared beside the clone, as on the CI machine.
ln -sfn "$(cd "$repo/../shared" && pwd)" "$work/shared"

export HOME="$work/home"
export CARGO_HOME="$HOME/.cargo"
export CARGO_TARGET_DIR="$HOME/.cache/doc2ci-target"
export PYTHONUSERBASE="$HOME/.local"
export PYTHONNOUSERSITE=1
export RUSTUP_HOME="${RUSTUP_HOME:-/root/.rustup}"
mkdir -p "$HOME"
python3 -m venv "$work/venv"
export PATH="$work/venv/bin:${RUSTUP_HOME%/.rustup}/.cargo/bin:/usr/local/bin:/usr/bin:/bin"
unset DOC2CI_ASSETS DOC2CI_PYTHON

start=$(date +%s)
cd "$work/main"
set +e
"$@" > "$work/log" 2>&1
rc=$?
set -e
echo "clean-env: $* exited $rc after $(( $(date +%s) - start )) s (log: $work/log)" >&2
grep -E '^test result|passed, .* failed' "$work/log" | tail -3 >&2 || true
exit $rc
