#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# The agent store (docs/torchrun.md, "init_process_group"): par3drun
# serves torch's TCPStore at MASTER_ADDR:MASTER_PORT before any rank
# starts. Four gloo ranks see TORCHELASTIC_USE_AGENT_STORE=True (torch then
# makes every rank a client: nothing but par3drun serves the port) and
# run init_process_group, a barrier and an all-reduce; a restart
# (--max-restarts) gets a fresh store: a key that generation 0 added to
# with a raw, unprefixed client starts again at 1 in generation 1, and
# the store holds as many keys after generation 1's init as after 0's; --no-agent-store gives the ranks'
# rank 0 the store back (False). Skipped (77) when no python3 here imports
# torch (Debian: apt-get install python3-torch).
. "$(dirname "$0")/lib/launch_common.sh"
. "$(dirname "$0")/lib/torch_py.sh"
export TMPDIR=$T

cat >"$T/prog.py" <<'PY'
import datetime, os, sys
import torch, torch.distributed as dist
from torch.distributed import TCPStore
gen = int(os.environ["TORCHELASTIC_RESTART_COUNT"])
raw = None
if os.environ["TORCHELASTIC_USE_AGENT_STORE"] == "True":
    # the store as it is, without torch's per-attempt prefix
    raw = TCPStore(os.environ["MASTER_ADDR"], int(os.environ["MASTER_PORT"]), None, False,
                   timeout=datetime.timedelta(seconds=60), wait_for_workers=False)
dist.init_process_group("gloo")
rank = dist.get_rank()
dist.barrier()
t = torch.ones(1) * (rank + 1)
dist.all_reduce(t)
seen = None
if raw is not None and rank == 0:
    # ADD answers the count after it: 1 for "leak" in a fresh store; and
    # the keys torch's ranks wrote are as many in each generation
    seen = raw.add("leak", 1), raw.num_keys()
dist.barrier()
print("GEN %d RANK %d STORE %s SUM %d SEEN %s" % (gen, rank, os.environ["TORCHELASTIC_USE_AGENT_STORE"],
      int(t.item()), seen), flush=True)
if gen == 0 and len(sys.argv) > 1 and rank == 1:
    sys.exit(3)  # generation 0 fails: par3drun restarts every rank
dist.destroy_process_group()
PY

# one generation, 4 ranks
(cd "$T" && "$PAR3DRUN" --nproc-per-node 4 --no-tag-output prog.py) >"$T/a.out" 2>"$T/a.err" ||
  { cat "$T/a.out" "$T/a.err"; fail "4 ranks on the agent store failed"; }
[ "$(grep -c '^GEN 0 RANK [0-3] STORE True SUM 10 ' "$T/a.out")" = 4 ] ||
  { cat "$T/a.out"; fail "not 4 ranks with TORCHELASTIC_USE_AGENT_STORE=True and the all-reduce's sum 10"; }
seen=$(sed -n 's/^GEN 0 RANK 0 STORE True SUM 10 SEEN \((1, [0-9]*)\)$/\1/p' "$T/a.out")
[ -n "$seen" ] || { cat "$T/a.out"; fail "a fresh store held 'leak'"; }

# a restart: generation 1 starts on an empty store
(cd "$T" && "$PAR3DRUN" --nproc-per-node 4 --max-restarts 1 --no-tag-output prog.py fail) >"$T/r.out" 2>"$T/r.err" ||
  { cat "$T/r.out" "$T/r.err"; fail "the restarted job failed"; }
grep -q "^GEN 0 RANK 0 STORE True SUM 10 SEEN $seen\$" "$T/r.out" || { cat "$T/r.out"; fail "generation 0 did not run"; }
grep -q "^GEN 1 RANK 0 STORE True SUM 10 SEEN $seen\$" "$T/r.out" ||
  { cat "$T/r.out" "$T/r.err"; fail "generation 1 saw generation 0's keys (want SEEN $seen, as generation 0)"; }
[ "$(grep -c '^GEN 1 RANK [0-3] STORE True SUM 10 ' "$T/r.out")" = 4 ] || { cat "$T/r.out"; fail "generation 1: not 4 ranks"; }

# --no-agent-store: the ranks' rank 0 serves it, as before
(cd "$T" && "$PAR3DRUN" --nproc-per-node 2 --no-agent-store --no-tag-output prog.py) >"$T/n.out" 2>"$T/n.err" ||
  { cat "$T/n.out" "$T/n.err"; fail "--no-agent-store failed"; }
[ "$(grep -c '^GEN 0 RANK [01] STORE False SUM 3 SEEN None$' "$T/n.out")" = 2 ] ||
  { cat "$T/n.out"; fail "--no-agent-store: want TORCHELASTIC_USE_AGENT_STORE=False on 2 ranks"; }
echo "ok"
