#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# Issue 28: frames that travel down the tree, sent by a hostile parent to
# a real agent. lib/fake_parent.py stands between the agent (node rank 1)
# and the real leader: the agent's JOIN (with the right token) goes up
# unchanged, and the tree position (W), the compact placement (C) and the
# fate packets (F) come down truncated, with a length over the limit or
# of zero, out of order, bit-flipped or with bytes appended. For W and C
# the agent must refuse with a message naming the rendezvous and exit 1,
# never crash, never start a rank. A bit flip can land where the
# placement still decodes to a valid one (a policy name in the JSON): then
# the agent may run it, but only after it checked its own node's name and
# topology hash. Fate packets that do not parse are dropped: the agent
# must still end (0 or 1), never crash.
set -u
bin=${PAR3DRUN:?PAR3DRUN must name the par3drun binary}
here=$(cd "$(dirname "$0")" && pwd)
export P3D_DATA_DIR=${P3D_DATA_DIR:-$(cd "$here/../.." && pwd)}
export P3D_RDZV_TOKEN=fake-parent-token-0123456789
tmp=$(mktemp -d "${TMPDIR:-/tmp}/p3d-fakeparent.XXXXXX")
leader=; proxy=
cleanup() {
    [ -n "$leader" ] && kill "$leader" 2>/dev/null
    [ -n "$proxy" ] && kill "$proxy" 2>/dev/null
    rm -rf "$tmp"
}
trap cleanup EXIT
free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
fail=0
crashed() { grep -qE 'AddressSanitizer|runtime error:|LeakSanitizer|Segmentation|core dumped' "$1"; }

# one run: MODE; sets $arc and leaves the agent's output in $tmp/agent.log
run_case() {
    local mode=$1 lp pp
    lp=$(free_port); pp=$(free_port)
    rm -f "$tmp/ran"
    "$bin" --rdzv "static:127.0.0.1:$lp" --nnodes 2 --node-rank 0 --rdzv-timeout 8 --nproc-per-node 1 \
        -- /bin/true >"$tmp/leader.log" 2>&1 &
    leader=$!
    python3 "$here/lib/fake_parent.py" "$mode" "$lp" "$pp" "$tmp/cplace" 2>"$tmp/proxy.log" &
    proxy=$!
    MARK=$tmp/ran timeout -s KILL 40 "$bin" --rdzv "static:127.0.0.1:$pp" --nnodes 2 --node-rank 1 \
        --rdzv-timeout 8 --nproc-per-node 1 -- sh -c 'touch "$MARK"' >"$tmp/agent.log" 2>&1
    arc=$?
    kill "$leader" "$proxy" 2>/dev/null
    wait "$leader" "$proxy" 2>/dev/null
    leader=; proxy=
}

# a clean run through the fake parent first: it saves the real placement
run_case pass-C
if [ $arc -ne 0 ] || [ ! -s "$tmp/cplace" ] || [ ! -e "$tmp/ran" ]; then
    echo "FAIL: the pass-through run did not run (exit $arc)"; cat "$tmp/agent.log" "$tmp/proxy.log"; exit 1
fi

refused=0 ran_valid=0
for mode in trunc-W over-W zero-W order-W big-W-100 flip-W-0 flip-W-9 flip-W-40 flip-W-77 flip-W-120 \
            trunc-C over-C zero-C big-C-1000 flip-C-0 flip-C-3 flip-C-8 flip-C-30 flip-C-64 flip-C-200 \
            flip-C-1001 flip-C-4099 flip-C-9000 flip-C-18000; do
    run_case "$mode"
    if crashed "$tmp/agent.log" || [ $arc -gt 1 ]; then
        echo "FAIL: $mode: agent exit $arc (crash, timeout or a code other than 1)"; cat "$tmp/agent.log"; fail=1
        continue
    fi
    if [ $arc -eq 1 ]; then
        if ! grep -qE '^par3drun: .*(rendezvous|placement|leader|topology hash)' "$tmp/agent.log"; then
            echo "FAIL: $mode: exit 1 without a message naming the rendezvous"; cat "$tmp/agent.log"; fail=1
        fi
        if [ -e "$tmp/ran" ]; then
            echo "FAIL: $mode: a rank ran although the agent refused the placement"; fail=1
        fi
        refused=$((refused + 1))
        printf '%-12s refused: %s\n' "$mode" "$(grep -m1 '^par3drun:' "$tmp/agent.log" | cut -c1-150)"
        continue
    fi
    # exit 0: only a flip inside the placement's verbatim text can leave it valid
    case $mode in
    flip-C-*) ran_valid=$((ran_valid + 1)); echo "$mode: still a valid placement; the agent ran it" ;;
    *) echo "FAIL: $mode: the agent took the frame and exited 0"; cat "$tmp/agent.log"; fail=1 ;;
    esac
done

# fate packets (restart, stop, heartbeat ...) after the placement: a packet
# that does not parse is dropped; the agent ends either way, never crashes
for mode in trunc-F zero-F over-F flip-F-0 flip-F-3 flip-F-9 flip-F-17 big-F-70000; do
    run_case "$mode"
    if crashed "$tmp/agent.log" || [ $arc -gt 1 ]; then
        echo "FAIL: $mode: agent exit $arc"; cat "$tmp/agent.log"; fail=1
    else
        echo "$mode: agent exit $arc"
    fi
done
[ $refused -ge 15 ] || { echo "FAIL: only $refused of the hostile W/C frames were refused"; fail=1; }
[ $fail -eq 0 ] || exit 1
echo "rdzv_fake_parent: $refused hostile downward frames refused with exit 1, $ran_valid bit flips left a valid placement, no crash"
