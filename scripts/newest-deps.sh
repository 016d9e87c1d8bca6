#!/usr/bin/env bash
# Builds the library crates against the newest dependency versions their manifests allow,
# what a new project that depends on them resolves, and runs the core's and the tower
# layer's unit tests, with warnings as errors. Cargo.lock pins older versions, so the rest
# of CI never sees a deprecation or a break that such a project meets (rustls 0.23.48
# deprecated the call Sluice made while the lock pinned 0.23.46).
#
# Works on a copy of the tree (the files git knows, as they are now) in
# target/newest-deps/tree, whose Cargo.lock `cargo update` rewrites; the tree's own
# Cargo.lock is never touched. Builds go to target/newest-deps/target, apart from the
# locked builds. The resolver honours the workspace's rust-version (resolver 3), as it
# would for a project with the same one. Needs crates.io.
set -euo pipefail
cd "$(dirname "$0")/.."

root=$(pwd)
work="$root/target/newest-deps"
tree="$work/tree"
rm -rf "$tree"
mkdir -p "$tree"
# The files git knows, with their changes, and the ones it would add (not target/).
git ls-files -z --cached --others --exclude-standard \
  | tar --null --files-from=- --ignore-failed-read -cf - 2>/dev/null \
  | tar -xf - -C "$tree"

cd "$tree"
cargo update 2>"$work/update.log" || { cat "$work/update.log" >&2; exit 1; }
grep -E '^ *(Updating|Adding|Removing|Downgrading) [a-z]' "$work/update.log" || true

libraries=(-p sluice-config -p sluice-core -p sluice-redis -p sluice-tower)
export CARGO_TARGET_DIR="$work/target" RUSTFLAGS="-D warnings"
echo "scripts/newest-deps.sh: building the libraries (every feature) against the newest dependencies"
cargo build "${libraries[@]}" --all-features --lib
echo "scripts/newest-deps.sh: the core's and the tower layer's unit tests"
cargo test -p sluice-core -p sluice-tower --all-features --lib
