#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# dryrun-scale.sh — dry-run time and peak memory at 1,024 / 16,384 / 131,072
# GPUs (8 per node, 32 nodes per rack), JSON report, tp=8 pp=16 dp=rest.
# Prints one JSON object; figures, never pass/fail (bench/ convention).
# cpu_seconds (user + system of the dry run) moves much less than seconds
# (wall) on a shared machine: compare builds by it there.
# Targets: issue 3, 131,072 GPUs under 2 s and 1 GiB, time ~linear; issue
# 30, JSON at default limits 1,048,576 GPUs under 3 s and 131,072 under
# 0.4 s. REPEAT=N runs each case N times interleaved (sizes and formats
# alternate) and reports medians (seconds, cpu_seconds and every stage);
# load_avg_1m before and after says how shared the machine was.
#
#   bench/dryrun-scale.sh [SIZES...]      (PAR3DRUN=path/to/par3drun, default build/par3drun)
#   REPEAT=11 bench/dryrun-scale.sh 131072 1048576
#   FORMATS="text svg html" bench/dryrun-scale.sh 131072   (default "json text";
#     every format is streamed: peak_rss_mib is the placement's, not the report's)
#   EP=8 bench/dryrun-scale.sh 131072       (MoE: --ep 8, par3d.place_ep's C block operations)
# Measured (2 shared cores, load 3.7-4.6, Release build, REPEAT=5 medians):
# JSON 131,072 GPUs 0.33 s (0.21 CPU s), 1,048,576 GPUs 2.58 s (2.03 CPU s,
# 272 MiB): policy 1.22, checks 0.23, baseline 0.20, report+write 0.79 s.
# The build before issue 30 (REPEAT=3, load 3.7-7.1): 1.05 s and 7.19 s
# (5.45 CPU s, 648 MiB): policy 3.25, checks 0.37, baseline 1.55, report
# 0.92, write 0.92 s.
# Streamed reports (FORMATS="text svg html", REPEAT=1, load 15-21): 131,072
# GPUs text/svg/html 0.18/0.55/0.53 CPU s at 39 MiB each; 1,048,576 GPUs
# 1.80/2.24/2.14 CPU s at 271 MiB each (the SVG was 1.5 GiB before
# streaming). EP=8 at 131,072 GPUs: JSON 0.37 CPU s, policy 0.46 s.
set -euo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
bin=${PAR3DRUN:-$here/build/par3drun}
sizes=("$@")
[ ${#sizes[@]} -gt 0 ] || sizes=(1024 16384 131072)
[ -x "$bin" ] || { echo "dryrun-scale: no par3drun at $bin (set PAR3DRUN)" >&2; exit 2; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
export P3D_DATA_DIR=${P3D_DATA_DIR:-$here}
unset SLURM_JOB_NODELIST
export P3D_BENCH_FORMATS=${FORMATS:-json text} P3D_BENCH_EP=${EP:-1}
exec python3 - "$bin" "$here" "$tmp" "${REPEAT:-1}" "${sizes[@]}" <<'PY'
import json, os, re, statistics, sys, time

binp, here, tmp = sys.argv[1:4]
repeat = max(1, int(sys.argv[4]))
sizes = [int(s) for s in sys.argv[5:]]
formats = os.environ["P3D_BENCH_FORMATS"].split()
ep = int(os.environ["P3D_BENCH_EP"])
topo = os.path.join(here, "examples/topologies/dgx-h100.xml")

def gen(gpus):
    """8 GPUs per node, 32 nodes per rack, nodes listed rack by rack in
    hostlist ranges (one entry per rack, as admins write them)."""
    nodes = gpus // 8
    racks = max(1, nodes // 32)
    ent = []
    for r in range(racks):
        lo, hi = r * 32 + 1, min(nodes, (r + 1) * 32)
        ent.append({"name": "node[%06d-%06d]" % (lo, hi), "topology": topo, "rack": "rack%04d" % (r + 1)})
    path = os.path.join(tmp, "cluster-%d.json" % gpus)
    with open(path, "w") as f:
        json.dump({"nodes": ent}, f)
    return path, nodes, racks

def run(argv):
    t0 = time.monotonic()
    pid = os.fork()
    if pid == 0:
        fd = os.open(os.path.join(tmp, "stderr"), os.O_WRONLY | os.O_CREAT | os.O_TRUNC)
        os.dup2(fd, 2)
        os.execv(argv[0], argv)
    _, status, ru = os.wait4(pid, 0)
    wall = time.monotonic() - t0
    err = open(os.path.join(tmp, "stderr")).read()
    return os.waitstatus_to_exitcode(status), wall, ru.ru_maxrss / 1024.0, ru.ru_utime + ru.ru_stime, err

def load():
    return round(os.getloadavg()[0], 2)

out = {"bench": "dryrun-scale", "binary": binp, "mesh": "tp=8 pp=16 dp=rest" + (" ep=%d" % ep if ep > 1 else ""),
       "repeat": repeat,
       "load_avg_1m_before": load(), "runs": []}
clusters = {gpus: gen(gpus) for gpus in sizes}
samples = {}
for it in range(repeat):
    for gpus in sizes:
        cl, nodes, racks = clusters[gpus]
        for fmt in formats:
            rep = os.path.join(tmp, "report." + fmt)
            rc, wall, rss, cpu, err = run([binp, "--dry-run", "--verbose", "--cluster", cl, "--tp", "8", "--pp", "16",
                                           "--ep", str(ep), "--format", fmt, "--output", rep])
            stages = {}
            m = re.search(r"cluster\+job ([\d.]+) s, policy ([\d.]+) s, checks ([\d.]+) s, baseline ([\d.]+) s, "
                          r"report ([\d.]+) s, write ([\d.]+) s", err)
            if m:
                stages = dict(zip(("cluster_job", "policy", "checks", "baseline", "report", "write"),
                                  map(float, m.groups())))
                stages["rest"] = round(wall - sum(stages.values()), 3)  # start-up, frees, exit
            samples.setdefault((gpus, fmt), []).append({
                "exit": rc, "seconds": wall, "cpu_seconds": cpu, "peak_rss_mib": rss,
                "report_bytes": os.path.getsize(rep) if os.path.exists(rep) else 0, "stages_s": stages,
                "error": err.strip().splitlines()[-1] if rc not in (0, 2) and err.strip() else None})
for gpus in sizes:
    cl, nodes, racks = clusters[gpus]
    for fmt in formats:
        ss = samples[(gpus, fmt)]
        med = lambda k: round(statistics.median(x[k] for x in ss), 3)
        keys = ss[0]["stages_s"].keys()
        stages = {k: round(statistics.median(x["stages_s"].get(k, 0.0) for x in ss), 3) for k in keys}
        out["runs"].append({"gpus": gpus, "nodes": nodes, "racks": racks, "format": fmt,
                            "exit": max(x["exit"] for x in ss), "seconds": med("seconds"),
                            "seconds_min": round(min(x["seconds"] for x in ss), 3),
                            "cpu_seconds": med("cpu_seconds"), "peak_rss_mib": round(max(x["peak_rss_mib"] for x in ss), 1),
                            "report_bytes": ss[-1]["report_bytes"], "stages_s": stages,
                            "error": next((x["error"] for x in ss if x["error"]), None)})
out["load_avg_1m_after"] = load()
runs = [r for r in out["runs"] if r["format"] == "json"]
if len(runs) >= 2 and runs[0]["seconds"] > 0:
    out["json_time_ratio_per_gpu_ratio"] = [round((b["seconds"] / a["seconds"]) / (b["gpus"] / a["gpus"]), 3)
                                            for a, b in zip(runs, runs[1:])]
print(json.dumps(out, indent=2))
PY
