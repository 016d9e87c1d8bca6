#!/usr/bin/env bash
# End-to-end load test of the tower layer (docs/benchmarks.md, "Over a real socket"): five
# of the overhead benches' apps (crates/sluice-tower/examples/overhead_server.rs)
# served one at a time on one core (`taskset -c 0`, a current-thread runtime) and driven by
# `wrk` from the other core (`taskset -c 1`) over loopback keep-alive connections.
#
# Each run reports requests/s and the server's CPU time per request (utime + stime of the
# server process from /proc/PID/stat, before and after wrk, divided by wrk's completed
# requests). The variants are alternated in each round, ROUNDS rounds; the summary gives each
# variant's medians and its CPU per request over the bare route's.
#
# Not run by scripts/test.sh or CI. Needs 2 cores and `wrk` (installed with apt-get when run
# as root). Settings (environment): DURATION (seconds per run, 5), ROUNDS (5), CONNECTIONS
# (32), LIFETIME (seconds a server may live, 120).
set -euo pipefail
cd "$(dirname "$0")/.."

DURATION=${DURATION:-5}
ROUNDS=${ROUNDS:-5}
CONNECTIONS=${CONNECTIONS:-32}
LIFETIME=${LIFETIME:-120}
VARIANTS=(no_limiter sluice_tower_no_fields tower_governor sluice_tower tower_governor_headers)

fail() { echo "tower_loadtest.sh: $*" >&2; exit 1; }  # the EXIT trap stops a running server
need() { command -v "$1" >/dev/null 2>&1; }

need taskset || fail "taskset is missing (util-linux)"
need curl || fail "curl is missing"
need pgrep || fail "pgrep is missing (procps)"
if ! need wrk; then
  if [ "$(id -u)" -ne 0 ] || ! need apt-get; then fail "wrk is missing; install it (Debian: apt-get install wrk)"; fi
  echo "tower_loadtest.sh: installing wrk with apt-get" >&2
  apt-get update && DEBIAN_FRONTEND=noninteractive apt-get install -y wrk
fi

cargo build --release --locked -p sluice-tower --example overhead_server
SERVER=target/release/examples/overhead_server
WORK=$(mktemp -d)
SERVER_PID=""
cleanup() {
  if [ -n "$SERVER_PID" ]; then kill "$SERVER_PID" 2>/dev/null || true; fi
  rm -rf "$WORK"
}
trap cleanup EXIT

free_port() { python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'; }
cpu_ticks() { sed 's/.*) //' "/proc/$1/stat" | awk '{print $12 + $13}'; }
TICKS_PER_SECOND=$(getconf CLK_TCK)

# One run of VARIANT: appends "VARIANT requests/s µs-of-server-CPU-per-request" to runs.txt.
# Called in this shell, not in a pipeline, so that a failure reaches the EXIT trap with the
# server's PID.
run() {
  local variant=$1 port
  port=$(free_port)
  ADDR="127.0.0.1:$port" taskset -c 0 timeout "$LIFETIME" "$SERVER" "$variant" >"$WORK/server.log" 2>&1 &
  SERVER_PID=$!
  for _ in $(seq 100); do
    curl -fs "http://127.0.0.1:$port/" >/dev/null 2>&1 && break
    kill -0 "$SERVER_PID" 2>/dev/null || fail "$variant did not start: $(cat "$WORK/server.log")"
    sleep 0.1
  done
  curl -fs "http://127.0.0.1:$port/" >/dev/null || fail "$variant does not answer on port $port"
  # `timeout` runs the server as its child: the CPU time to read is the child's.
  local server before after
  server=$(pgrep -P "$SERVER_PID" | head -1)
  [ -n "$server" ] || fail "$variant: no server process under timeout ($SERVER_PID)"
  before=$(cpu_ticks "$server")
  taskset -c 1 wrk -t1 -c"$CONNECTIONS" -d"${DURATION}s" "http://127.0.0.1:$port/" >"$WORK/wrk.txt"
  after=$(cpu_ticks "$server")
  kill "$SERVER_PID"; wait "$SERVER_PID" 2>/dev/null || true; SERVER_PID=""
  local requests non2xx
  requests=$(awk '/requests in/ {print $1}' "$WORK/wrk.txt")
  non2xx=$(awk '/Non-2xx/ {print $NF}' "$WORK/wrk.txt")
  [ -z "$non2xx" ] || fail "$variant answered $non2xx requests with an error status"
  awk -v v="$variant" -v n="$requests" -v d="$DURATION" -v t=$((after - before)) -v hz="$TICKS_PER_SECOND" \
    'BEGIN { printf "%s %.0f %.3f\n", v, n / d, t / hz / n * 1e6 }' >>"$WORK/runs.txt"
}

for round in $(seq "$ROUNDS"); do
  for variant in "${VARIANTS[@]}"; do
    run "$variant"
    tail -1 "$WORK/runs.txt"
  done
  echo "-- round $round of $ROUNDS done" >&2
done

echo
echo "medians over $ROUNDS rounds: requests/s, server CPU µs per request, and over the bare route"
awk '
  { rps[$1] = rps[$1] " " $2; cpu[$1] = cpu[$1] " " $3; order[$1] = order[$1] ? order[$1] : ++count }
  function median(list,   n, values, i, j, swap) {
    n = split(list, values, " ")
    for (i = 1; i <= n; i++) for (j = i + 1; j <= n; j++) if (values[j] < values[i]) { swap = values[i]; values[i] = values[j]; values[j] = swap }
    return n % 2 ? values[(n + 1) / 2] : (values[n / 2] + values[n / 2 + 1]) / 2
  }
  END {
    base = median(cpu["no_limiter"])
    for (v in order) names[order[v]] = v
    for (i = 1; i <= count; i++) {
      v = names[i]
      printf "%-24s %9.0f req/s %8.3f µs/request %+7.3f µs\n", v, median(rps[v]), median(cpu[v]), median(cpu[v]) - base
    }
  }' "$WORK/runs.txt"
