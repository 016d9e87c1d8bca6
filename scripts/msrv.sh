#!/usr/bin/env bash
# The minimum supported Rust version (MSRV) is Cargo.toml's workspace `rust-version`, which
# the README states. This machine has one toolchain and cannot fetch another, so the MSRV is
# held in two ways that need none: clippy's `incompatible_msrv` lint (on by default, run by
# .ci/run with -D warnings) refuses our own use of std APIs newer than it, and this script
# refuses a locked dependency that declares a newer `rust-version`, or a README that states
# another version.
set -euo pipefail
cd "$(dirname "$0")/.."

msrv=$(sed -n 's/^rust-version = "\(.*\)"/\1/p' Cargo.toml | head -n 1)
if [ -z "$msrv" ]; then
  echo "scripts/msrv.sh: Cargo.toml has no workspace rust-version" >&2
  exit 1
fi
if ! grep -q "Rust $msrv or newer" README.md; then
  echo "scripts/msrv.sh: README.md does not say \"Rust $msrv or newer\" (Cargo.toml's rust-version)" >&2
  exit 1
fi
cargo metadata --format-version 1 --locked | python3 -c '
import json, sys
msrv = sys.argv[1]
def version(text):
    parts = [int(part) for part in text.split(".")][:3]
    return tuple(parts + [0] * (3 - len(parts)))
newer = [
    "%s %s needs Rust %s" % (package["name"], package["version"], package["rust_version"])
    for package in json.load(sys.stdin)["packages"]
    if package.get("rust_version") and version(package["rust_version"]) > version(msrv)
]
if newer:
    print("scripts/msrv.sh: locked dependencies newer than the MSRV %s:" % msrv, *newer, sep="\n  ", file=sys.stderr)
    sys.exit(1)
print("MSRV %s: every locked dependency declares it or older" % msrv)
' "$msrv"
