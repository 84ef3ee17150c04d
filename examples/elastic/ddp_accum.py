#!/usr/bin/env python3
# SPDX-License-Identifier: BSD-3-Clause
"""ddp_accum.py - a DDP training loop that keeps its global batch at any
data-parallel width: par3drun's P3D_GLOBAL_BATCH, P3D_MICRO_BATCH and
P3D_MICRO_BATCHES say the step's batch B, the micro-batch b and how many
micro-batches m each replica accumulates (B = world x b x m), and the
step's samples are the same B samples, in the same order, whatever the
width. A checkpoint holds the step, the model and the optimizer (all
replicas hold the same), so a run stopped at one width resumes at another
and its losses are those of a run that never stopped.

    par3drun --nproc-per-node 4 --global-batch 24 --micro-batch 2 \\
        ddp_accum.py --steps 8 --ckpt ck.pt --log loss.txt

CPU and gloo, so that it runs anywhere; a GPU program differs only in the
device and the nccl backend. Options: --steps N (train to step N), --ckpt
FILE (resume from it when it exists; written after every step), --log FILE
(rank 0 appends "step S width W loss L" lines).

After each step every rank writes par3drun's progress line to
$P3D_HEARTBEAT (docs/launch.md, "When a node is slow"), its ckpt= the step
just saved: a job that shrank grows back at the first such checkpoint, not
--grow-wait later (tests/e2e/elastic_torch_grow.sh runs it shrinking and
growing under par3drun).
"""
import argparse
import contextlib
import os
import time

import torch
import torch.distributed as dist
import torch.nn as nn

SAMPLES = 4096  # the data set: sample k of the whole run is SAMPLES[k % 4096]


def dataset():
    g = torch.Generator().manual_seed(1234)
    x = torch.randn(SAMPLES, 16, generator=g, dtype=torch.float64)
    w = torch.randn(16, 1, generator=g, dtype=torch.float64)
    return x, x @ w + 0.1 * torch.randn(SAMPLES, 1, generator=g, dtype=torch.float64)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--steps", type=int, required=True)
    ap.add_argument("--ckpt", required=True)
    ap.add_argument("--log")
    a = ap.parse_args()

    dist.init_process_group("gloo")
    dp, r = dist.get_world_size(), dist.get_rank()
    # the ten lines of docs/launch.md, "Elastic width"
    m = int(os.environ.get("P3D_MICRO_BATCHES", "1"))
    b = int(os.environ.get("P3D_MICRO_BATCH", "1"))
    B = int(os.environ.get("P3D_GLOBAL_BATCH", str(m * b * dp)))
    assert B == dp * b * m, f"P3D_GLOBAL_BATCH {B} != {dp} x {b} x {m}"

    torch.manual_seed(0)
    model = nn.Linear(16, 1).double()
    opt = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
    step = 0
    if os.path.exists(a.ckpt):
        ck = torch.load(a.ckpt)
        model.load_state_dict(ck["model"])
        opt.load_state_dict(ck["opt"])
        step = ck["step"]
    ddp = nn.parallel.DistributedDataParallel(model)
    x, y = dataset()
    loss_fn = nn.MSELoss(reduction="mean")
    hb = os.environ.get("P3D_HEARTBEAT")

    while step < a.steps:
        total = torch.zeros(1, dtype=torch.float64)
        t0 = time.perf_counter()
        for i in range(m):
            lo = step * B + (r * m + i) * b  # this replica's i-th micro-batch of step `step`
            idx = torch.arange(lo, lo + b) % SAMPLES
            with ddp.no_sync() if i < m - 1 else contextlib.nullcontext():
                loss = loss_fn(ddp(x[idx]), y[idx])
                # DDP averages over dp replicas: scaled so the gradient is the mean over B
                (loss * b / B * dp).backward()
            total += loss.detach() * b
        busy = time.perf_counter() - t0  # the last backward's all-reduce included: a tiny model
        opt.step()
        opt.zero_grad()
        dist.all_reduce(total)
        step += 1
        if r == 0:
            tmp = a.ckpt + ".tmp"
            torch.save({"step": step, "model": model.state_dict(), "opt": opt.state_dict()}, tmp)
            os.replace(tmp, a.ckpt)  # whole or not at all
            if a.log:
                with open(a.log, "a") as f:
                    f.write(f"step {step} width {dp} loss {total.item() / B:.12e}\n")
        dist.barrier()  # nobody starts a step rank 0 has not committed
        if hb:  # the progress line: step `step` done, its checkpoint durable
            with open(hb + ".tmp", "w") as f:
                f.write(f"step={step} busy={busy:.6f} ckpt={step}\n")
            os.replace(hb + ".tmp", hb)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
