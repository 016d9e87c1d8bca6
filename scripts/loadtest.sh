#!/usr/bin/env bash
# Load test of `sluice serve` (docs/benchmarks.md, "Service: `sluice serve` under load").
#
# Builds the release binary and the gRPC load client (crates/sluice-server/examples/grpc_load.rs),
# then, for each case, starts the server pinned to one core (`taskset -c 0`) on free loopback
# ports and drives it from the other core (`taskset -c 1`) with 64 requests in flight:
#   - HTTP (`wrk`, 64 keep-alive connections, POST /v1/check) and gRPC (`grpc_load`, 64 calls
#     on 8 HTTP/2 connections; and `h2load`, when installed, for the hot key);
#   - one hot key, and 1 000 000 distinct keys (HTTP: filled first, then drawn at random);
#   - the in-memory store, then Redis (a redis-server of its own, pinned to the client's core);
#   - gRPC and HTTP once more with no pinning at all, to see whether they use both cores;
#   - keys that expire (a 2 s window) arriving without end, to see whether fresh keys are freed;
#   - `GET /healthz`, the floor of an HTTP request on this host in this run (hyper and the
#     loopback TCP path, no check): the host's speed drifts, a check's cost over it less.
# Each run reports checks/s, p50/p99 latency and the server's CPU time per check (utime +
# stime of the server process from /proc/PID/stat, before and after, divided by the completed
# requests); memory per key is the growth of VmRSS (/proc/PID/status) divided by the growth of
# the `sluice_keys` gauge (/metrics). The CPU used meanwhile by other processes is recorded
# too: a run is clean when they used at most OTHERS_MAX % of a core, each case is repeated
# until RUNS runs were clean (at most 3 x RUNS runs), and the summary gives the median of each
# column over the clean runs. About 15 minutes on a quiet machine.
#
# Not run by scripts/test.sh or CI. Needs 2 cores, `wrk` (installed with apt-get when run as
# root), `redis-server` and `redis-cli`. Settings (environment): DURATION (seconds per run, 10),
# RUNS (3), OTHERS_MAX (10), KEYS (1000000), CONNECTIONS (64), REDIS (1; 0 skips the Redis
# cases), LIFETIME (seconds any server may live, 1200), SLUICE_BIN (a `sluice` binary to
# measure instead of the one built here, to compare a change), CASES (a regular expression:
# only the measured cases whose name matches it run, such as `h2load`; setup steps, memory
# and churn still run), REDIS_MODULE (a Sluice Redis module, libsluice_redis_module.so, for the
# Redis cases' redis-server to load: the store then checks with it instead of the scripts).
set -euo pipefail
cd "$(dirname "$0")/.."

DURATION=${DURATION:-10}
RUNS=${RUNS:-3}
KEYS=${KEYS:-1000000}
CONNECTIONS=${CONNECTIONS:-64}
REDIS=${REDIS:-1}
REDIS_MODULE=${REDIS_MODULE:-}
LIFETIME=${LIFETIME:-1200}
OTHERS_MAX=${OTHERS_MAX:-10}
CASES=${CASES:-.}
SERVER_CPU=0
CLIENT_CPU=1
HZ=$(getconf CLK_TCK)

need() { command -v "$1" >/dev/null 2>&1; }
fail() { echo "loadtest.sh: $*" >&2; exit 1; }

[ "$(nproc --all)" -ge 2 ] || fail "needs at least 2 cores (one for the server, one for the load)"
need taskset || fail "taskset is missing (util-linux)"
if ! need wrk; then
  if [ "$(id -u)" -ne 0 ] || ! need apt-get; then fail "wrk is missing; install it (Debian: apt-get install wrk)"; fi
  echo "loadtest.sh: installing wrk with apt-get" >&2
  apt-get update && DEBIAN_FRONTEND=noninteractive apt-get install -y wrk
fi
# h2load (nghttp2) is optional: a C load generator for gRPC with one fixed request (the hot
# key), lighter than grpc_load, so that the gRPC server, not the client, is the bottleneck.
if ! need h2load && [ "$(id -u)" -eq 0 ] && need apt-get; then
  echo "loadtest.sh: installing h2load (nghttp2-client) with apt-get" >&2
  DEBIAN_FRONTEND=noninteractive apt-get install -y nghttp2-client || true
fi
need h2load || echo "loadtest.sh: h2load is missing (Debian: apt-get install nghttp2-client); its cases are skipped" >&2
if [ "$REDIS" = 1 ] && ! { need redis-server && need redis-cli; }; then
  fail "redis-server and redis-cli are missing (Debian: apt-get install redis-server redis-tools), or set REDIS=0"
fi

cargo build --release --locked -p sluice-server --bin sluice --example grpc_load
SLUICE=${SLUICE_BIN:-$PWD/target/release/sluice}
GRPC_LOAD=$PWD/target/release/examples/grpc_load

# shellcheck source=scripts/processes.sh
source scripts/processes.sh

# --- Configuration and wrk scripts -----------------------------------------------------------
# Fixed windows (limitador's algorithm) with limits no run reaches: every check is allowed.
cat >"$WORK/config.yaml" <<'EOF'
policies:
  api:
    algorithm: fixed_window
    limit: 1000000000000
    window: 1h
  fresh:
    algorithm: fixed_window
    limit: 1000000000000
    window: 2s
domains:
  - domain: load
    descriptors:
      - key: user
        rate_limit: {unit: hour, requests_per_unit: 4000000000}
EOF

# Shared by every wrk script: one machine-readable line, in grpc_load's format.
# `over_limit` counts every HTTP status >= 400.
DONE_LUA='
wrk.method = "POST"
wrk.headers["Content-Type"] = "application/json"
function done(summary, latency, requests)
  local e, seconds = summary.errors, summary.duration / 1e6
  io.write(string.format("calls=%d errors=%d over_limit=%d elapsed_s=%.3f calls_per_s=%.0f p50_us=%d p99_us=%d\n",
    summary.requests, e.connect + e.read + e.write + e.timeout, e.status, seconds,
    summary.requests / seconds, latency:percentile(50), latency:percentile(99)))
end'
# One key, a static request.
cat >"$WORK/hot.lua" <<EOF
$DONE_LUA
wrk.body = '{"key":"hot","policies":["api"],"cost":1}'
EOF
# The floor of an HTTP request here (hyper and the loopback TCP path, no check): GET /healthz.
cat >"$WORK/healthz.lua" <<EOF
$DONE_LUA
wrk.method = "GET"
wrk.headers["Content-Type"] = nil
EOF
# Args: N PREFIX POLICY. Each request picks one of N keys at random.
cat >"$WORK/random.lua" <<EOF
$DONE_LUA
local n, prefix, policy
function init(args)
  n, prefix, policy = tonumber(args[1]), args[2], args[3]
  math.randomseed(os.time())
end
function request()
  local body = '{"key":"' .. prefix .. math.random(0, n - 1) .. '","policies":["' .. policy .. '"],"cost":1}'
  return wrk.format(nil, nil, nil, body)
end
EOF
# Args: N PREFIX POLICY FLAG. Keys PREFIX0, PREFIX1, ... in order; after N answers, creates
# the file FLAG and stops (the script then ends wrk with SIGINT). N = 0: never stops.
cat >"$WORK/sequence.lua" <<EOF
$DONE_LUA
local n, prefix, policy, flag
local sent, answered = 0, 0
function init(args)
  n, prefix, policy, flag = tonumber(args[1]), args[2], args[3], args[4]
end
function request()
  local i = sent
  if n > 0 then i = sent % n end
  sent = sent + 1
  return wrk.format(nil, nil, nil, '{"key":"' .. prefix .. i .. '","policies":["' .. policy .. '"],"cost":1}')
end
function response()
  answered = answered + 1
  if answered == n then
    io.open(flag, "w"):close()
    wrk.thread:stop()
  end
end
EOF

# A ShouldRateLimit request, framed for gRPC (flag 0, length 23): domain "load", one
# descriptor user=hot, hits_addend 1.
printf '\x00\x00\x00\x00\x17\x0a\x04load\x12\x0d\x0a\x0b\x0a\x04user\x12\x03hot\x18\x01' >"$WORK/grpc_hot.bin"
# Args: ADDR CONNECTIONS STREAMS SECONDS. Runs h2load and prints grpc_load's line, with the
# percentiles computed from h2load's per-request log.
cat >"$WORK/h2load_grpc.sh" <<'EOF'
#!/usr/bin/env bash
set -euo pipefail
dir=$(dirname "$0")
rm -f "$dir/h2load.log" # h2load appends to its log
h2load -D "$4" -c "$2" -m "$3" -d "$dir/grpc_hot.bin" -H 'content-type: application/grpc' -H 'te: trailers' \
  --log-file="$dir/h2load.log" "http://$1/envoy.service.ratelimit.v3.RateLimitService/ShouldRateLimit" >"$dir/h2load.out"
read -r seconds ok failed <<<"$(awk '/^finished in/ {s = $3 + 0} /^requests:/ {ok = $8; failed = $10 + $12 + $14}
  END {print s, ok, failed}' "$dir/h2load.out")"
cut -f3 "$dir/h2load.log" | sort -n | awk -v ok="$ok" -v failed="$failed" -v s="$seconds" '{v[NR] = $1}
  END {printf "calls=%d errors=%d over_limit=0 elapsed_s=%.3f calls_per_s=%.0f p50_us=%d p99_us=%d\n",
    ok, failed, s, ok / s, v[int((NR - 1) * 0.50 + 1.5)], v[int((NR - 1) * 0.99 + 1.5)]}'
EOF

# --- Processes ---------------------------------------------------------------------------------

# start_redis: sets REDIS_PID and REDIS_PORT.
start_redis() {
  REDIS_PORT=$(free_port)
  taskset -c "$CLIENT_CPU" timeout "$LIFETIME" redis-server --bind 127.0.0.1 --port "$REDIS_PORT" \
    --save '' --appendonly no --daemonize no --logfile "$WORK/redis.log" \
    ${REDIS_MODULE:+--loadmodule "$REDIS_MODULE"} &
  local wrapper=$!
  PIDS+=("$wrapper")
  for _ in $(seq 100); do redis-cli -p "$REDIS_PORT" ping >/dev/null 2>&1 && break; sleep 0.1; done
  REDIS_PID=$(pgrep -P "$wrapper")
}

# start_server STORE PIN: sets SERVER_PID, HTTP and GRPC. PIN is a core, or "all".
# `timeout` bounds its life; the server is its child, measured and stopped by its own PID.
start_server() {
  local store=$1 pin=$2 out="$WORK/server.out"
  local cpus=$SERVER_CPU
  [ "$pin" = all ] && cpus=0-$(($(nproc --all) - 1))
  : >"$out"
  taskset -c "$cpus" timeout "$LIFETIME" "$SLUICE" serve --config "$WORK/config.yaml" --store "$store" \
    --http 127.0.0.1:0 --grpc 127.0.0.1:0 --snapshot off >"$out" 2>"$WORK/server.err" &
  local wrapper=$!
  PIDS+=("$wrapper")
  for _ in $(seq 100); do grep -q '^gRPC listening on ' "$out" && break; sleep 0.1; done
  HTTP=$(sed -n 's|^HTTP listening on http://||p' "$out")
  GRPC=$(sed -n 's|^gRPC listening on ||p' "$out")
  if [ -z "$HTTP" ] || [ -z "$GRPC" ]; then cat "$WORK/server.err" >&2; fail "the server did not start"; fi
  SERVER_PID=$(pgrep -P "$wrapper")
}

stop_server() { stop_pid "$SERVER_PID"; }

# CPU time of the whole machine (all cores, idle and iowait excluded), in ticks.
busy_ticks() { awk '/^cpu / {print $2 + $3 + $4 + $7 + $8 + $9}' /proc/stat; }
# CPU time of this shell's reaped children (the load generators), in ticks.
children_ticks() { sed 's/.*) //' "/proc/$$/stat" | awk '{print $14 + $15}'; }
cpu_ticks() { sed 's/.*) //' "/proc/$1/stat" | awk '{print $12 + $13}'; }
# thread_ticks PID: one line per thread: TID TICKS NAME.
thread_ticks() {
  local task
  for task in /proc/"$1"/task/*; do
    echo "${task##*/} $(sed 's/.*) //' "$task/stat" | awk '{print $12 + $13}') $(cat "$task/comm")"
  done
}
rss_kib() { awk '/^VmRSS:/ {print $2}' "/proc/$1/status"; }
keys_held() { curl -sf "http://$HTTP/metrics" | awk '$1 == "sluice_keys" {print $2}'; }
field() { tr ' ' '\n' <<<"$2" | sed -n "s/^$1=//p"; }

# --- Measurement -------------------------------------------------------------------------------
# measure NAME PIN CLIENT ARGS...: runs the client (pinned to the client core unless PIN = all),
# prints one row and appends it to $WORK/rows. Columns: checks/s, p50 µs, p99 µs, server CPU
# µs/check, server CPU % of one core, Redis CPU µs/check (with Redis), CPU % of one core used
# by other processes during the run (noise).
measure() {
  local name=$1 pin=$2
  shift 2
  local prefix=(taskset -c "$CLIENT_CPU")
  [ "$pin" = all ] && prefix=()
  local before redis_before=0 line threads machine client
  before=$(cpu_ticks "$SERVER_PID")
  threads=$(thread_ticks "$SERVER_PID")
  [ -n "${REDIS_PID:-}" ] && redis_before=$(cpu_ticks "$REDIS_PID")
  machine=$(busy_ticks)
  client=$(children_ticks)
  line=$("${prefix[@]}" "$@" | grep '^calls=')
  local ticks redis_ticks=0 calls others seconds
  ticks=$(($(cpu_ticks "$SERVER_PID") - before))
  [ -n "${REDIS_PID:-}" ] && redis_ticks=$(($(cpu_ticks "$REDIS_PID") - redis_before))
  # Whatever else ran meanwhile (other people's builds): the run is noisy above OTHERS_MAX.
  others=$(($(busy_ticks) - machine - ($(children_ticks) - client) - ticks - redis_ticks))
  calls=$(field calls "$line")
  seconds=$(field elapsed_s "$line")
  LAST_CLEAN=$(awk -v o="$others" -v hz="$HZ" -v s="$seconds" -v max="$OTHERS_MAX" 'BEGIN {print (o / hz / s * 100 <= max)}')
  [ "$pin" = all ] && [ "$name" != warmup ] && busy_threads "$name" "$threads" "$seconds"
  [ "$(field errors "$line")" = 0 ] && [ "$(field over_limit "$line")" = 0 ] \
    || echo "loadtest.sh: $name: errors or rejections: $line" >&2
  awk -v name="$name" -v calls="$calls" -v rate="$(field calls_per_s "$line")" -v p50="$(field p50_us "$line")" \
    -v p99="$(field p99_us "$line")" -v t="$ticks" -v rt="$redis_ticks" -v o="$others" -v hz="$HZ" -v s="$seconds" '
    BEGIN { printf "%s\t%.0f\t%.0f\t%.0f\t%.2f\t%.0f\t%.2f\t%.0f\n", name, rate, p50, p99,
      t / hz * 1e6 / calls, t / hz / s * 100, rt / hz * 1e6 / calls, o / hz / s * 100 }' | tee -a "$WORK/rows"
}

# busy_threads NAME BEFORE WALL: the server threads that used over 5 % of a core since BEFORE
# (thread_ticks output), to see whether the work spreads over the cores.
busy_threads() {
  thread_ticks "$SERVER_PID" | awk -v name="$1" -v before="$2" -v wall="$3" -v hz="$HZ" '
    BEGIN { n = split(before, lines, "\n"); for (i = 1; i <= n; i++) { split(lines[i], f, " "); t0[f[1]] = f[2] } }
    { pct = ($2 - t0[$1]) / hz / wall * 100; if (pct > 5) { list = list sprintf(" %s[%s] %.0f%%", $3, $1, pct) } }
    END { print name ": server threads over 5% of a core:" list }' | tee -a "$WORK/notes"
}

http_hot() { measure "$1" "${2:-pinned}" wrk -t1 -c"$CONNECTIONS" -d"${DURATION}s" --timeout 5s -s "$WORK/hot.lua" "http://$HTTP/v1/check"; }
http_floor() { measure "$1" pinned wrk -t1 -c"$CONNECTIONS" -d"${DURATION}s" --timeout 5s -s "$WORK/healthz.lua" "http://$HTTP/healthz"; }
http_random() {
  measure "$1" pinned wrk -t1 -c"$CONNECTIONS" -d"${DURATION}s" --timeout 5s -s "$WORK/random.lua" \
    "http://$HTTP/v1/check" -- "$KEYS" key- api
}
grpc() { measure "$1" "$2" "$GRPC_LOAD" "$GRPC" "$CONNECTIONS" "$DURATION" "$3"; }
# h2load_hot NAME PIN CONNECTIONS STREAMS
h2load_hot() {
  if need h2load; then measure "$1" "$2" bash "$WORK/h2load_grpc.sh" "$GRPC" "$3" "$4" "$DURATION"; else LAST_CLEAN=1; fi
}

# fill NAME PREFIX POLICY: sends KEYS requests with keys PREFIX0..PREFIX(KEYS-1), then stops.
fill() {
  local flag="$WORK/filled" out="$WORK/fill.out"
  rm -f "$flag"
  local before start
  before=$(cpu_ticks "$SERVER_PID")
  start=$(date +%s.%N)
  taskset -c "$CLIENT_CPU" wrk -t1 -c"$CONNECTIONS" -d"$LIFETIME"s --timeout 5s -s "$WORK/sequence.lua" \
    "http://$HTTP/v1/check" -- "$KEYS" "$2" "$3" "$flag" >"$out" &
  local wrk_pid=$!
  while [ ! -e "$flag" ] && kill -0 "$wrk_pid" 2>/dev/null; do sleep 0.2; done
  kill -INT "$wrk_pid" 2>/dev/null || true
  wait "$wrk_pid" || true
  local line ticks
  line=$(grep '^calls=' "$out")
  ticks=$(($(cpu_ticks "$SERVER_PID") - before))
  awk -v name="$1" -v calls="$(field calls "$line")" -v t="$ticks" -v hz="$HZ" -v s="$start" -v e="$(date +%s.%N)" \
    'BEGIN { printf "%s: %d new keys in %.1f s (%.0f/s), server CPU %.2f µs per new key\n",
      name, calls, e - s, calls / (e - s), t / hz * 1e6 / calls }'
}

# rss_per_key NAME RSS0 KEYS0: prints the memory the server grew by, per key added.
rss_per_key() {
  local rss keys
  rss=$(rss_kib "$SERVER_PID")
  keys=$(keys_held)
  awk -v name="$1" -v r0="$2" -v k0="$3" -v r="$rss" -v k="$keys" 'BEGIN {
    printf "%s: sluice_keys %d -> %d, VmRSS %.1f -> %.1f MiB: %.1f bytes per key\n",
      name, k0, k, r0 / 1024, r / 1024, (r - r0) * 1024 / (k - k0) }' | tee -a "$WORK/notes"
}

# repeat COMMAND NAME ARGS...: runs a measurement until RUNS runs were clean (others under
# OTHERS_MAX % of a core), at most 3 x RUNS times; nothing when NAME does not match CASES.
repeat() {
  [[ $2 =~ $CASES ]] || return 0
  local clean=0 tries=0
  while [ "$clean" -lt "$RUNS" ] && [ "$tries" -lt $((RUNS * 3)) ]; do
    "$@"
    tries=$((tries + 1))
    clean=$((clean + LAST_CLEAN))
  done
}

# --- Cases -------------------------------------------------------------------------------------
echo "== HTTP and gRPC, in-memory store, server on core $SERVER_CPU, load on core $CLIENT_CPU"
start_server memory "$SERVER_CPU"
DURATION=2 http_hot warmup >/dev/null
repeat http_hot "http memory hot"
repeat http_floor "http GET /healthz (the floor)"
rss0=$(rss_kib "$SERVER_PID")
keys0=$(keys_held)
fill "http memory fill" key- api
rss_per_key "memory per key after $KEYS keys" "$rss0" "$keys0"
repeat http_random "http memory $KEYS keys"
repeat grpc "grpc memory hot" pinned 1
repeat h2load_hot "grpc memory hot, h2load 8x8" pinned 8 8
DURATION=$((DURATION * 2)) grpc warmup pinned "$KEYS" >/dev/null # inserts most of the keys
repeat grpc "grpc memory $KEYS keys" pinned "$KEYS"
echo "sluice_keys after the gRPC runs: $(keys_held)"
stop_server

echo "== gRPC and HTTP, in-memory store, server and load on every core (no taskset)"
start_server memory all
DURATION=2 grpc warmup all 1 >/dev/null
repeat grpc "grpc memory hot, all cores" all 1
repeat h2load_hot "grpc memory hot, all cores, h2load 8x8" all 8 8
# Few connections carrying many streams each, as Envoy sends them (one connection per worker).
repeat h2load_hot "grpc memory hot, all cores, h2load 2x32" all 2 32
repeat http_hot "http memory hot, all cores" all
stop_server

echo "== Keys that expire (2 s window) arriving without end: are fresh keys freed?"
start_server memory "$SERVER_CPU"
DURATION=2 http_hot warmup >/dev/null
rss0=$(rss_kib "$SERVER_PID")
keys0=$(keys_held)
for wave in 1 2 3 4; do
  measure "churn wave $wave (new keys, 2 s window)" pinned wrk -t1 -c"$CONNECTIONS" -d"${DURATION}s" --timeout 5s \
    -s "$WORK/sequence.lua" "http://$HTTP/v1/check" -- 0 "wave$wave-" fresh "$WORK/never"
  rss_per_key "after churn wave $wave" "$rss0" "$keys0"
done
stop_server

if [ "$REDIS" = 1 ]; then
  echo "== HTTP and gRPC, Redis store, server on core $SERVER_CPU, load and redis-server on core $CLIENT_CPU"
  start_redis
  start_server "redis://127.0.0.1:$REDIS_PORT" "$SERVER_CPU"
  DURATION=2 http_hot warmup >/dev/null
  repeat http_hot "http redis hot"
  used0=$(redis-cli -p "$REDIS_PORT" info memory | sed -n 's/^used_memory:\([0-9]*\).*/\1/p')
  fill "http redis fill" key- api
  used=$(redis-cli -p "$REDIS_PORT" info memory | sed -n 's/^used_memory:\([0-9]*\).*/\1/p')
  echo "redis used_memory per key: $(((used - used0) / KEYS)) bytes ($(redis-cli -p "$REDIS_PORT" dbsize) keys)" \
    | tee -a "$WORK/notes"
  repeat http_random "http redis $KEYS keys"
  repeat grpc "grpc redis hot" pinned 1
  repeat grpc "grpc redis $KEYS keys" pinned "$KEYS"
  stop_server
  # Which ran the checks: the scripts (evalsha) or the module (sluice.check).
  redis-cli -p "$REDIS_PORT" info commandstats | grep -E '^cmdstat_(evalsha|sluice\.check):' | tee -a "$WORK/notes"
  stop_pid "$REDIS_PID"
  REDIS_PID=
fi

# --- Summary -----------------------------------------------------------------------------------
echo
echo "== Medians over the clean runs (other processes under $OTHERS_MAX % of a core; all runs, marked *, when"
echo "== none was clean), ${DURATION} s each, $CONNECTIONS in flight ($(date -u +%FT%TZ), $(nproc --all) cores)"
echo "| case | checks/s | p50 µs | p99 µs | server CPU µs/check | server CPU % | Redis CPU µs/check | clean runs |"
echo "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: |"
grep -Ev '^(churn|warmup)' "$WORK/rows" | awk -F'\t' -v max="$OTHERS_MAX" '
  { if (!($1 in total)) order[++n] = $1
    total[$1]++; clean[$1] += ($8 <= max); rows[$1, total[$1]] = $0 }
  function median(name, c, all,    k, i, j, t, a, f) {
    k = 0
    for (i = 1; i <= total[name]; i++) { split(rows[name, i], f, "\t"); if (all || f[8] <= max) a[++k] = f[c] }
    for (i = 2; i <= k; i++) for (j = i; j > 1 && a[j - 1] > a[j]; j--) { t = a[j]; a[j] = a[j - 1]; a[j - 1] = t }
    return k % 2 ? a[(k + 1) / 2] : (a[k / 2] + a[k / 2 + 1]) / 2
  }
  END { for (i = 1; i <= n; i++) { name = order[i]; all = clean[name] == 0
    printf "| %s%s | %.0f | %.0f | %.0f | %.2f | %.0f | %.2f | %d of %d |\n", name, all ? " *" : "",
      median(name, 2, all), median(name, 3, all), median(name, 4, all), median(name, 5, all),
      median(name, 6, all), median(name, 7, all), clean[name], total[name] } }'
echo
cat "$WORK/notes"
