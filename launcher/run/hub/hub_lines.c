/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * hub_lines.c — what a person sees of a job from the hub: the start line,
 * the end line, and the words for the slowest recovery.
 */
#include "hub_int.h"
#include "rundir.h"
#include "termsafe.h"

#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* "slowest recovery 1.62 s to respawn (failure seen -> all ranks
 * running), 2.31 s to training resumed (-> first heartbeat or output)",
 * or why there is no such figure (the job ended during a recovery; the
 * restarted ranks never beat nor printed). The respawn figure alone is
 * not when training goes on: the ranks still load, rendezvous and read
 * their checkpoint. */
void hub_recovery_text(const p3d_ctl *c, char *buf, size_t cap)
{
    double t = p3d_ctl_recovery_max(c), r = p3d_ctl_resumed_max(c);
    char res[96];
    if (r >= 0)
        snprintf(res, sizeof res, ", %.2f s to training resumed (-> first heartbeat or output)", r);
    else
        snprintf(res, sizeof res, ", training resumed not seen (no heartbeat or output after a restart)");
    if (t >= 0)
        snprintf(buf, cap, "slowest recovery %.2f s to respawn (failure seen -> all ranks running)%s%s", t, res,
                 p3d_ctl_recovering(c) ? "; the job ended during the last one" : "");
    else
        snprintf(buf, cap, "no recovery completed%s",
                 p3d_ctl_recovering(c) ? " (the job ended while its ranks were being restarted)" : "");
}

/* What a person sees of a job: one line at the start (job id, mesh,
 * nodes, spares, run directory) and one at the end (docs/launch.md). */
void hub_start_line(hub *h, int nnodes)
{
    const p3d_launch *L = h->L;
    const p3d_mesh *m = &L->job->pl->mesh;
    static const struct {
        int dim;
        const char *name;
    } dims[] = {{P3D_DIM_TP, "tp"}, {P3D_DIM_CP, "cp"}, {P3D_DIM_EP, "ep"}, {P3D_DIM_PP, "pp"}, {P3D_DIM_DP, "dp"}};
    char mesh[128] = "";
    size_t k = 0;
    for (size_t i = 0; i < sizeof dims / sizeof dims[0] && k < sizeof mesh; i++) {
        int n = p3d_mesh_size(m, dims[i].dim);
        if (n > 1 || dims[i].dim == P3D_DIM_TP || dims[i].dim == P3D_DIM_PP || dims[i].dim == P3D_DIM_DP)
            k += (size_t)snprintf(mesh + k, sizeof mesh - k, "%s%s%d", k ? " " : "", dims[i].name, n);
    }
    int spares = 0;
    for (size_t i = 0; i < L->job->cluster->nnodes; i++)
        spares += L->job->cluster->nodes[i].role == P3D_NODE_SPARE;
    char line[PATH_MAX + 512], sp[48] = "";
    if (spares)
        snprintf(sp, sizeof sp, ", %d spare%s", spares, spares == 1 ? "" : "s");
    snprintf(line, sizeof line, "par3drun: job %s: %d rank%s (%s) on %d node%s%s; run dir %s\n", L->job->job_id,
             L->job->pl->world, L->job->pl->world == 1 ? "" : "s", mesh, nnodes - spares,
             nnodes - spares == 1 ? "" : "s", sp, L->run_dir);
    hub_note(h, line);
    /* torchrun says it too: the ranks' OpenMP threads are ours to size */
    int omp_given = getenv("OMP_NUM_THREADS") != NULL;
    for (size_t i = 0; i < L->nextra && !omp_given; i++)
        omp_given = !strncmp(L->extra_env[i], "OMP_NUM_THREADS=", 16);
    if (!omp_given && L->job->pl->world > 1)
        hub_note(h, "par3drun: OMP_NUM_THREADS is not set: each rank gets the number of CPUs it is bound to (set "
                    "OMP_NUM_THREADS to choose)\n");
}

void hub_end_line(hub *h, int code)
{
    const p3d_launch *L = h->L;
    char line[PATH_MAX + 384], rs[192] = "", sp[40] = "", su[96] = "";
    int r = p3d_ctl_restarts(h->ctl);
    /* both figures of a recovery: the respawn, and training resumed */
    if (p3d_ctl_recovery_max(h->ctl) >= 0)
        snprintf(sp, sizeof sp, "respawn %.2f s", p3d_ctl_recovery_max(h->ctl));
    else
        snprintf(sp, sizeof sp, "respawn not completed");
    if (p3d_ctl_resumed_max(h->ctl) >= 0)
        snprintf(su, sizeof su, ", training resumed %.2f s after the failure", p3d_ctl_resumed_max(h->ctl));
    else
        snprintf(su, sizeof su, " after the failure; training resumed not seen (no heartbeat or output since)");
    if (r)
        snprintf(rs, sizeof rs, ", %d restart%s (slowest: %s%s)", r, r == 1 ? "" : "s", sp, su);
    snprintf(line, sizeof line, "par3drun: job %s ended: exit %d after %.1f s%s; run dir %s%s\n", L->job->job_id, code,
             p3d_now() - L->t0, rs, L->run_dir,
             p3d_rundir_kept(L->run_dir_own, code) ? " kept (placement.json, events.jsonl)" : " removed");
    /* a failed job's end line says where its run directory is: kept under --quiet */
    if (code)
        hub_say(h, line);
    else
        hub_note(h, line);
}
