#!/usr/bin/env bash
# Cargo.lock from the committed pins, so every machine builds the very crate versions CI tested.
#   lock.sh            write Cargo.lock from Cargo.lock.pins (a no-op when they already agree)
#   lock.sh --update   resolve the newest compatible versions (`cargo update`) and record them as the pins
# Cargo.lock.pins is Cargo.lock with every registry source written as `source = "registry"`: the lockfile
# names the registry's address, which the repository does not; cargo supplies it on the machine (it
# resolves a throwaway crate once to learn the source id of its default registry).
set -euo pipefail
cd "$(dirname "$0")/.."
pins=Cargo.lock.pins
strip() { sed -E 's|^source = "registry\+[^"]*"$|source = "registry"|' "$1"; }

if [ "${1:-}" = --update ]; then
  cargo update --quiet
  strip Cargo.lock > "$pins"
  echo "lock: $(grep -c '^name = ' "$pins") packages pinned in $pins" >&2
  exit 0
fi

[ -f "$pins" ] || { echo "lock: $pins is missing" >&2; exit 1; }
if [ -f Cargo.lock ] && cmp -s <(strip Cargo.lock) "$pins"; then exit 0; fi

tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT
mkdir -p "$tmp/src"
printf '[package]\nname = "probe"\nversion = "0.0.0"\nedition = "2021"\n\n[dependencies]\nitoa = "1"\n' > "$tmp/Cargo.toml"
: > "$tmp/src/lib.rs"
cargo generate-lockfile --quiet --manifest-path "$tmp/Cargo.toml"
source_id="$(sed -n 's/^source = "\(registry+[^"]*\)"$/\1/p' "$tmp/Cargo.lock" | head -n 1)"
[ -n "$source_id" ] || { echo "lock: cargo named no registry source" >&2; exit 1; }
sed "s|^source = \"registry\"$|source = \"$source_id\"|" "$pins" > Cargo.lock
echo "lock: Cargo.lock written from $pins ($(grep -c '^name = ' "$pins") packages)" >&2
