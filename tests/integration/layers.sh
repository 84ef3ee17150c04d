#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# layers: scripts/layers.py passes on the tree as it is (no circle between
# stage folders, nested ones included; no circle between files but those
# scripts/layers-allow.txt lists, none now; poll/epoll only in the loop
# and the tree leader; no sleep under launcher/; plugins on public headers only; each
# launcher stage seen from above only through its one public header), and
# fails on a copy of the tree with each of those broken in turn.
set -euo pipefail
src=${P3D_SRC:?}
T=$(mktemp -d /tmp/p3d-layers.XXXXXX)
trap 'rm -rf "$T"' EXIT
fail() { echo "FAIL: $*"; exit 1; }

out=$(python3 "$src/scripts/layers.py" "$src") || { echo "$out"; fail "the tree breaks a layer rule"; }
grep -q '^no circle' <<<"$out" || fail "no verdict line"
# issue #41: no file circle is left to allow, and the list only shrinks
grep -v '^#' "$src/scripts/layers-allow.txt" | grep -q '[^[:space:]]' &&
  fail "scripts/layers-allow.txt allows a circle again: $(grep -v '^#' "$src/scripts/layers-allow.txt")"
grep -q '^  launcher/run/hub -> launcher/run/ctl ' <<<"$out" || fail "the graph does not show the nested stages"
grep -q 'launcher/run -> launcher/wire' <<<"$out" || fail "the graph does not show run -> wire"

copy() {
  rm -rf "$T/t"
  mkdir -p "$T/t/scripts"
  cp -r "$src/launcher" "$src/placement" "$src/plugins" "$T/t/"
  cp "$src/scripts/layers-allow.txt" "$T/t/scripts/"
}

# a lower stage calls a higher one: a circle
copy
printf '\nvoid p3d_loop_uses_run(void) { p3d_agent_run(0, 0, -1); }\n' >>"$T/t/launcher/loop/loop.c"
out=$(python3 "$src/scripts/layers.py" "$T/t") && fail "a call from loop/ into run/ passed"
grep -q '^circle: .*launcher/loop.*launcher/run' <<<"$out" || { echo "$out"; fail "the circle is not named"; }
grep -q 'launcher/loop/loop.c calls p3d_agent_run' <<<"$out" || fail "the edge that closes it is not shown"

# a poll outside the loop, a sleep
copy
printf '\nstatic void stray(void) { poll(0, 0, 1); usleep(5); }\n' >>"$T/t/launcher/run/agent/agent.c"
out=$(python3 "$src/scripts/layers.py" "$T/t") && fail "a poll and a usleep in agent.c passed"
grep -q 'launcher/run/agent/agent.c:[0-9]*: poll() outside the event loop' <<<"$out" || { echo "$out"; fail "poll not named"; }
grep -q 'launcher/run/agent/agent.c:[0-9]*: usleep() under launcher/' <<<"$out" || fail "usleep not named"

# a plugin reaching for an internal header
copy
sed -i '0,/#include "p3d\/plugin.h"/s//#include "rdzv.h"\n#include "p3d\/plugin.h"/' "$T/t/plugins/rdzv_etcd/rdzv_etcd.c"
out=$(python3 "$src/scripts/layers.py" "$T/t") && fail "a plugin including rdzv.h passed"
grep -q 'plugins/rdzv_etcd/rdzv_etcd.c:[0-9]*: includes "rdzv.h"' <<<"$out" || { echo "$out"; fail "plugin include not named"; }
# a stage's internal header included from above: cmd/ reaching into run/
copy
sed -i '0,/#include "launch.h"/s//#include "launch.h"\n#include "controller_int.h"/' "$T/t/launcher/cmd/cmd_launch.c"
out=$(python3 "$src/scripts/layers.py" "$T/t") && fail "cmd_launch.c including run/ctl/controller_int.h passed"
grep -q 'launcher/cmd/cmd_launch.c:[0-9]*: includes "controller_int.h" of launcher/run/ctl, which shows the stages above it only controller.h' <<<"$out" ||
  { echo "$out"; fail "the internal include is not named"; }

# and run/ reaching into rdzv/'s internals (no circle: only the header rule sees it)
copy
sed -i '0,/#include "agent.h"/s//#include "agent.h"\n#include "rdzv_tcp_internal.h"/' "$T/t/launcher/run/agent/relay.c"
out=$(python3 "$src/scripts/layers.py" "$T/t") && fail "relay.c including rdzv_tcp_internal.h passed"
grep -q 'launcher/run/agent/relay.c:[0-9]*: includes "rdzv_tcp_internal.h" of launcher/rdzv, which shows the stages above it only rdzv.h' <<<"$out" ||
  { echo "$out"; fail "the internal include is not named"; }
grep -q '^circle' <<<"$out" && fail "an include down the stages was taken for a circle"

# the table names a header its stage does not have
copy
sed -i 's/set(P3D_PUBLIC_HEADER_wire wire.h)/set(P3D_PUBLIC_HEADER_wire codec.h)/' "$T/t/launcher/CMakeLists.txt"
out=$(python3 "$src/scripts/layers.py" "$T/t") && fail "a public header that does not exist passed"
grep -q 'the public header of launcher/wire, codec.h, is not in launcher/wire/' <<<"$out" || { echo "$out"; fail "missing public header not named"; }
grep -q 'includes "wire.h" of launcher/wire, which shows the stages above it only codec.h' <<<"$out" ||
  { echo "$out"; fail "the includes of wire.h were not flagged"; }

# a launcher file on a placement stage's internals
copy
sed -i '0,/#include "ranks.h"/s//#include "ranks.h"\n#include "topo_internal.h"/' "$T/t/launcher/run/ranks/bind.c"
out=$(python3 "$src/scripts/layers.py" "$T/t") && fail "bind.c including topo_internal.h passed"
grep -q 'launcher/run/ranks/bind.c:[0-9]*: includes "topo_internal.h" of placement/topo' <<<"$out" || { echo "$out"; fail "not named"; }

# nested stages: a lower run stage calling up into a sibling closes a circle
copy
printf '\nvoid p3d_ranks_uses_hub(void) { p3d_launcher_run(0, 0, 0); }\n' >>"$T/t/launcher/run/ranks/stopper.c"
out=$(python3 "$src/scripts/layers.py" "$T/t") && fail "a call from run/ranks/ into run/hub/ passed"
grep -q '^circle: .*launcher/run/hub.*launcher/run/ranks' <<<"$out" || { echo "$out"; fail "the nested circle is not named"; }
# and a sibling's internal header is refused like any other stage's
copy
sed -i '0,/#include "agent.h"/s//#include "agent.h"\n#include "hub_int.h"/' "$T/t/launcher/run/agent/agent.c"
out=$(python3 "$src/scripts/layers.py" "$T/t") && fail "agent.c including run/hub/hub_int.h passed"
grep -q 'launcher/run/agent/agent.c:[0-9]*: includes "hub_int.h" of launcher/run/hub, which shows the stages above it only hub.h' <<<"$out" ||
  { echo "$out"; fail "the sibling's internal include is not named"; }
# file circles, inside a stage too: hub_link.c is below the other hub files
copy
printf '\nvoid hub_link_calls_up(hub *h) { hub_start_line(h, 1); }\n' >>"$T/t/launcher/run/hub/hub_link.c"
out=$(python3 "$src/scripts/layers.py" "$T/t") && fail "hub_link.c <-> hub_lines.c passed"
grep -q '^file circle: launcher/run/hub/hub_lines.c <-> launcher/run/hub/hub_link.c$' <<<"$out" ||
  { echo "$out"; fail "the file circle is not named"; }
grep -q '^  launcher/run/hub/hub_link.c -> launcher/run/hub/hub_lines.c: hub_start_line' <<<"$out" ||
  fail "the call that closes the file circle is not shown"
grep -q '^circle' <<<"$out" && fail "a file circle inside a stage was taken for a stage circle"
# an allowed circle passes, named with its line; one that grows is a new
# one (the tree has none left to allow: strbuf.c and termsafe.c made one
# until the decoder both need went down into utf8.c)
copy
printf '\nint p3d_sb_asks_term(void) { return p3d_term_clean("x", 1, 0); }\n' >>"$T/t/placement/util/strbuf.c"
out=$(python3 "$src/scripts/layers.py" "$T/t") && fail "strbuf.c <-> termsafe.c passed unlisted"
echo 'placement/util/strbuf.c <-> placement/util/termsafe.c  # planted' >>"$T/t/scripts/layers-allow.txt"
out=$(python3 "$src/scripts/layers.py" "$T/t") || { echo "$out"; fail "a circle the allow-list names failed"; }
grep -q '^file circle (allowed, scripts/layers-allow.txt:[0-9]*): placement/util/strbuf.c <-> placement/util/termsafe.c$' <<<"$out" ||
  { echo "$out"; fail "the allowed circle is not named"; }
printf '\nvoid p3d_term_says(void) { p3d_note("x"); }\n' >>"$T/t/placement/util/termsafe.c"
out=$(python3 "$src/scripts/layers.py" "$T/t") && fail "a third file joining an allowed circle passed"
grep -q '^file circle: placement/util/say.c <-> placement/util/strbuf.c <-> placement/util/termsafe.c$' <<<"$out" ||
  { echo "$out"; fail "the grown circle is not named"; }
# and the list only shrinks: a line whose circle is gone fails
copy
echo 'launcher/run/hub/hub_lines.c <-> launcher/run/hub/supervise.c  # gone' >>"$T/t/scripts/layers-allow.txt"
out=$(python3 "$src/scripts/layers.py" "$T/t") && fail "a stale line of the allow-list passed"
grep -q 'scripts/layers-allow.txt:[0-9]*: launcher/run/hub/hub_lines.c <-> launcher/run/hub/supervise.c is no circle any more' <<<"$out" ||
  { echo "$out"; fail "the stale line is not named"; }
echo ok
