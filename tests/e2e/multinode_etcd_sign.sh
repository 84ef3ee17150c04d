#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# multinode_etcd_sign.sh — etcd holds no secret and is not believed
# blindly (issue #44), against the suite's real etcd:
#  1. a stranger's leader key (its own lease, no signature, pointing at a
#     listener of its own) put before the leader publishes is ignored and
#     reported by the agent waiting for the leader, which joins the real
#     leader once it publishes; the stranger's listener gets no connection;
#  2. while the job runs, no key under /par3drun/<job>/ holds the job key's
#     bytes (every key and value read), and the leader's value is signed;
#  3. an agent without a job key is refused before it writes anything
#     (exit 2, the message names the two ways to give one).
. "$(dirname "$0")/lib/multinode_lib.sh"
etcd_up
JOB=sign-$$
P=/par3drun/$JOB/

# a stranger's listener: whoever connects leaves a mark
python3 - "$T/stranger.port" "$T/stranger.hit" <<'PY' &
import socket, sys
s = socket.socket(); s.bind(("127.0.0.1", 0)); s.listen(8)
open(sys.argv[1] + ".tmp", "w").write(str(s.getsockname()[1]))
import os; os.rename(sys.argv[1] + ".tmp", sys.argv[1])
s.settimeout(120)
try:
    c, _ = s.accept(); open(sys.argv[2], "w").write("hit"); c.close()
except OSError:
    pass
PY
SPID=$!
PIDS+=($SPID)
for _ in $(seq 200); do [ -s "$T/stranger.port" ] && break; sleep 0.05; done
SPORT=$(cat "$T/stranger.port") || { echo "FAIL: the stranger's listener did not start"; exit 1; }

# the stranger's key, with a lease of its own, before anyone published
lease=$(curl -s -m 2 "$URL/v3/lease/grant" -d '{"TTL":60}' | python3 -c 'import json,sys; print(json.load(sys.stdin)["ID"])')
curl -s -m 2 "$URL/v3/kv/put" -d "{\"key\":\"$(printf %sleader "$P" | base64 -w0)\",\"value\":\"$(printf '%s 127.0.0.1' "$SPORT" | base64 -w0)\",\"lease\":\"$lease\"}" >/dev/null ||
  { echo "FAIL: cannot put the stranger's key"; exit 1; }

# the ranks hold the job until the test has read etcd
hold='for i in $(seq 600); do [ -e "'"$T"'/go" ] && exit 0; sleep 0.1; done; exit 9'
sagent() { # sagent I: node ranks come in arrival order
  "$PAR3DRUN" --nnodes 3 --rdzv "etcd:$URL" --job-id "$JOB" --topology "${TOPOS[$1]}" --run-dir "$T/rd$1" \
    --tp 8 -- sh -c "$hold" >"$T/a$1.out" 2>"$T/a$1.err" &
  AG[$1]=$!
  PIDS+=($!)
}
waitfor() { # waitfor FILE PATTERN: until FILE has PATTERN (60 s at most)
  for _ in $(seq 600); do grep -q "$2" "$1" 2>/dev/null && return 0; sleep 0.1; done
  return 1
}
sagent 0
for _ in $(seq 600); do [ -n "$(etcd_get "${P}rank/0")" ] && break; sleep 0.1; done
sagent 1
# node rank 1 waits for the leader (node rank 2 missing): it meets the
# stranger's key first, every time
waitfor "$T/a1.err" "leader ignored" ||
  { bad "the waiting agent did not report the stranger's leader key"; sed 's/^/  /' "$T/a1.err"; }
grep -q "${P}leader ignored: not signed with this job's key" "$T/a1.err" || bad "report: $(cat "$T/a1.err")"
sagent 2
waitfor "$T/rd0/placement.json" ranks || bad "the job did not start"

# 2. every key and value under the job prefix, decoded
curl -s -m 2 "$URL/v3/kv/range" -d "{\"key\":\"$(printf %s "$P" | base64 -w0)\",\"range_end\":\"$(printf %s "${P%/}0" | base64 -w0)\"}" |
  python3 -c 'import base64,json,sys
for kv in json.load(sys.stdin).get("kvs", []):
    print(base64.b64decode(kv["key"]).decode(errors="replace"), base64.b64decode(kv.get("value", "")).decode(errors="replace"))' >"$T/keys"
grep -q "^${P}leader [0-9]* [^ ]* sig=[0-9a-f]\{64\}$" "$T/keys" || { bad "leader value not signed"; sed 's/^/  /' "$T/keys"; }
[ "$(grep -c "^${P}rank/" "$T/keys")" = 3 ] || { bad "expected 3 rank keys"; sed 's/^/  /' "$T/keys"; }
grep -qF "$P3D_RDZV_TOKEN" "$T/keys" && { bad "the job key's bytes are in etcd"; sed 's/^/  /' "$T/keys"; }
touch "$T/go"
for i in 0 1 2; do
  wait "${AG[$i]}"; rc=$?
  [ "$rc" = 0 ] || { bad "agent $i exit $rc"; sed 's/^/  /' "$T/a$i.err"; }
done
[ -e "$T/stranger.hit" ] && bad "an agent connected to the stranger's listener"
kill "$SPID" 2>/dev/null
# 3. no key, no rendezvous
rc=0
env -u P3D_RDZV_TOKEN "$PAR3DRUN" --nnodes 2 --rdzv "etcd:$URL" --job-id "nokey-$$" --topology "${TOPOS[0]}" \
  -- true >"$T/nokey.out" 2>"$T/nokey.err" || rc=$?
[ "$rc" = 2 ] || bad "case 3: no job key: exit $rc, want 2"
grep -q "needs the job's token on every node: --rdzv-token-file FILE .* or P3D_RDZV_TOKEN" "$T/nokey.err" ||
  { bad "case 3: message"; sed 's/^/  /' "$T/nokey.err"; }
[ -z "$(etcd_get "/par3drun/nokey-$$/rank/0")" ] || bad "case 3: the agent without a key registered in etcd"

[ "$fail" = 0 ] && echo "PASS multinode_etcd_sign"
exit "$fail"
