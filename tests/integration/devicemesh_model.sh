#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# The devicemesh policy against an independent model of PyTorch's DeviceMesh
# layout (tests/tools/devicemesh_model.py): 38 meshes of 1 to 5 dimensions,
# torchtitan's names (dp_replicate x dp_shard = dp, the EP sparse mesh), the
# meshes Megatron refuses but init_device_mesh accepts; coordinates, groups
# and the printed init_device_mesh calls must all agree with the model.
set -u
: "${PAR3DRUN:?PAR3DRUN must point at the par3drun binary}"
: "${P3D_SRC:?P3D_SRC must point at the source tree}"
cd "$P3D_SRC" || exit 1
unset SLURM_JOB_NODELIST
python3 tests/tools/devicemesh_model.py "$PAR3DRUN" tests/fixtures/clusters/plan-16x-dgx-h100-2racks.json
