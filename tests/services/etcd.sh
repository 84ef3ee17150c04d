#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# tests/services/etcd.sh start|stop DIR — a real, single-member etcd on
# 127.0.0.1 for the tests (SERVICES.md).
#   start: picks two free ports, data dir under /dev/shm (tmpfs: fsync is
#          cheap) or DIR, writes DIR/etcd.pid, DIR/etcd.url, DIR/etcd.datadir
#          and DIR/etcd.log, waits (<= 10 s) for GET /health. Prints the URL.
#          Exit 77 when etcd is not installed, 1 when it does not come up.
#   stop:  kills the PID in DIR/etcd.pid (TERM, then KILL), removes the
#          data dir. Never kills by name.
set -u
cmd=${1:-}; dir=${2:-}
[ -n "$cmd" ] && [ -n "$dir" ] || { echo "usage: $0 start|stop DIR" >&2; exit 2; }

free_port() {
  python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])' 2>/dev/null ||
    echo $((30000 + RANDOM % 20000))
}

case $cmd in
start)
  command -v etcd >/dev/null || { echo "etcd not installed (apt-get install etcd-server)"; exit 77; }
  command -v curl >/dev/null || { echo "curl not installed"; exit 77; }
  mkdir -p "$dir"
  if [ -d /dev/shm ] && [ -w /dev/shm ]; then data=$(mktemp -d /dev/shm/p3d-etcd.XXXXXX)
  else data=$(mktemp -d "$dir/etcd-data.XXXXXX"); fi
  cp=$(free_port); pp=$(free_port)
  while [ "$pp" = "$cp" ]; do pp=$(free_port); done
  url="http://127.0.0.1:$cp"
  etcd --name p3d0 --data-dir "$data" \
    --listen-client-urls "$url" --advertise-client-urls "$url" \
    --listen-peer-urls "http://127.0.0.1:$pp" --initial-advertise-peer-urls "http://127.0.0.1:$pp" \
    --initial-cluster "p3d0=http://127.0.0.1:$pp" \
    --heartbeat-interval 10 --election-timeout 50 >"$dir/etcd.log" 2>&1 &
  echo $! >"$dir/etcd.pid"
  echo "$url" >"$dir/etcd.url"
  echo "$data" >"$dir/etcd.datadir"
  for _ in $(seq 200); do
    if curl -fs -m 1 "$url/health" 2>/dev/null | grep -q '"health":"true"'; then echo "$url"; exit 0; fi
    kill -0 "$(cat "$dir/etcd.pid")" 2>/dev/null || break
    sleep 0.05
  done
  echo "etcd did not become healthy at $url; log:" >&2
  tail -5 "$dir/etcd.log" >&2
  "$0" stop "$dir"
  exit 1
  ;;
stop)
  if [ -f "$dir/etcd.pid" ]; then
    pid=$(cat "$dir/etcd.pid")
    if kill -0 "$pid" 2>/dev/null; then
      kill -TERM "$pid" 2>/dev/null
      for _ in $(seq 40); do kill -0 "$pid" 2>/dev/null || break; sleep 0.05; done
      kill -KILL "$pid" 2>/dev/null
    fi
    rm -f "$dir/etcd.pid"
  fi
  if [ -f "$dir/etcd.datadir" ]; then
    data=$(cat "$dir/etcd.datadir")
    case $data in /dev/shm/p3d-etcd.*|"$dir"/etcd-data.*) rm -rf "$data" ;; esac
    rm -f "$dir/etcd.datadir"
  fi
  exit 0
  ;;
*) echo "usage: $0 start|stop DIR" >&2; exit 2 ;;
esac
