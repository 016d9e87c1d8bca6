#!/usr/bin/env bash
# How often Envoy's rate limit filter gives up waiting for Sluice (docs/envoy.md, "timeout"):
# a real Envoy 1.40 in front of a direct response, its `envoy.filters.http.ratelimit` asking
# one `sluice serve` (both on this host, default threads), `wrk` with CONNECTIONS connections
# for DURATION seconds, with BURNERS busy loops beside them to load the host as other
# programs would. For each timeout in TIMEOUTS and each count of connections, Envoy's own
# counters (`cluster.<route's cluster>.ratelimit.*`) give the checks Sluice decided in time
# (ok, over_limit) and those Envoy gave up on (error; let through: failure_mode_allowed).
#
# Not run by scripts/test.sh or CI: a measurement. Needs wrk and the Envoy that
# scripts/test.sh installs (target/envoy-venv), or SLUICE_ENVOY.
# Settings (environment): TIMEOUTS ("0.02s 0.25s"), CONNECTIONS ("8 64"), BURNERS (12),
# DURATION (15), SLUICE_BIN (a `sluice` binary; built in release otherwise).
set -euo pipefail
cd "$(dirname "$0")/.."

TIMEOUTS=${TIMEOUTS:-0.02s 0.25s}
CONNECTIONS=${CONNECTIONS:-8 64}
BURNERS=${BURNERS:-12}
DURATION=${DURATION:-15}

fail() { echo "envoy_timeout.sh: $*" >&2; exit 1; }
command -v wrk >/dev/null || fail "needs wrk (apt-get install wrk)"
ENVOY=${SLUICE_ENVOY:-$(find target/envoy-venv -path '*/envoy/_bin/envoy' -type f 2>/dev/null | head -n 1)}
[ -x "$ENVOY" ] || fail "no Envoy: run scripts/test.sh once, or set SLUICE_ENVOY"
[ -n "${SLUICE_BIN:-}" ] || cargo build --release --locked -p sluice-server --bin sluice
SLUICE=${SLUICE_BIN:-$PWD/target/release/sluice}

# shellcheck source=scripts/processes.sh
source scripts/processes.sh

cat >"$WORK/sluice.yaml" <<'EOF'
domains:
  - domain: edge
    descriptors:
      - key: generic_key
        value: load
        rate_limit: {unit: second, requests_per_unit: 100000000}
EOF
out="$WORK/sluice.out"
timeout 3600 "$SLUICE" serve --config "$WORK/sluice.yaml" --http 127.0.0.1:0 --grpc 127.0.0.1:0 \
  --snapshot off >"$out" 2>"$WORK/sluice.err" &
PIDS+=("$!")
for _ in $(seq 100); do grep -q '^gRPC listening on ' "$out" && break; sleep 0.1; done
GRPC=$(sed -n 's|^gRPC listening on ||p' "$out")
[ -n "$GRPC" ] || { cat "$WORK/sluice.err" >&2; fail "sluice did not start"; }

# One Envoy: the front listener (rate limited, routed to the back one) and the back one,
# a direct response, so that the route has a cluster to count the filter's calls under.
listener() { # $1 name, $2 port, $3 its routes, $4 its filters before the router (flow YAML)
  cat <<EOF
    - name: $1
      address: {socket_address: {address: 127.0.0.1, port_value: $2}}
      filter_chains:
        - filters:
            - name: envoy.filters.network.http_connection_manager
              typed_config:
                "@type": type.googleapis.com/envoy.extensions.filters.network.http_connection_manager.v3.HttpConnectionManager
                stat_prefix: $1
                route_config: {virtual_hosts: [{name: all, domains: ["*"], routes: $3}]}
                http_filters: [$4{name: envoy.filters.http.router, typed_config: {"@type": type.googleapis.com/envoy.extensions.filters.http.router.v3.Router}}]
EOF
}

envoy_config() { # $1 timeout, $2 front port, $3 back port, $4 admin port
  local limited="[{match: {prefix: /}, route: {cluster: back, rate_limits: [{actions: [{generic_key: {descriptor_value: load}}]}]}}]"
  local ratelimit="{name: envoy.filters.http.ratelimit, typed_config: {\"@type\": type.googleapis.com/envoy.extensions.filters.http.ratelimit.v3.RateLimit, domain: edge, timeout: $1, rate_limit_service: {transport_api_version: V3, grpc_service: {envoy_grpc: {cluster_name: sluice}}}}}, "
  cat <<EOF
admin: {address: {socket_address: {address: 127.0.0.1, port_value: $4}}}
static_resources:
  listeners:
EOF
  listener front "$2" "$limited" "$ratelimit"
  listener back "$3" "[{match: {prefix: /}, direct_response: {status: 200, body: {inline_string: ok}}}]" ""
  cat <<EOF
  clusters:
    - name: back
      connect_timeout: 1s
      load_assignment:
        cluster_name: back
        endpoints: [{lb_endpoints: [{endpoint: {address: {socket_address: {address: 127.0.0.1, port_value: $3}}}}]}]
    - name: sluice
      connect_timeout: 1s
      typed_extension_protocol_options:
        envoy.extensions.upstreams.http.v3.HttpProtocolOptions:
          "@type": type.googleapis.com/envoy.extensions.upstreams.http.v3.HttpProtocolOptions
          explicit_http_config: {http2_protocol_options: {}}
      load_assignment:
        cluster_name: sluice
        endpoints: [{lb_endpoints: [{endpoint: {address: {socket_address: {address: ${GRPC%:*}, port_value: ${GRPC##*:}}}}}]}]
EOF
}

stat() { # $1 admin port, $2 counter name
  curl -s "http://127.0.0.1:$1/stats?filter=^cluster\.back\.ratelimit\.$2\$" | sed -n 's/.*: //p' | head -n 1
}

printf '%-8s %-12s %-8s %10s %10s %10s %8s %s\n' timeout connections burners decided "gave up" "let through" share "load average"
for limit in $TIMEOUTS; do
  for connections in $CONNECTIONS; do
    front=$(free_port) back=$(free_port) admin=$(free_port)
    envoy_config "$limit" "$front" "$back" "$admin" >"$WORK/envoy.yaml"
    timeout 600 "$ENVOY" -c "$WORK/envoy.yaml" --disable-hot-restart -l error >"$WORK/envoy.log" 2>&1 &
    envoy=$!
    PIDS+=("$envoy")
    for _ in $(seq 100); do curl -sf "http://127.0.0.1:$admin/ready" >/dev/null 2>&1 && break; sleep 0.1; done
    curl -sf "http://127.0.0.1:$front/" >/dev/null || { cat "$WORK/envoy.log" >&2; fail "Envoy does not serve"; }
    burners=()
    for _ in $(seq "$BURNERS"); do
      timeout "$((DURATION + 2))" sh -c 'while :; do :; done' &
      burners+=("$!")
    done
    wrk -t 2 -c "$connections" -d "${DURATION}s" "http://127.0.0.1:$front/" >"$WORK/wrk.out"
    load=$(cut -d ' ' -f 1 /proc/loadavg)
    kill "${burners[@]}" 2>/dev/null || true
    wait "${burners[@]}" 2>/dev/null || true
    ok=$(stat "$admin" ok) over=$(stat "$admin" over_limit) error=$(stat "$admin" error)
    allowed=$(stat "$admin" failure_mode_allowed)
    decided=$((${ok:-0} + ${over:-0}))
    share=$(python3 -c "print(f'{100 * ${error:-0} / max(1, $decided + ${error:-0}):.2f} %')")
    printf '%-8s %-12s %-8s %10s %10s %10s %8s %s\n' "$limit" "$connections" "$BURNERS" "$decided" \
      "${error:-0}" "${allowed:-0}" "$share" "$load"
    stop_pid "$envoy"
  done
done
