# SPDX-License-Identifier: BSD-3-Clause
# Sourced by the tests that run a PyTorch program: PY is a python3 that
# imports torch.distributed (exported as PAR3D_PYTHON), else the test is
# skipped (77).
PY=
for p in python3 /usr/bin/python3; do
  if command -v "$p" >/dev/null && "$p" -c 'import torch.distributed' 2>/dev/null; then PY=$(command -v "$p"); break; fi
done
[ -n "$PY" ] || { echo "SKIP: no python3 here imports torch (apt-get install python3-torch)"; exit 77; }
export PAR3D_PYTHON=$PY
