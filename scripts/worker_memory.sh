#!/usr/bin/env bash
# What a worker costs in memory (docs/reliability.md, "Floods and hostile clients").
#
# Starts `sluice serve` (the binary given, or target/debug/sluice) with 1 worker and then with
# 33, on free loopback ports with no snapshot, waits until it listens and a second more, and
# prints each one's resident memory (VmRSS in /proc/PID/status) and the cost of one worker:
# the difference divided by 32. Environment variables (MIMALLOC_ALLOW_THP=0, …) pass through.
set -euo pipefail
bin=${1:-target/debug/sluice}
bin=$(realpath "$bin")
rss_with() {
    local dir pid
    dir=$(mktemp -d)
    (cd "$dir" && exec "$bin" serve --workers "$1" --http 127.0.0.1:0 --grpc 127.0.0.1:0 --snapshot off >out 2>err) &
    pid=$!
    for _ in $(seq 200); do grep -q "gRPC listening" "$dir/out" 2>/dev/null && break; sleep 0.1; done
    sleep 1
    awk '/VmRSS/ {print $2}' "/proc/$pid/status"
    kill "$pid"; wait "$pid" 2>/dev/null || true
    rm -rf "$dir"
}
one=$(rss_with 1)
many=$(rss_with 33)
echo "1 worker: ${one} kB; 33 workers: ${many} kB; one worker: $(( (many - one) / 32 )) kB"
