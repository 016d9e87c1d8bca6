#!/usr/bin/env bash
# Memory soak of `sluice serve` on the in-memory store (docs/benchmarks.md, "Memory soak").
#
# Starts the release server pinned to one core (`taskset -c 0`) on free loopback ports, with
# snapshots on (every 5 s, the default), fills KEYS fixed-window states (a 1 h window, so
# none expires), then drives POST /v1/check on those keys at random from the other core
# (`wrk`, 64 keep-alive connections) for DURATION seconds, printing the server's VmRSS
# (/proc/PID/status) and the `sluice_keys` gauge every SAMPLE seconds, and at the end the
# steady state: the least and most VmRSS over the run's second half, and the checks served.
#
# Not run by scripts/test.sh or CI. Needs 2 cores and `wrk`. Settings (environment):
# SLUICE_BIN (a `sluice` binary to measure instead of the one built here, to compare two
# commits), KEYS (200000), DURATION (seconds of load, 900), SAMPLE (seconds, 30),
# EXTRA (more `sluice serve` arguments, such as `--snapshot-interval 1h`).
set -euo pipefail
cd "$(dirname "$0")/.."

KEYS=${KEYS:-200000}
DURATION=${DURATION:-900}
SAMPLE=${SAMPLE:-30}
EXTRA=${EXTRA:-}

fail() { echo "soak.sh: $*" >&2; exit 1; }
command -v wrk >/dev/null 2>&1 || fail "wrk is missing (Debian: apt-get install wrk)"
[ "$(nproc --all)" -ge 2 ] || fail "needs at least 2 cores (one for the server, one for the load)"

if [ -z "${SLUICE_BIN:-}" ]; then
  cargo build --release --locked -p sluice-server --bin sluice
fi
SLUICE=${SLUICE_BIN:-$PWD/target/release/sluice}

WORK=$(mktemp -d)
SERVER_PID=
cleanup() {
  if [ -n "$SERVER_PID" ]; then
    kill -TERM "$SERVER_PID" 2>/dev/null || true
    wait "$SERVER_PID" 2>/dev/null || true
  fi
  rm -rf "$WORK"
}
trap cleanup EXIT

cat >"$WORK/config.yaml" <<'EOF'
policies:
  api:
    algorithm: fixed_window
    limit: 1000000000000
    window: 1h
EOF
cat >"$WORK/fill.lua" <<'EOF'
wrk.method = "POST"
wrk.headers["Content-Type"] = "application/json"
local n, flag, sent, answered = 0, nil, 0, 0
function init(args) n, flag = tonumber(args[1]), args[2] end
function request()
  local i = sent % n
  sent = sent + 1
  return wrk.format(nil, nil, nil, '{"key":"k' .. i .. '","policies":["api"]}')
end
function response()
  answered = answered + 1
  if answered == n then io.open(flag, "w"):close() end
end
EOF
cat >"$WORK/random.lua" <<'EOF'
wrk.method = "POST"
wrk.headers["Content-Type"] = "application/json"
local n
function init(args) n = tonumber(args[1]); math.randomseed(os.time()) end
function request()
  return wrk.format(nil, nil, nil, '{"key":"k' .. math.random(0, n - 1) .. '","policies":["api"]}')
end
function done(summary)
  io.write(string.format("checks=%d errors=%d\n", summary.requests,
    summary.errors.connect + summary.errors.read + summary.errors.write + summary.errors.timeout + summary.errors.status))
end
EOF

# shellcheck disable=SC2086 # EXTRA is a list of arguments
taskset -c 0 "$SLUICE" serve --config "$WORK/config.yaml" --http 127.0.0.1:0 --grpc 127.0.0.1:0 \
  --snapshot "$WORK/sluice.snapshot" $EXTRA >"$WORK/server.out" 2>"$WORK/server.err" &
SERVER_PID=$!
for _ in $(seq 100); do grep -q '^HTTP listening on ' "$WORK/server.out" && break; sleep 0.1; done
HTTP=$(sed -n 's|^HTTP listening on http://||p' "$WORK/server.out")
[ -n "$HTTP" ] || { cat "$WORK/server.err" >&2; fail "the server did not start"; }

rss_mib() { awk '/^VmRSS:/ {printf "%.1f", $2 / 1024}' "/proc/$SERVER_PID/status"; }
# The part of it in transparent huge pages (mimalloc asks for them on its heaps).
huge_mib() { awk '/^AnonHugePages:/ {printf "%.1f", $2 / 1024}' "/proc/$SERVER_PID/smaps_rollup"; }
keys() { curl -s "http://$HTTP/metrics" | awk '/^sluice_keys / {print $2}'; }

echo "soak.sh: $("$SLUICE" --version 2>/dev/null || echo "$SLUICE"), $KEYS keys, $DURATION s"
echo "start: VmRSS $(rss_mib) MiB"
# Every key once (one wrk thread, in order, stopped once KEYS checks are answered), then
# the load.
taskset -c 1 wrk -t1 -c16 -d1h -s "$WORK/fill.lua" "http://$HTTP/v1/check" -- "$KEYS" "$WORK/filled" >/dev/null &
WRK_PID=$!
while [ ! -e "$WORK/filled" ] && kill -0 "$WRK_PID" 2>/dev/null; do sleep 0.2; done
kill -INT "$WRK_PID" 2>/dev/null || true
wait "$WRK_PID" || true
echo "filled: sluice_keys $(keys), VmRSS $(rss_mib) MiB"
taskset -c 1 wrk -t2 -c64 -d"${DURATION}s" -s "$WORK/random.lua" "http://$HTTP/v1/check" -- "$KEYS" \
  >"$WORK/wrk.out" &
WRK_PID=$!
: >"$WORK/samples"
for ((elapsed = SAMPLE; elapsed <= DURATION; elapsed += SAMPLE)); do
  sleep "$SAMPLE"
  rss=$(rss_mib)
  echo "$elapsed $rss" >>"$WORK/samples"
  echo "${elapsed}s: VmRSS $rss MiB ($(huge_mib) MiB in huge pages), sluice_keys $(keys)"
done
wait "$WRK_PID"
tail -n 1 "$WORK/wrk.out"
awk -v half="$((DURATION / 2))" '$1 > half {if (min == "" || $2 < min) min = $2; if ($2 > max) max = $2}
  END {printf "steady state (second half): VmRSS %.1f to %.1f MiB\n", min, max}' "$WORK/samples"
