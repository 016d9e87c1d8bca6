#!/usr/bin/env bash
# Installs what the tests need, then runs the whole test suite (unit, integration,
# property and doc tests) of every crate in the workspace.
set -euo pipefail
cd "$(dirname "$0")/.."

need() { command -v "$1" >/dev/null 2>&1; }

if ! need cargo; then
  echo "scripts/test.sh: cargo is missing; install Rust from https://rustup.rs" >&2
  exit 1
fi

# Nothing outside the Rust toolchain is needed yet: the embedded store is in-process.
# (The Redis store's tests will install redis-server here.)

cargo test --workspace --all-targets --locked "$@"
cargo test --workspace --doc --locked "$@"
