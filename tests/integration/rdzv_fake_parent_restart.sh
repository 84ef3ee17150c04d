#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# Issue 28: the placement made again after a node is lost (a CDELTA, or
# the whole CPLACE when the difference is not smaller), corrupted on its
# way down. Four real agents on loopback, --spares 1 (node rank 3 kept
# spare); node rank 1 reaches the leader through lib/fake_parent.py. Node
# rank 2 is killed: the leader replaces it by the spare and sends every
# node the restart and the new placement; the fake parent flips one bit of
# that placement frame (in the body's first byte, its middle, the last
# byte before the tag, the tag) on its way to node 1. Node 1 must refuse
# it (a line naming the leader and its tag check, exit 1) and never
# start a rank of the new generation. A run where the frame passes
# unchanged shows the same restart works through the proxy.
set -u
bin=${PAR3DRUN:?PAR3DRUN must name the par3drun binary}
here=$(cd "$(dirname "$0")" && pwd)
export P3D_DATA_DIR=${P3D_DATA_DIR:-$(cd "$here/../.." && pwd)}
export P3D_RDZV_TOKEN=fake-parent-restart-token-0123456789
tmp=$(mktemp -d "${TMPDIR:-/tmp}/p3d-fprestart.XXXXXX")
pids=()
cleanup() {
    for p in "${pids[@]}"; do kill -KILL "$p" 2>/dev/null; done
    rm -rf "$tmp"
}
trap cleanup EXIT
# two ports free at the same moment, never the same one twice (two
# calls of a one-port helper can return the same port, and then the
# proxy cannot bind and the agent talks to the real leader directly)
. "$here/lib/rdzv_proxy_lib.sh"
fail=0

# one run: MODE for the proxy; leaves $tmp/n$i.log and the rank markers
# $tmp/ran.$i.$gen; sets c1 (node 1's exit code)
run_case() {
    local mode=$1 lp pp i ports
    ports=$(free_ports2); lp=${ports% *}; pp=${ports#* }
    rm -f "$tmp"/ran.* "$tmp"/n*.log
    pids=()
    python3 "$here/lib/fake_parent.py" "$mode" "$lp" "$pp" 2>"$tmp/proxy.log" &
    pids+=($!)
    for i in 0 1 2 3; do
        local port=$lp to=()
        # node 1 is waited for: bounded; node 2 is killed by its pid
        [ "$i" = 1 ] && port=$pp to=(timeout -s KILL 60)
        "${to[@]}" "$bin" --rdzv "static:127.0.0.1:$port" --nnodes 4 --node-rank "$i" --rdzv-timeout 10 \
            --nproc-per-node 1 --spares 1 --max-restarts 2 --grace 1 --run-dir "$tmp/rd$i" -- \
            sh -c "touch $tmp/ran.$i.\$P3D_RESTART_COUNT; [ \"\$P3D_RESTART_COUNT\" = 0 ] && exec sleep 60; exit 0" \
            >"$tmp/n$i.log" 2>&1 &
        pids+=($!)
    done
    # generation 0 running on nodes 0-2, then node 2 lost
    for _ in $(seq 300); do
        [ -e "$tmp/ran.0.0" ] && [ -e "$tmp/ran.1.0" ] && [ -e "$tmp/ran.2.0" ] && break
        sleep 0.05
    done
    if [ ! -e "$tmp/ran.1.0" ] || [ ! -e "$tmp/ran.2.0" ]; then
        echo "FAIL: $mode: generation 0 did not start"; tail -5 "$tmp"/n*.log "$tmp/proxy.log"; fail=1
    fi
    kill -KILL "${pids[3]}"  # node rank 2's par3drun
    wait "${pids[3]}" 2>/dev/null
    wait "${pids[2]}"
    c1=$?
    for p in "${pids[@]}"; do kill "$p" 2>/dev/null; done
    wait 2>/dev/null
    if crashed "$tmp"/n*.log; then
        echo "FAIL: $mode: a sanitizer report or a crash"; cat "$tmp"/n*.log; fail=1
    fi
}

run_case pass-R
if [ "$c1" -ne 0 ] || [ ! -e "$tmp/ran.1.1" ] || [ ! -e "$tmp/ran.3.1" ]; then
    echo "FAIL: pass-R: node 1 exit $c1; the restart through the proxy did not run on nodes 1 and 3"
    cat "$tmp/n1.log" "$tmp/n0.log"; fail=1
else
    echo "pass-R: node 2 lost, the spare took over, node 1 ran generation 1 through the proxy (exit 0)"
fi

refused=0 n=0
for cls in body0 mid pre tag0 tag31; do
    n=$((n + 1))
    run_case "at-R-$cls"
    if [ "$c1" -ne 1 ]; then
        echo "FAIL: at-R-$cls: node 1 exit $c1 (expected 1)"; cat "$tmp/n1.log"; fail=1
        continue
    fi
    if ! grep -qE '^par3drun: node .*rendezvous leader .*tag check' "$tmp/n1.log"; then
        echo "FAIL: at-R-$cls: exit 1 without a line naming the leader and its tag check"
        cat "$tmp/n1.log"; fail=1
        continue
    fi
    if [ -e "$tmp/ran.1.1" ]; then
        echo "FAIL: at-R-$cls: node 1 ran generation 1 on a placement it could not verify"; fail=1
        continue
    fi
    refused=$((refused + 1))
    printf 'at-R-%-6s refused: %s\n' "$cls" "$(grep -m1 'tag check' "$tmp/n1.log" | cut -c1-150)"
done
[ $fail -eq 0 ] || exit 1
echo "rdzv_fake_parent_restart: $refused of $n corrupted restart placements refused with exit 1, none run"
