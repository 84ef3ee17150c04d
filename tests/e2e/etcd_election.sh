#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# etcd_election.sh — the etcd rendezvous plugin's leadership (campaign,
# keep, notify_fd, news of p3d/plugin.h) against the suite's real etcd
# (tests/services/etcd.sh): the harness etcd_election.c plays three agents
# (node ranks 0..2, lease TTL 2 s) in one process and checks that
#  (a) a campaign cannot win while the leader's lease holds the leadership,
#      gives up at its deadline (NOT_WON naming the holder, not its token),
#      and a replaced bid says nothing;
#  (b) keep() puts the leader's state with the job lease (not its own: it
#      outlives the leader), the newest text wins;
#  (c) once the leader's lease is gone its successor (nobody ahead) wins
#      with the text the old leader kept and adopts the job lease, and the
#      node behind it (its successor alive) does not; leader then holds the
#      winner's value and lease;
#  (d) a lease revoked behind an agent's back is LEASE_LOST news, and a
#      close with a bid running ends at once;
#  (f) a squatter that replaces the live leader's key (its own lease, an
#      unsigned value) is noticed and the leader's signed value put back;
#  (e) with etcd frozen (SIGSTOP) a campaign keeps trying until its
#      deadline, and a lease nobody could renew for a TTL is LEASE_LOST.
# At the end etcd holds no key of the job.
. "$(dirname "$0")/lib/multinode_lib.sh"
etcd_up

HARNESS=$P3D_BUILD/tests/e2e/etcd_election
SO=${P3D_PLUGIN_DIR:-$P3D_BUILD/plugins}/p3d_rdzv_etcd.so
[ -x "$HARNESS" ] || { echo "FAIL: $HARNESS not built (make etcd_election)"; exit 1; }
epid=$(cat "$E/etcd.pid")
rc=0
timeout 120 "$HARNESS" "$SO" "$URL" "$epid" >"$T/out" 2>"$T/err" || rc=$?
kill -CONT "$epid" 2>/dev/null # a harness that died with etcd frozen
cat "$T/out"
if [ "$rc" != 0 ]; then
  bad "the harness exited $rc; its stderr:"
  sed 's/^/  /' "$T/err"
fi
grep -q '^ok: 0 check(s) failed$' "$T/out" || bad "the harness did not finish its checks"
# the frozen case's leases could not be revoked: they go with their TTL (2 s;
# the job lease of a leader that lost its own: 2 x 2 + 10 s)
for _ in $(seq 40); do [ "$(nkeys)" = 0 ] && break; sleep 0.5; done
[ "$(nkeys)" = 0 ] || bad "$(nkeys) keys of the job outlived its leases (TTL 2 s, the job lease's 14 s)"
[ "$fail" = 0 ] && echo "PASS etcd_election"
exit "$fail"
