#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# multinode_pmix.sh — Open MPI's mpirun (a real PMIx server) starts four
# par3drun agents, each with a different fixture topology chosen by its MPI
# rank; they bootstrap over PMIx (p3d_rdzv_pmix.so) and agree on one
# 4-node placement, written byte for byte the same on every "node".
. "$(dirname "$0")/lib/multinode_lib.sh"
command -v mpirun >/dev/null || { echo "SKIP: mpirun (Open MPI) not installed"; exit 77; }
[ -f "$P3D_PLUGIN_DIR/p3d_rdzv_pmix.so" ] || { echo "SKIP: p3d_rdzv_pmix.so not built (libpmix-dev missing)"; exit 77; }
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
# sanitizer build: libpmix (and the libevent/hwloc it pulls in) keep
# allocations past PMIx_Finalize; those are theirs, not par3drun's
printf 'leak:libpmix\nleak:libevent\nleak:libhwloc\nleak:libmca\n' >"$T/lsan.supp"
export LSAN_OPTIONS="suppressions=$T/lsan.supp${LSAN_OPTIONS:+:$LSAN_OPTIONS}"
cat >"$T/wrap.sh" <<EOW
#!/bin/sh
# one fixture topology per MPI rank
case "\$OMPI_COMM_WORLD_RANK" in
0) t="${TOPOS[0]}";; 1) t="${TOPOS[1]}";; 2) t="${TOPOS[2]}";; *) t="${TOPOS[3]}";;
esac
exec "$PAR3DRUN" --topology "\$t" --tp 8 --run-dir "$T/run\$OMPI_COMM_WORLD_RANK" "\$@"
EOW
chmod +x "$T/wrap.sh"
timeout 120 mpirun --oversubscribe -n 4 "$T/wrap.sh" -- sh -c 'echo "rank=$RANK node=$NODE_RANK"' \
  >"$T/out" 2>"$T/err"
rc=$?
[ "$rc" = 0 ] || { bad "mpirun exit $rc"; sed 's/^/  /' "$T/err" | head -20; }
for i in 0 1 2 3; do [ -s "$T/run$i/placement.json" ] || bad "no placement.json on node $i"; done
s0=$(md5sum <"$T/run0/placement.json")
for i in 1 2 3; do [ "$(md5sum <"$T/run$i/placement.json")" = "$s0" ] || bad "placement of node $i differs"; done
[ "$(grep -c 'rank=' "$T/out")" = 32 ] || bad "expected 32 ranks, got $(grep -c 'rank=' "$T/out")"
grep -q 'rank=31 node=3' "$T/out" || bad "rank 31 not on node 3"
# four different machines: node 2 (A6000, no NIC rows) and node 3 (RTX 4090,
# NIC0) must show their own facts in the one placement
grep -q '"node": "[^"]*:2", .*"nic": null' "$T/run0/placement.json" || bad "node 2's topology (no NIC) not used"
grep -q '"node": "[^"]*:3", .*"nic": "NIC0"' "$T/run0/placement.json" || bad "node 3's topology (NIC0) not used"
grep -q '"node": "[^"]*:0", .*"nic": "mlx5_' "$T/run0/placement.json" || bad "node 0's topology (mlx5) not used"
grep -q '"cluster": "rendezvous:pmix"' "$T/run0/placement.json" || bad "inputs.cluster does not name the rendezvous"
[ "$fail" = 0 ] && echo "PASS multinode_pmix"
exit "$fail"
