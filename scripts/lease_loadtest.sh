#!/usr/bin/env bash
# Leases through `sluice serve`, per algorithm (docs/benchmarks.md, "Leases through the
# service"): one server on one hot key below its limit, on the embedded store, on Redis
# without leases and on Redis with `--lease-period 100ms`, in interleaved rounds.
#
# For each algorithm (a policy whose limit no run reaches: every check is allowed) and each
# round, the three stores are measured in a rotating order: the server pinned to one core
# (`taskset -c 0`), `wrk` (64 keep-alive connections, POST /v1/check on one key) and
# `redis-server` pinned to the other. Each run reports checks/s; for Redis, the store calls
# per check (`sluice_lease_store_calls_total`, or every check unleased). The summary gives the
# median checks/s of each store and the ratios to the embedded store's.
#
# Not run by scripts/test.sh or CI. Needs 2 cores, `wrk` (installed with apt-get when run as
# root), `redis-server` and `redis-cli`. Settings (environment): DURATION (seconds per run, 5),
# ROUNDS (3), ALGORITHMS (a regular expression over the policy names below, default all),
# LIFETIME (seconds any server may live, 600), SLUICE_BIN (a `sluice` binary to measure).
set -euo pipefail
cd "$(dirname "$0")/.."

DURATION=${DURATION:-5}
ROUNDS=${ROUNDS:-3}
ALGORITHMS=${ALGORITHMS:-.}
LIFETIME=${LIFETIME:-600}

need() { command -v "$1" >/dev/null 2>&1; }
fail() { echo "lease_loadtest.sh: $*" >&2; exit 1; }

[ "$(nproc --all)" -ge 2 ] || fail "needs at least 2 cores (one for the server, one for the load)"
if ! need wrk; then
  if [ "$(id -u)" -ne 0 ] || ! need apt-get; then fail "wrk is missing; install it (Debian: apt-get install wrk)"; fi
  apt-get update && DEBIAN_FRONTEND=noninteractive apt-get install -y wrk
fi
need redis-server && need redis-cli || fail "redis-server and redis-cli are missing (Debian: apt-get install redis-server redis-tools)"

[ -n "${SLUICE_BIN:-}" ] || cargo build --release --locked -p sluice-server --bin sluice
SLUICE=${SLUICE_BIN:-$PWD/target/release/sluice}

# shellcheck source=scripts/processes.sh
source scripts/processes.sh

# Every algorithm, each with a limit no run reaches (about 10^7 a second or more).
cat >"$WORK/config.yaml" <<'EOF'
policies:
  fixed_window: {algorithm: fixed_window, limit: 100000000, window: 10s}
  sliding_window: {algorithm: sliding_window, limit: 100000000, window: 10s, buckets: 10}
  sliding_log: {algorithm: sliding_log, limit: 10000000, window: 1s}
  token_bucket: {algorithm: token_bucket, capacity: 100000000, refill_amount: 10000, refill_interval: 1ms}
  leaky_bucket: {algorithm: leaky_bucket, interval: 1us, burst: 100000000}
EOF


REDIS_PORT=$(free_port)
taskset -c 1 timeout "$LIFETIME" redis-server --bind 127.0.0.1 --port "$REDIS_PORT" --save '' --appendonly no \
  --daemonize no --logfile "$WORK/redis.log" &
PIDS+=("$!")
for _ in $(seq 100); do redis-cli -p "$REDIS_PORT" ping >/dev/null 2>&1 && break; sleep 0.1; done

# start_server ARGS...: sets SERVER_PID and HTTP.
start_server() {
  local out="$WORK/server.out"
  : >"$out"
  taskset -c 0 timeout "$LIFETIME" "$SLUICE" serve --config "$WORK/config.yaml" --http 127.0.0.1:0 \
    --grpc 127.0.0.1:0 --snapshot off --workers 1 "$@" >"$out" 2>"$WORK/server.err" &
  local wrapper=$!
  PIDS+=("$wrapper")
  for _ in $(seq 100); do grep -q '^HTTP listening on ' "$out" && break; sleep 0.1; done
  HTTP=$(sed -n 's|^HTTP listening on http://||p' "$out")
  [ -n "$HTTP" ] || { cat "$WORK/server.err" >&2; fail "the server did not start"; }
  SERVER_PID=$(pgrep -P "$wrapper")
}

metric() { curl -sf "http://$HTTP/metrics" | awk -v name="$1" '$1 == name {print $2}'; }

# run STORE POLICY: one run; prints "checks_per_s calls_per_check".
run() {
  local store=$1 policy=$2 args=()
  case $store in
    embedded) args=() ;;
    redis) args=(--store "redis://127.0.0.1:$REDIS_PORT") ;;
    leased) args=(--store "redis://127.0.0.1:$REDIS_PORT" --lease-period 100ms) ;;
  esac
  start_server "${args[@]}"
  cat >"$WORK/hot.lua" <<EOF
wrk.method = "POST"
wrk.headers["Content-Type"] = "application/json"
wrk.body = '{"key":"hot-$store-$RANDOM","policies":["$policy"],"cost":1}'
function done(summary, latency, requests)
  io.write(string.format("checks=%d errors=%d per_s=%.0f\n", summary.requests,
    summary.errors.status + summary.errors.connect + summary.errors.read + summary.errors.timeout,
    summary.requests / (summary.duration / 1e6)))
end
EOF
  local line checks per_s calls
  line=$(taskset -c 1 wrk -t1 -c64 -d"${DURATION}s" --timeout 5s -s "$WORK/hot.lua" "http://$HTTP/v1/check" | tail -1)
  checks=$(sed -n 's/.*checks=\([0-9]*\).*/\1/p' <<<"$line")
  per_s=$(sed -n 's/.*per_s=\([0-9]*\).*/\1/p' <<<"$line")
  grep -q 'errors=0 ' <<<"$line" || fail "$store $policy: $line"
  case $store in
    embedded) calls=0 ;;
    redis) calls=1 ;;
    leased) calls=$(awk -v c="$(metric sluice_lease_store_calls_total)" -v n="$checks" 'BEGIN {printf "%.4f", c / n}') ;;
  esac
  stop_pid "$SERVER_PID"
  echo "$per_s $calls"
}

median() { sort -n | awk '{a[NR] = $1} END {print (NR % 2) ? a[(NR + 1) / 2] : (a[NR / 2] + a[NR / 2 + 1]) / 2}'; }

STORES=(embedded redis leased)
printf '%-15s %12s %12s %12s %10s %10s %14s\n' algorithm embedded/s redis/s leased/s 'leased÷emb' 'redis÷emb' 'calls/check'
for policy in fixed_window sliding_window sliding_log token_bucket leaky_bucket; do
  [[ $policy =~ $ALGORITHMS ]] || continue
  : >"$WORK/embedded" && : >"$WORK/redis" && : >"$WORK/leased"
  for round in $(seq "$ROUNDS"); do
    for turn in 0 1 2; do
      store=${STORES[$(((round + turn) % 3))]}
      read -r per_s calls < <(run "$store" "$policy")
      echo "$per_s $calls" >>"$WORK/$store"
      echo "  $policy round $round $store: $per_s checks/s, $calls store calls per check" >&2
    done
  done
  embedded=$(cut -d' ' -f1 "$WORK/embedded" | median)
  redis=$(cut -d' ' -f1 "$WORK/redis" | median)
  leased=$(cut -d' ' -f1 "$WORK/leased" | median)
  calls=$(cut -d' ' -f2 "$WORK/leased" | median)
  awk -v p="$policy" -v e="$embedded" -v r="$redis" -v l="$leased" -v c="$calls" \
    'BEGIN {printf "%-15s %12.0f %12.0f %12.0f %10.2f %10.2f %14.4f\n", p, e, r, l, l / e, r / e, c}'
done
