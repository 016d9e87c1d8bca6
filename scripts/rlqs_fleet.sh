#!/usr/bin/env bash
# RLQS at fleet scale (docs/benchmarks.md, "RLQS at fleet scale"): one `sluice serve`
# (one worker, pinned to core 0) holding STREAMS streams of one bucket each, opened by the
# raw HTTP/2 client of crates/sluice-server/benches/rlqs_fleet.rs (pinned to core 1), which
# re-reports every stream every 5 s for ROUNDS rounds: spread over the 5 s as a fleet's
# timers are, or all at once with BURST=1, and with HOLD=1 too while the server is stopped
# (SIGSTOP), so that it finds the whole burst waiting (the worst case). Per round: the server's CPU time
# (utime + stime from /proc/PID/stat over the round) and a new stream's time to its first
# assignment, opened in the middle of the spread round or right after the burst; once: the
# server's resident memory per stream (RSS after opening the streams, less RSS before,
# divided by the streams).
# The summary gives the medians of the rounds.
#
# Not run by scripts/test.sh or CI. Needs 2 cores. A process here may not hold more than
# `ulimit -Hn` descriptors (20 000 in some containers): a stream on a connection of its own
# needs one in the server and one in the client, so past that, set PER_CONNECTION to put
# several streams on one HTTP/2 connection (Envoy opens one stream per Envoy).
# Settings (environment): STREAMS (a list, "2000 20000 40000"), PER_CONNECTION (1),
# ROUNDS (5), BURST (0), HOLD (0), LIFETIME (seconds any server may live, 600), SLUICE_BIN (a
# `sluice` binary), FLEET_CLIENT (the load client, built already).
set -euo pipefail
cd "$(dirname "$0")/.."

STREAMS=${STREAMS:-2000 20000 40000}
PER_CONNECTION=${PER_CONNECTION:-1}
ROUNDS=${ROUNDS:-5}
BURST=${BURST:-0}
HOLD=${HOLD:-0}
LIFETIME=${LIFETIME:-600}

fail() { echo "rlqs_fleet.sh: $*" >&2; exit 1; }
[ "$(nproc --all)" -ge 2 ] || fail "needs at least 2 cores (one for the server, one for the load)"
ulimit -n "$(ulimit -Hn)"

[ -n "${SLUICE_BIN:-}" ] || cargo build --release --locked -p sluice-server --bin sluice
SLUICE=${SLUICE_BIN:-$PWD/target/release/sluice}
if [ -z "${FLEET_CLIENT:-}" ]; then
  cargo bench --locked -p sluice-server --bench rlqs_fleet --no-run 2>"${TMPDIR:-/tmp}/rlqs_fleet.build" \
    || { cat "${TMPDIR:-/tmp}/rlqs_fleet.build" >&2; fail "the load client did not build"; }
  FLEET_CLIENT=$(sed -n 's|.*Executable benches/rlqs_fleet.rs (\(.*\))|\1|p' "${TMPDIR:-/tmp}/rlqs_fleet.build")
fi
[ -x "$FLEET_CLIENT" ] || fail "the load client was not found"

# shellcheck source=scripts/processes.sh
source scripts/processes.sh
cp docs/envoy-rlqs-sluice.yaml "$WORK/config.yaml"

for streams in $STREAMS; do
  out="$WORK/server.out"
  : >"$out"
  taskset -c 0 timeout "$LIFETIME" "$SLUICE" serve --config "$WORK/config.yaml" --http 127.0.0.1:0 \
    --grpc 127.0.0.1:0 --snapshot off --workers 1 --max-connections 50000 \
    --max-rlqs-buckets $((streams * 2)) >"$out" 2>"$WORK/server.err" &
  wrapper=$!
  PIDS+=("$wrapper")
  for _ in $(seq 100); do grep -q '^gRPC listening on ' "$out" && break; sleep 0.1; done
  GRPC=$(sed -n 's|^gRPC listening on ||p' "$out")
  [ -n "$GRPC" ] || { cat "$WORK/server.err" >&2; fail "the server did not start"; }
  SERVER_PID=$(pgrep -P "$wrapper")
  SLUICE_FLEET_GRPC=$GRPC SLUICE_FLEET_PID=$SERVER_PID SLUICE_FLEET_STREAMS=$streams \
    SLUICE_FLEET_PER_CONNECTION=$PER_CONNECTION SLUICE_FLEET_ROUNDS=$ROUNDS SLUICE_FLEET_BURST=$BURST SLUICE_FLEET_HOLD=$HOLD \
    taskset -c 1 timeout "$LIFETIME" "$FLEET_CLIENT"
  stop_pid "$SERVER_PID"
  warnings=$(grep -c WARN "$WORK/server.err" || true)
  echo "  server log: $warnings WARN lines" >&2
done
