#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# join_rdzv_refusals.sh — par3drun --join through a rendezvous that cannot
# find a running job's leader is refused at once, exit 2, naming what to
# use instead (docs/multinode.md, "Adding a node to a running job"): k8s
# (static:LEADER:PORT), slurm (static or etcd); through etcd without
# --job-id (the prefix it reads). No job runs, nothing listens.
set -u
fail=0
T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT
head -c 24 /dev/urandom | base64 >"$T/tok"
chmod 600 "$T/tok"
topo=$P3D_FIXTURES/realdata/topo/dgx-a100_12nic.txt
# refused SPEC WANT: --join --rdzv SPEC exits 2 and its message has WANT
refused() {
  local rc=0
  "$PAR3DRUN" --join --rdzv "$1" --rdzv-token-file "$T/tok" --topology "$topo" --run-dir "$T/rd" \
    -- true >"$T/out" 2>"$T/err" || rc=$?
  [ "$rc" = 2 ] || { echo "FAIL: --join --rdzv $1: exit $rc, want 2"; sed 's/^/  /' "$T/err"; fail=1; }
  grep -q -- "$2" "$T/err" || { echo "FAIL: --join --rdzv $1: message lacks \"$2\""; sed 's/^/  /' "$T/err"; fail=1; }
}
refused k8s "finds the leader by the pod's Job index.*join through --rdzv static:LEADER:PORT"
refused k8s:10.0.0.1:29400 "join through --rdzv static:LEADER:PORT"
refused slurm "--rdzv static:HOST:PORT.*or --rdzv etcd:URL --job-id ID; joining through --rdzv slurm is not supported"
if [ -f "$P3D_PLUGIN_DIR/p3d_rdzv_etcd.so" ]; then
  env -u SLURM_JOB_ID "$PAR3DRUN" --join --rdzv etcd:http://127.0.0.1:9 --rdzv-token-file "$T/tok" \
    --topology "$topo" --run-dir "$T/rd" -- true >"$T/out" 2>"$T/err"
  rc=$?
  [ "$rc" = 2 ] || { echo "FAIL: etcd without --job-id: exit $rc, want 2"; fail=1; }
  grep -q -- "--rdzv etcd needs --job-id ID" "$T/err" || { echo "FAIL: etcd without --job-id: message"; sed 's/^/  /' "$T/err"; fail=1; }
  # etcd that does not answer: said, exit 2 (nothing to join)
  rc=0
  "$PAR3DRUN" --join --rdzv etcd:http://127.0.0.1:9 --job-id j1 --rdzv-timeout 2 --rdzv-token-file "$T/tok" \
    --topology "$topo" --run-dir "$T/rd" -- true >"$T/out" 2>"$T/err" || rc=$?
  [ "$rc" = 2 ] || { echo "FAIL: etcd down: exit $rc, want 2"; sed 's/^/  /' "$T/err"; fail=1; }
  grep -q -- "--join: cannot read the job's leader from etcd" "$T/err" || { echo "FAIL: etcd down: message"; sed 's/^/  /' "$T/err"; fail=1; }
fi
[ "$fail" = 0 ] && echo "PASS join_rdzv_refusals"
exit "$fail"
