#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# launch_alloc.sh — the node's allocation at the environment level (no
# scheduler daemons): SLURM_STEP_GPUS with a renumbered or physical
# CUDA_VISIBLE_DEVICES, an inherited list of indices or GPU UUIDs. Ranks
# run on the allocated GPUs only and name them with the inherited entries;
# --nproc-per-node beyond the allocation is one line naming it; topo and
# the dry-run report say which GPUs were excluded and why.
. "$(dirname "$0")/lib/launch_common.sh"
unset SLURM_JOB_ID SLURM_JOB_NODELIST SLURM_STEP_GPUS SLURM_JOB_GPUS CUDA_VISIBLE_DEVICES
H100=$P3D_SRC/examples/topologies/dgx-h100.xml
DGX2=$P3D_SRC/tests/fixtures/realdata/hwloc/hwloc-tests-nvidiaDGX2.xml
W='echo "rank=$RANK cvd=$CUDA_VISIBLE_DEVICES local=$LOCAL_RANK pci=$P3D_GPU_PCI"'
# PCI addresses of GPUs 4-7 of the topology (from its own JSON)
pcis=$("$PAR3DRUN" topo --topology "$H100" --format json | python3 -c 'import json,sys
d=json.load(sys.stdin); print(" ".join(g["pci"] for g in d["gpus"][4:8]))')
[ -n "$pcis" ] || fail "no PCI addresses from topo --format json"

# ---- 1. a step given GPUs 4-7, renumbered 0-3 by the cgroup --------------------
SLURM_STEP_GPUS=4,5,6,7 CUDA_VISIBLE_DEVICES=0,1,2,3 "$PAR3DRUN" --topology "$H100" --tp 2 --pp 2 -- sh -c "$W" \
  >"$T/out" 2>&1 || { cat "$T/out"; fail "renumbered: exit $?"; }
[ "$(grep -c '^.*rank=' "$T/out")" = 4 ] || { cat "$T/out"; fail "renumbered: not 4 ranks"; }
for p in $(grep -o 'pci=[^ ]*' "$T/out" | cut -d= -f2); do
  case " $pcis " in *" $p "*) ;; *) fail "renumbered: a rank on $p, outside GPUs 4-7 ($pcis)" ;; esac
done
[ "$(grep -o 'pci=[^ ]*' "$T/out" | sort -u | wc -l)" = 4 ] || fail "renumbered: ranks share GPUs"
for c in $(grep -o 'cvd=[^ ]*' "$T/out" | cut -d= -f2); do
  [ "$(echo "$c" | tr , '\n' | sort | tr '\n' ,)" = "0,1,2,3," ] || fail "renumbered: CUDA_VISIBLE_DEVICES=$c is not a permutation of 0-3"
done

# ---- 2. the same GPUs, not renumbered: the entries are the physical indices -----
SLURM_STEP_GPUS=4,5,6,7 CUDA_VISIBLE_DEVICES=4,5,6,7 "$PAR3DRUN" --topology "$H100" --tp 4 -- sh -c "$W" \
  >"$T/out" 2>&1 || { cat "$T/out"; fail "physical: exit $?"; }
for c in $(grep -o 'cvd=[^ ]*' "$T/out" | cut -d= -f2); do
  [ "$(echo "$c" | tr , '\n' | sort | tr '\n' ,)" = "4,5,6,7," ] || fail "physical: CUDA_VISIBLE_DEVICES=$c"
done

# ---- 3. outside Slurm: an inherited list of UUIDs -------------------------------
u=$("$PAR3DRUN" topo --topology "$DGX2" --format json | python3 -c 'import json,sys
d=json.load(sys.stdin); print(len(d["gpus"]))')
[ "${u:-0}" -ge 4 ] || fail "DGX-2 fixture: $u GPUs"
uu=$(grep -o 'GPU-[0-9a-f-]*' "$DGX2" | head -3 | tr '\n' , | sed 's/,$//')
CUDA_VISIBLE_DEVICES=$uu "$PAR3DRUN" --topology "$DGX2" --tp 3 -- sh -c "$W" >"$T/out" 2>&1 ||
  { cat "$T/out"; fail "uuids: exit $?"; }
[ "$(grep -c 'rank=' "$T/out")" = 3 ] || { cat "$T/out"; fail "uuids: not 3 ranks"; }
for c in $(grep -o 'cvd=[^ ]*' "$T/out" | cut -d= -f2); do
  [ "$(echo "$c" | tr , '\n' | sort | tr '\n' ,)" = "$(echo "$uu" | tr , '\n' | sort | tr '\n' ,)" ] ||
    fail "uuids: CUDA_VISIBLE_DEVICES=$c, not the inherited UUIDs"
done

# ---- 4. more ranks than the allocation: one line, exit 2, naming it ---------------
rc=0; SLURM_STEP_GPUS=4,5,6,7 "$PAR3DRUN" --topology "$H100" --nproc-per-node 8 -- true >"$T/out" 2>&1 || rc=$?
[ "$rc" = 2 ] || fail "nproc 8 in a 4-GPU step: exit $rc"
grep -q -- '--nproc-per-node 8: the allocation gives this node 4 GPUs (SLURM_STEP_GPUS=4,5,6,7)' "$T/out" ||
  fail "nproc message: $(cat "$T/out")"
[ "$(wc -l <"$T/out")" = 1 ] || fail "nproc message is not one line"
# a world larger than the allocation is refused as well
rc=0; SLURM_JOB_GPUS=0,1 "$PAR3DRUN" --topology "$H100" --tp 4 -- true >"$T/out" 2>&1 || rc=$?
[ "$rc" = 2 ] || fail "tp 4 on 2 allocated GPUs: exit $rc"

# ---- 5. topo and the dry run say what was excluded and why ------------------------
SLURM_STEP_GPUS=4,5,6,7 "$PAR3DRUN" topo --topology "$H100" >"$T/out" 2>&1 || fail "topo: exit $?"
grep -q 'allocation: GPUs 0-3 of 8 excluded, not in SLURM_STEP_GPUS=4,5,6,7' "$T/out" || fail "topo: no exclusion note"
CUDA_VISIBLE_DEVICES=1,3 "$PAR3DRUN" --dry-run --topology "$H100" --tp 2 >"$T/out" 2>&1 || fail "dry-run: exit $?"
tr -s ' \n' '  ' <"$T/out" | grep -q 'GPUs 0,2,4-7 of 8 excluded, not in CUDA_VISIBLE_DEVICES=1,3' ||
  fail "dry-run: no exclusion note: $(grep -i alloc "$T/out")"

# ---- 6. --emulate: every emulated node takes this host's allocation ----------------
CUDA_VISIBLE_DEVICES=2,3 "$PAR3DRUN" --emulate --cluster "$CLUSTER" --tp 2 --pp 2 -- sh -c "$W" >"$T/out" 2>&1 ||
  { cat "$T/out"; fail "emulate: exit $?"; }
[ "$(grep -c 'rank=' "$T/out")" = 4 ] || fail "emulate: not 4 ranks"
for c in $(grep -o 'cvd=[^ ]*' "$T/out" | cut -d= -f2); do
  [ "$(echo "$c" | tr , '\n' | sort | tr '\n' ,)" = "2,3," ] || fail "emulate: CUDA_VISIBLE_DEVICES=$c"
done
# ---- 7. CPUs: binding stays inside the allowed set (taskset stands in for
# Slurm's cpuset); a rank whose NUMA CPUs are all outside gets the nearest
# allowed ones and --report-bindings says so; one warning for too few CPUs
if command -v taskset >/dev/null && [ "$(nproc --all)" -ge 2 ]; then
  last=$(( $(nproc --all) - 1 ))
  taskset -c "$last" "$PAR3DRUN" --nproc-per-node 2 --bind core --report-bindings -- \
    sh -c 'grep Cpus_allowed_list /proc/self/status' >"$T/out" 2>&1 || { cat "$T/out"; fail "taskset: exit $?"; }
  [ "$(grep -c 'Cpus_allowed_list:' "$T/out")" = 2 ] || { cat "$T/out"; fail "taskset: not 2 ranks"; }
  grep 'Cpus_allowed_list:' "$T/out" | grep -qv "Cpus_allowed_list:[[:space:]]*$last\$" &&
    { cat "$T/out"; fail "taskset: a rank was bound outside the allowed CPU $last"; }
  grep -q 'outside the allowed set: nearest allowed' "$T/out" || { cat "$T/out"; fail "taskset: no nearest-allowed note"; }
  [ "$(grep -c 'may use 1 CPU for 2 local ranks' "$T/out")" = 1 ] || { cat "$T/out"; fail "taskset: not one warning"; }
fi
echo "PASS launch_alloc"
