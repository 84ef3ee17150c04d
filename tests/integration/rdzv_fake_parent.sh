#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# Issue 28: frames that travel down the tree, sent by a hostile parent to
# a real agent. lib/fake_parent.py stands between the agent (node rank 1)
# and the real leader: the agent's JOIN (with the right token) goes up
# unchanged, and the tree position (W), the compact placement (C) and the
# fate packets (F) come down truncated, with a length over the limit or
# of zero, out of order, bit-flipped (in every byte position class: the
# length, the type, the body, the integrity tag) or with bytes appended.
# For W and C the agent must refuse with a message naming the rendezvous
# and exit 1, never crash, never start a rank: 0 accepted, since every
# downward frame carries an HMAC-SHA256 tag keyed by the job token. A
# FATE frame cut or with a bad tag ends the node (exit 1, a line naming
# the leader); a correctly tagged packet that does not parse is dropped
# with one rate-limited line and the job goes on (exit 0).
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
# two ports free at the same moment, never the same one twice (two
# calls of a one-port helper can return the same port, and then the
# proxy cannot bind and the agent talks to the real leader directly)
. "$here/lib/rdzv_proxy_lib.sh"
fail=0

# one run: MODE; sets $arc and leaves the agent's output in $tmp/agent.log
run_case() {
    local mode=$1 lp pp ports
    ports=$(free_ports2); lp=${ports% *}; pp=${ports#* }
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
    if crashed "$tmp/leader.log"; then
        echo "FAIL: $mode: the real leader crashed"; cat "$tmp/leader.log"; fail=1
    fi
}

# a clean run through the fake parent first: it saves the real placement
run_case pass-C
if [ $arc -ne 0 ] || [ ! -s "$tmp/cplace" ] || [ ! -e "$tmp/ran" ]; then
    echo "FAIL: the pass-through run did not run (exit $arc)"; cat "$tmp/agent.log" "$tmp/proxy.log"; exit 1
fi

refused=0 ran_valid=0
# every byte position class of the frame: the length field, the type, the
# body's first, middle and last byte, and the integrity tag's
classes="len0 len3 type body0 mid pre tag0 tagmid tag31"
modes="trunc-W over-W zero-W order-W big-W-100 flip-W-0 flip-W-9 flip-W-40 flip-W-77 flip-W-120
       trunc-C over-C zero-C big-C-1000 flip-C-0 flip-C-3 flip-C-8 flip-C-30 flip-C-64 flip-C-200
       flip-C-1001 flip-C-4099 flip-C-9000 flip-C-18000"
for c in $classes; do modes="$modes at-W-$c at-C-$c"; done
nmodes=0
for mode in $modes; do
    nmodes=$((nmodes + 1))
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
    # exit 0: the agent took a frame that is not the one the leader sent
    ran_valid=$((ran_valid + 1))
    echo "FAIL: $mode: the agent took the frame and exited 0"; cat "$tmp/agent.log" "$tmp/proxy.log"; fail=1
done

# fate packets (restart, stop, heartbeat ...) after the placement: a frame
# that is cut or whose tag does not match ends the node's part (exit 1,
# a message naming the leader); never a crash
fate_refused=0
fmodes="trunc-F zero-F over-F flip-F-0 flip-F-3 flip-F-9 flip-F-17 big-F-70000"
for c in $classes; do fmodes="$fmodes at-F-$c"; done
for mode in $fmodes; do
    run_case "$mode"
    if crashed "$tmp/agent.log" || [ $arc -ne 1 ]; then
        echo "FAIL: $mode: agent exit $arc (expected 1)"; cat "$tmp/agent.log"; fail=1
        continue
    fi
    case $mode in
    trunc-*|zero-*|over-*|at-F-len*) pat='rendezvous leader' ;;
    *) pat='rendezvous leader .*tag check' ;;
    esac
    if ! grep -qE "^par3drun: .*$pat" "$tmp/agent.log"; then
        echo "FAIL: $mode: exit 1 without a line naming the leader ($pat)"; cat "$tmp/agent.log"; fail=1
        continue
    fi
    fate_refused=$((fate_refused + 1))
    printf '%-12s exit 1: %s\n' "$mode" "$(grep -m1 -E "^par3drun: .*$pat" "$tmp/agent.log" | cut -c1-150)"
done

# packets with a correct tag (the sender holds the token) that do not
# parse or travel the wrong way: dropped with one escaped line naming the
# leader and what was wrong; the job goes on and ends 0
for k in 0 1 2 3 4 5 6 7 8; do
    run_case "forge-F-$k"
    if crashed "$tmp/agent.log" || [ $arc -ne 0 ] || [ ! -e "$tmp/ran" ]; then
        echo "FAIL: forge-F-$k: agent exit $arc (expected 0, the rank run)"; cat "$tmp/agent.log"; fail=1
        continue
    fi
    if ! grep -qE '^par3drun: node .*rendezvous leader .*: (a fate packet|an unexpected).*: dropped' "$tmp/agent.log"; then
        echo "FAIL: forge-F-$k: no line saying the packet was dropped"; cat "$tmp/agent.log"; fail=1
        continue
    fi
    if LC_ALL=C grep -q $'[\x01-\x08\x0b-\x1f\x7f]' "$tmp/agent.log"; then
        echo "FAIL: forge-F-$k: a raw control byte in the agent's output"; fail=1
    fi
    printf 'forge-F-%d    dropped: %s\n' "$k" "$(grep -m1 'dropped' "$tmp/agent.log" | cut -c1-150)"
done
# a flood of them: at most 5 lines (rate-limited)
run_case flood-F-200
nl=$(grep -c 'dropped' "$tmp/agent.log")
if [ $arc -ne 0 ] || [ "$nl" -lt 1 ] || [ "$nl" -gt 5 ]; then
    echo "FAIL: flood-F-200: exit $arc, $nl lines about dropped packets (expected 1..5)"; fail=1
else
    echo "flood-F-200  exit 0, $nl lines for 200 bad packets"
fi

[ $refused -eq $nmodes ] || { echo "FAIL: $refused of $nmodes hostile W/C frames were refused"; fail=1; }
[ $fail -eq 0 ] || exit 1
echo "rdzv_fake_parent: $refused of $nmodes hostile TREE/CPLACE frames refused with exit 1 ($ran_valid accepted)," \
    "$fate_refused hostile FATE frames ended the node with exit 1, forged packets dropped with a message, no crash"
