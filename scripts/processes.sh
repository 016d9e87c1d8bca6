# Sourced by scripts/loadtest.sh and scripts/lease_loadtest.sh: a scratch directory ($WORK),
# the processes a script starts ($PIDS), stopped by their process id and the directory
# removed on exit, and a free loopback port.
WORK=$(mktemp -d)
PIDS=()
# stop_pid PID: SIGTERM, up to 10 s to exit, then SIGKILL.
stop_pid() {
  local pid=$1
  kill -TERM "$pid" 2>/dev/null || return 0
  for _ in $(seq 50); do kill -0 "$pid" 2>/dev/null || break; sleep 0.2; done
  kill -KILL "$pid" 2>/dev/null || true
  wait "$pid" 2>/dev/null || true
}
cleanup() {
  for pid in "${PIDS[@]}"; do stop_pid "$pid"; done
  rm -rf "$WORK"
}
trap cleanup EXIT
free_port() {
  python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'
}
