/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * rdzv_pmix.c — p3d_rdzv_pmix.so: the rendezvous bootstrap over PMIx
 * (mpirun, srun --mpi=pmix). Node count = the PMIx job size, node rank =
 * the PMIx rank (start one par3drun per node: mpirun --map-by ppr:1:node,
 * srun --ntasks-per-node=1). The leader Puts "host port token" under
 * p3d.rdzv, everybody Commits and Fences (collecting data), the others Get
 * it from rank 0; then the common TCP rendezvous carries the node records,
 * the placement and the job's fate. PMIx's key-value store is private to
 * the job, so the token handed over this way is a real secret.
 *
 * Plugins cannot call p3d_* functions (the executable does not export
 * them): everything here is libc + libpmix.
 */
#include "p3d/plugin.h"

#include <pmix.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct pmix_state {
    pmix_proc_t me;
    int up;      /* PMIx_Init succeeded, not finalized yet */
    int timeout; /* seconds for the fence */
} pmix_state;

static int pmix_detect(const char *arg, int o_nnodes, int o_node_rank, double timeout, p3d_rdzv_boot *b, void **state,
                       char *msg, size_t cap)
{
    (void)arg;
    (void)o_node_rank;
    /* Without a server PMIx_Init fails after a while: look first. */
    const char *ns = getenv("PMIX_NAMESPACE");
    if (!ns || !*ns) {
        p3d_plugin_say(msg, cap, "PMIX_NAMESPACE is not set (not started by a PMIx server: mpirun, srun --mpi=pmix)");
        return 0;
    }
    pmix_state *s = calloc(1, sizeof *s);
    if (!s)
        return p3d_plugin_say(msg, cap, "out of memory");
    s->timeout = timeout > 0 && timeout < 1e6 ? (int)timeout + 1 : 0;
    pmix_status_t rc = PMIx_Init(&s->me, NULL, 0);
    if (rc != PMIX_SUCCESS) {
        free(s);
        return p3d_plugin_say(msg, cap, "pmix: PMIx_Init failed: %s (PMIX_NAMESPACE=%s)", PMIx_Error_string(rc), ns);
    }
    s->up = 1;
    pmix_proc_t job;
    PMIX_PROC_CONSTRUCT(&job);
    PMIX_LOAD_PROCID(&job, s->me.nspace, PMIX_RANK_WILDCARD);
    pmix_value_t *v = NULL;
    rc = PMIx_Get(&job, PMIX_JOB_SIZE, NULL, 0, &v);
    if (rc != PMIX_SUCCESS || !v) {
        PMIx_Finalize(NULL, 0);
        free(s);
        return p3d_plugin_say(msg, cap, "pmix: cannot get the job size: %s", PMIx_Error_string(rc));
    }
    uint32_t size = v->type == PMIX_UINT32 ? v->data.uint32 : 0;
    PMIX_VALUE_RELEASE(v);
    if (size < 1 || size > (1u << 20)) {
        PMIx_Finalize(NULL, 0);
        free(s);
        return p3d_plugin_say(msg, cap, "pmix: job size %u: expected 1..%u", size, 1u << 20);
    }
    if (o_nnodes > 0 && (uint32_t)o_nnodes != size) {
        PMIx_Finalize(NULL, 0);
        free(s);
        return p3d_plugin_say(msg, cap,
                              "pmix: the job has %u processes but --nnodes says %d: start one par3drun per node", size,
                              o_nnodes);
    }
    b->nnodes = (int)size;
    b->node_rank = (int)s->me.rank;
    /* The job's name: --job-id (rdzv.c sets it again after detect), else
     * Slurm's job id, as under plain srun and as --help says (srun
     * --mpi=pmix names the namespace slurm.pmix.JOB.STEP: the same job
     * would change its id, run dir and etcd keys with the launch mode);
     * outside Slurm (mpirun) the namespace, the same on every node
     * (truncated to fit). */
    const char *sj = getenv("SLURM_JOB_ID"), *id = sj && *sj ? sj : s->me.nspace;
    size_t idn = strnlen(id, sizeof b->job_id - 1);
    memcpy(b->job_id, id, idn);
    b->job_id[idn] = 0;
    *state = s;
    return 1;
}

static int pmix_publish(void *state, p3d_rdzv_boot *b, char *msg, size_t cap)
{
    pmix_state *s = state;
    pmix_status_t rc;
    if (b->node_rank == 0) {
        char blob[600];
        snprintf(blob, sizeof blob, "%d %s %s", b->leader_port, b->leader_host, b->token);
        pmix_value_t val;
        PMIX_VALUE_CONSTRUCT(&val);
        val.type = PMIX_STRING;
        val.data.string = blob;
        rc = PMIx_Put(PMIX_GLOBAL, "p3d.rdzv", &val);
        if (rc != PMIX_SUCCESS)
            return p3d_plugin_say(msg, cap, "PMIx_Put: %s", PMIx_Error_string(rc));
    }
    rc = PMIx_Commit();
    if (rc != PMIX_SUCCESS)
        return p3d_plugin_say(msg, cap, "PMIx_Commit: %s", PMIx_Error_string(rc));
    pmix_info_t info[2];
    bool yes = true;
    PMIX_INFO_CONSTRUCT(&info[0]);
    PMIX_INFO_CONSTRUCT(&info[1]);
    PMIX_INFO_LOAD(&info[0], PMIX_COLLECT_DATA, &yes, PMIX_BOOL);
    PMIX_INFO_LOAD(&info[1], PMIX_TIMEOUT, &s->timeout, PMIX_INT);
    pmix_proc_t all;
    PMIX_PROC_CONSTRUCT(&all);
    PMIX_LOAD_PROCID(&all, s->me.nspace, PMIX_RANK_WILDCARD);
    rc = PMIx_Fence(&all, 1, info, 2);
    PMIX_INFO_DESTRUCT(&info[0]);
    PMIX_INFO_DESTRUCT(&info[1]);
    if (rc != PMIX_SUCCESS)
        return p3d_plugin_say(msg, cap, "PMIx_Fence: %s (a node never arrived within %d s?)", PMIx_Error_string(rc),
                              s->timeout);
    if (b->node_rank != 0) {
        pmix_proc_t lead;
        PMIX_PROC_CONSTRUCT(&lead);
        PMIX_LOAD_PROCID(&lead, s->me.nspace, 0);
        pmix_value_t *v = NULL;
        rc = PMIx_Get(&lead, "p3d.rdzv", NULL, 0, &v);
        if (rc != PMIX_SUCCESS || !v || v->type != PMIX_STRING || !v->data.string) {
            if (v)
                PMIX_VALUE_RELEASE(v);
            return p3d_plugin_say(msg, cap, "PMIx_Get p3d.rdzv from rank 0: %s", PMIx_Error_string(rc));
        }
        int port = 0;
        char host[256] = "", tok[256] = "";
        int n = sscanf(v->data.string, "%d %255s %255s", &port, host, tok);
        PMIX_VALUE_RELEASE(v);
        if (n != 3 || port < 1 || port > 65535)
            return p3d_plugin_say(msg, cap, "rank 0 published a malformed rendezvous endpoint");
        b->leader_port = port;
        snprintf(b->leader_host, sizeof b->leader_host, "%s", host);
        snprintf(b->token, sizeof b->token, "%s", tok);
    }
    /* PMIx has done its part; the agent forks workers next, and a PMIx
     * client's threads should not be around for that */
    PMIx_Finalize(NULL, 0);
    s->up = 0;
    return 0;
}

static void pmix_close(void *state)
{
    pmix_state *s = state;
    if (s && s->up)
        PMIx_Finalize(NULL, 0);
    free(s);
}

static const p3d_rdzv_ops ops = {
    .name = "pmix",
    .detect = pmix_detect,
    .publish = pmix_publish,
    .close = pmix_close,
};

P3D_PLUGIN_EXPORT(rdzv, pmix, P3D_PLUGIN_RDZV, &ops);
