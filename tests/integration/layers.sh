#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# layers: scripts/layers.py passes on the tree as it is (no circle between
# stage folders, poll/epoll only in the loop and the tree leader, no sleep
# under launcher/, plugins on public headers only), and fails on a copy of
# the tree with each of those broken in turn.
set -euo pipefail
src=${P3D_SRC:?}
T=$(mktemp -d /tmp/p3d-layers.XXXXXX)
trap 'rm -rf "$T"' EXIT
fail() { echo "FAIL: $*"; exit 1; }

out=$(python3 "$src/scripts/layers.py" "$src") || { echo "$out"; fail "the tree breaks a layer rule"; }
grep -q '^no circle' <<<"$out" || fail "no verdict line"
grep -q 'launcher/run -> launcher/wire' <<<"$out" || fail "the graph does not show run -> wire"

copy() { rm -rf "$T/t"; mkdir -p "$T/t"; cp -r "$src/launcher" "$src/placement" "$src/plugins" "$T/t/"; }

# a lower stage calls a higher one: a circle
copy
printf '\nvoid p3d_loop_uses_run(void) { p3d_agent_run(0, 0, -1); }\n' >>"$T/t/launcher/loop/loop.c"
out=$(python3 "$src/scripts/layers.py" "$T/t") && fail "a call from loop/ into run/ passed"
grep -q '^circle: .*launcher/loop.*launcher/run' <<<"$out" || { echo "$out"; fail "the circle is not named"; }
grep -q 'launcher/loop/loop.c calls p3d_agent_run' <<<"$out" || fail "the edge that closes it is not shown"

# a poll outside the loop, a sleep
copy
printf '\nstatic void stray(void) { poll(0, 0, 1); usleep(5); }\n' >>"$T/t/launcher/run/agent.c"
out=$(python3 "$src/scripts/layers.py" "$T/t") && fail "a poll and a usleep in agent.c passed"
grep -q 'launcher/run/agent.c:[0-9]*: poll() outside the event loop' <<<"$out" || { echo "$out"; fail "poll not named"; }
grep -q 'launcher/run/agent.c:[0-9]*: usleep() under launcher/' <<<"$out" || fail "usleep not named"

# a plugin reaching for an internal header
copy
sed -i '0,/#include "p3d\/plugin.h"/s//#include "rdzv.h"\n#include "p3d\/plugin.h"/' "$T/t/plugins/rdzv_etcd/rdzv_etcd.c"
out=$(python3 "$src/scripts/layers.py" "$T/t") && fail "a plugin including rdzv.h passed"
grep -q 'plugins/rdzv_etcd/rdzv_etcd.c:[0-9]*: includes "rdzv.h"' <<<"$out" || { echo "$out"; fail "plugin include not named"; }
echo ok
