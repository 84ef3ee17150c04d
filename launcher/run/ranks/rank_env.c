/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * rank_env.c — the environment contract of a worker (docs/launch.md):
 * torchrun's names first, then par3drun's P3D_* coordinates and groups,
 * the CUDA device choice, and what the user added with --env/--env-file.
 */
#include "ranks.h"

#include <arpa/inet.h>
#include <ctype.h>
#include <errno.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

static size_t key_len(const char *kv)
{
    const char *eq = strchr(kv, '=');
    return eq ? (size_t)(eq - kv) : strlen(kv);
}

static int envv_index(const p3d_envv *e, const char *key, size_t klen)
{
    for (size_t i = 0; i < e->n; i++)
        if (key_len(e->v[i]) == klen && strncmp(e->v[i], key, klen) == 0)
            return (int)i;
    return -1;
}

/* Takes ownership of kv. */
static int envv_take(p3d_envv *e, char *kv)
{
    if (!kv)
        return -1;
    int i = envv_index(e, kv, key_len(kv));
    if (i >= 0) {
        free(e->v[i]);
        e->v[i] = kv;
        return 0;
    }
    if (e->n + 2 > e->cap) {
        size_t ncap = e->cap ? e->cap * 2 : 64;
        char **nv = realloc(e->v, ncap * sizeof *nv);
        if (!nv) {
            free(kv);
            return -1;
        }
        e->v = nv;
        e->cap = ncap;
    }
    e->v[e->n++] = kv;
    e->v[e->n] = NULL;
    return 0;
}

int p3d_envv_put(p3d_envv *e, const char *kv)
{
    if (!strchr(kv, '=') || kv[0] == '=')
        return -1;
    return envv_take(e, strdup(kv));
}

int p3d_envv_set(p3d_envv *e, const char *key, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    char *val = NULL;
    int n = vasprintf(&val, fmt, ap);
    va_end(ap);
    if (n < 0)
        return -1;
    char *kv = NULL;
    n = asprintf(&kv, "%s=%s", key, val);
    free(val);
    if (n < 0)
        return -1;
    return envv_take(e, kv);
}

const char *p3d_envv_get(const p3d_envv *e, const char *key)
{
    int i = envv_index(e, key, strlen(key));
    return i < 0 ? NULL : e->v[i] + strlen(key) + 1;
}

void p3d_envv_free(p3d_envv *e)
{
    for (size_t i = 0; i < e->n; i++)
        free(e->v[i]);
    free(e->v);
    memset(e, 0, sizeof *e);
}

int p3d_is_cpu_slot(const p3d_node *topo, int gpu)
{
    /* slots.c synthesizes "GPUs" without a device on GPU-less nodes */
    return !topo || gpu < 0 || gpu >= topo->ngpus || strcmp(topo->gpus[gpu].model, "CPU slot") == 0;
}

char *p3d_cuda_visible(const p3d_launch *L, int node)
{
    const p3d_placement *pl = L->job->pl;
    int nlocal = 0;
    for (int r = 0; r < pl->world; r++)
        if (pl->ranks[r].node == node)
            nlocal++;
    /* local ranks are numbered 0..nlocal-1; place GPUs at their slot */
    int *gpu = malloc(sizeof *gpu * (size_t)(nlocal ? nlocal : 1));
    /* an entry is an index or the allocation's name for the GPU (alloc.c) */
    char *s = malloc((size_t)nlocal * (sizeof((p3d_gpu *)0)->visible + 12) + 1);
    if (!gpu || !s) {
        free(gpu);
        free(s);
        return NULL;
    }
    for (int i = 0; i < nlocal; i++)
        gpu[i] = -1;
    const p3d_node *topo = L->job->cluster->nodes[node].topo;
    for (int r = 0; r < pl->world; r++) {
        const p3d_rank *k = &pl->ranks[r];
        if (k->node == node && k->local_rank >= 0 && k->local_rank < nlocal && !p3d_is_cpu_slot(topo, k->gpu))
            gpu[k->local_rank] = k->gpu;
    }
    size_t len = 0;
    s[0] = 0;
    for (int i = 0; i < nlocal; i++) {
        if (gpu[i] < 0) { /* CPU slots: no CUDA device to choose */
            s[0] = 0;
            break;
        }
        /* the inherited list's entry when an allocation named the GPU
         * (right whether or not Slurm renumbered the devices) */
        if (topo->gpus[gpu[i]].visible[0])
            len += (size_t)sprintf(s + len, "%s%s", i ? "," : "", topo->gpus[gpu[i]].visible);
        else
            len += (size_t)sprintf(s + len, "%s%d", i ? "," : "", gpu[i]);
    }
    free(gpu);
    return s;
}

/* "0,1,8,9" — a group's members. */
static int set_group(p3d_envv *e, const char *key, const p3d_mesh *m, int dim, int r)
{
    int cap = p3d_mesh_size(m, dim);
    int *mem = malloc(sizeof *mem * (size_t)cap);
    char *s = malloc((size_t)cap * 12 + 1);
    int rc = -1;
    if (!mem || !s)
        goto out;
    int n = p3d_group_members(m, dim, r, mem, cap);
    size_t len = 0;
    s[0] = 0;
    for (int i = 0; i < n; i++)
        len += (size_t)sprintf(s + len, "%s%d", i ? "," : "", mem[i]);
    rc = p3d_envv_set(e, key, "%s", s);
out:
    free(mem);
    free(s);
    return rc;
}

/* The batch a rank runs (docs/launch.md, "Elastic width"): B and b are
 * --global-batch and --micro-batch (b derived from --micro-batches at the
 * full width when only that is given), m the micro-batches each replica
 * accumulates at the placement's width; set from the first start on, so a
 * program reads them the same way before and after a width change.
 * Nothing when the user gave no batch figure. */
static int batch_env(p3d_envv *out, const p3d_launch *L, const p3d_placement *pl)
{
    const p3d_opts *o = L->o;
    const p3d_wbatch *lb = L->job->batch_leader ? &L->job->batch : NULL;
    int gb = lb ? lb->global : o->global_batch, mb = lb ? lb->micro : o->micro_batch;
    int mbs = lb ? lb->micros : o->micro_batches;
    double tol = lb ? lb->tol_mpct / 1000.0 : o->batch_tolerance;
    int e = 0;
    if (gb <= 0) {
        if (mb > 0)
            e |= p3d_envv_set(out, "P3D_MICRO_BATCH", "%d", mb);
        if (mbs > 0)
            e |= p3d_envv_set(out, "P3D_MICRO_BATCHES", "%d", mbs);
        return e;
    }
    p3d_job j;
    p3d_job_init(&j);
    j.mesh = pl->mesh;
    j.mesh.size[P3D_DIM_DP] = L->job->full_dp > 0 ? L->job->full_dp : p3d_mesh_size(&pl->mesh, P3D_DIM_DP);
    j.global_batch = gb, j.micro_batch_size = mb, j.micro_batches = mbs;
    p3d_elastic el;
    p3d_width w;
    /* the launch checked these figures (place.c); a failure here can only
     * be a non-elastic job's inexact batch, which a check warned about */
    if (p3d_elastic_init(&j, 0, tol > 0 ? tol : 0, &el, NULL) < 0) {
        el.b = mb > 0 ? mb : 1;
        el.tol_pct = 100;
    }
    p3d_width_at(&el, &pl->mesh, p3d_mesh_size(&pl->mesh, P3D_DIM_DP), &w);
    e |= p3d_envv_set(out, "P3D_GLOBAL_BATCH", "%d", w.batch);
    e |= p3d_envv_set(out, "P3D_MICRO_BATCH", "%d", w.b);
    e |= p3d_envv_set(out, "P3D_MICRO_BATCHES", "%d", w.m);
    return e;
}

/* Where rank r's node stands among the nodes that hold ranks: *nlocal
 * ranks on it, *group_rank its index in order of their lowest rank (rank
 * 0's node is 0), *ngroups of them. -1 out of memory. */
static int node_counts(const p3d_launch *L, int r, int *nlocal, int *group_rank, int *ngroups)
{
    const p3d_placement *pl = L->job->pl;
    const int node = pl->ranks[r].node;
    unsigned char *seen = calloc(L->job->cluster->nnodes, 1);
    if (!seen)
        return -1;
    int order = 0;
    *nlocal = *group_rank = 0;
    for (int q = 0; q < pl->world; q++) {
        int nd = pl->ranks[q].node;
        if (nd == node)
            (*nlocal)++;
        if (!seen[nd]) {
            seen[nd] = 1;
            if (nd == node)
                *group_rank = order;
            order++;
        }
    }
    free(seen);
    *ngroups = order;
    return 0;
}

/* What torchrun's agent sets, with its meaning: one role, one group per
 * node; the store at MASTER_ADDR:MASTER_PORT is served by par3drun when it
 * runs one (tcpstore.h), else by the ranks' rank 0. Nonzero on failure. */
static int torch_env(p3d_envv *out, const p3d_launch *L, int r, int restart)
{
    const p3d_placement *pl = L->job->pl;
    const p3d_rank *k = &pl->ranks[r];
    int nlocal, group_rank, ngroups;
    if (node_counts(L, r, &nlocal, &group_rank, &ngroups) < 0)
        return -1;
    int e = 0;
    e |= p3d_envv_set(out, "RANK", "%d", r);
    e |= p3d_envv_set(out, "WORLD_SIZE", "%d", pl->world);
    e |= p3d_envv_set(out, "LOCAL_RANK", "%d", k->local_rank);
    e |= p3d_envv_set(out, "LOCAL_WORLD_SIZE", "%d", nlocal);
    e |= p3d_envv_set(out, "GROUP_RANK", "%d", group_rank);
    e |= p3d_envv_set(out, "NODE_RANK", "%d", group_rank);
    e |= p3d_envv_set(out, "ROLE_RANK", "%d", r);
    e |= p3d_envv_set(out, "ROLE_WORLD_SIZE", "%d", pl->world);
    e |= p3d_envv_set(out, "MASTER_ADDR", "%s", L->job->master_addr);
    e |= p3d_envv_set(out, "MASTER_PORT", "%d", L->job->master_port);
    e |= p3d_envv_set(out, "TORCHELASTIC_RUN_ID", "%s", L->job->job_id);
    e |= p3d_envv_set(out, "TORCHELASTIC_RESTART_COUNT", "%d", restart);
    e |= p3d_envv_set(out, "TORCHELASTIC_MAX_RESTARTS", "%d", L->o->max_restarts);
    e |= p3d_envv_set(out, "GROUP_WORLD_SIZE", "%d", ngroups);
    e |= p3d_envv_set(out, "ROLE_NAME", "%s", L->o->role ? L->o->role : "default");
    e |= p3d_envv_set(out, "TORCHELASTIC_USE_AGENT_STORE", "%s", L->store ? "True" : "False");
    /* where torch's @record writes the rank's exception (read back for the
     * root cause: errfile.c); one per rank, in this node's run directory */
    char *ef = p3d_rootcause_path(L->run_dir, r);
    e |= ef ? p3d_envv_set(out, "TORCHELASTIC_ERROR_FILE", "%s", ef) : -1;
    free(ef);
    return e;
}

/* par3drun's own: the generation, the job's files, heartbeat and
 * preemption. Nonzero on failure. */
static int run_env(p3d_envv *out, const p3d_launch *L, int r, int restart)
{
    int e = 0;
    e |= p3d_envv_set(out, "P3D_RESTART_COUNT", "%d", restart);
    /* the fencing token: a rank of an older generation must not commit
     * anything a newer one may have (docs/launch.md, "Fencing") */
    e |= p3d_envv_set(out, "P3D_GENERATION", "%d", restart);
    e |= p3d_envv_set(out, "P3D_JOB_ID", "%s", L->job->job_id);
    e |= p3d_envv_set(out, "P3D_PLACEMENT", "%s", L->placement_path);
    e |= p3d_envv_set(out, "P3D_RUN_DIR", "%s", L->run_dir);
    if (L->o->log_dir) /* the bundled worker writes its JSON report there */
        e |= p3d_envv_set(out, "P3D_LOG_DIR", "%s", L->o->log_dir);
    /* the bundled worker's listeners bind it too; empty on one host (a
     * value the user exported is not this job's) */
    e |= p3d_envv_set(out, "P3D_BIND_ADDR", "%s", L->bind_addr ? L->bind_addr : "");
    /* always: a touch is a heartbeat (--hang-timeout), a line is progress
     * (progress.c, the slow-node detection) */
    e |= p3d_envv_set(out, "P3D_HEARTBEAT", "%s/heartbeat/rank-%d", L->run_dir, r);
    /* preemption: the signal a rank gets, and the file touched then for
     * ranks that poll (docs/launch.md, "Preemption") */
    int psig = 0;
    if (p3d_preempt_signal(L->o, &psig, NULL) == 0 && psig > 0) {
        e |= p3d_envv_set(out, "P3D_PREEMPT", "%s/preempt", L->run_dir);
        e |= p3d_envv_set(out, "P3D_PREEMPT_SIGNAL", "SIG%s", sigabbrev_np(psig));
    }
    return e;
}

/* Where the rank runs: its node, GPU, NUMA node and NIC, and its place in
 * the mesh (coordinates, sizes, groups). Nonzero on failure. */
static int place_env(p3d_envv *out, const p3d_launch *L, int r)
{
    const p3d_placement *pl = L->job->pl;
    const p3d_rank *k = &pl->ranks[r];
    const p3d_cnode *cn = &L->job->cluster->nodes[k->node];
    const p3d_node *topo = cn->topo;
    int e = 0;
    e |= p3d_envv_set(out, "P3D_NODE", "%s", cn->name);
    e |= p3d_envv_set(out, "P3D_NODE_INDEX", "%d", k->node);
    if (L->emulate) /* each emulated node's ranks see their node's name */
        e |= p3d_envv_set(out, "HOSTNAME", "%s", cn->name);
    /* P3D_GPU counts the GPUs this node's allocation gives (0..n-1, what
     * the placement and `par3drun topo` inside the allocation number);
     * P3D_GPU_PHYS is the same GPU's index on the whole node (-1: a CPU
     * slot), so that P3D_GPU=0 beside the PCI address of GPU 4 reads true */
    e |= p3d_envv_set(out, "P3D_GPU", "%d", k->gpu);
    const p3d_gpu *g = (topo && k->gpu >= 0 && k->gpu < topo->ngpus) ? &topo->gpus[k->gpu] : NULL;
    e |= p3d_envv_set(out, "P3D_GPU_PHYS", "%d", g && !p3d_is_cpu_slot(topo, k->gpu) ? g->phys : -1);
    e |= p3d_envv_set(out, "P3D_GPU_PCI", "%s", g ? g->pci : "");
    e |= p3d_envv_set(out, "P3D_NUMA", "%d", g ? g->numa : -1);
    e |= p3d_envv_set(out, "P3D_NIC", "%s",
                      g && g->nearest_nic >= 0 && g->nearest_nic < topo->nnics ? topo->nics[g->nearest_nic].name : "");
    e |= p3d_envv_set(out, "P3D_ORDER", "%s", pl->mesh.order_str);
    static const char *const up[P3D_NDIMS] = {"TP", "CP", "EP", "DP", "PP", "ETP", "EDP"};
    for (int d = 0; d < P3D_NDIMS; d++) {
        char key[32];
        snprintf(key, sizeof key, "P3D_%s_RANK", up[d]);
        e |= p3d_envv_set(out, key, "%d", k->coord[d]);
        snprintf(key, sizeof key, "P3D_%s_SIZE", up[d]);
        e |= p3d_envv_set(out, key, "%d", p3d_mesh_size(&pl->mesh, d));
        snprintf(key, sizeof key, "P3D_%s_GROUP", up[d]);
        e |= set_group(out, key, &pl->mesh, d, r);
    }
    return e;
}

/* The devices: CUDA's order and visible set, NCCL's rendezvous, then what
 * the user added (--env, --env-file) and torchrun's NCCL default. -1 out
 * of memory, else nonzero on failure. */
static int device_env(p3d_envv *out, const p3d_launch *L, int r)
{
    const p3d_rank *k = &L->job->pl->ranks[r];
    int e = p3d_envv_set(out, "CUDA_DEVICE_ORDER", "PCI_BUS_ID");
    char *cvd = p3d_cuda_visible(L, k->node);
    if (!cvd)
        return -1;
    if (cvd[0])
        e |= p3d_envv_set(out, "CUDA_VISIBLE_DEVICES", "%s", cvd);
    free(cvd);
    if (L->job->nccl_port > 0)
        e |= p3d_envv_set(out, "NCCL_COMM_ID", "%s:%d", L->job->master_addr, L->job->nccl_port);
    for (size_t i = 0; i < L->nextra; i++)
        e |= p3d_envv_put(out, L->extra_env[i]);
    /* torchrun's default, unless the user's environment or --env says */
    if (!p3d_envv_get(out, "TORCH_NCCL_ASYNC_ERROR_HANDLING"))
        e |= p3d_envv_set(out, "TORCH_NCCL_ASYNC_ERROR_HANDLING", "%s", "1");
    return e;
}

int p3d_rank_env(const p3d_launch *L, char *const *base, int r, int restart, p3d_envv *out, char **err)
{
    const p3d_placement *pl = L->job->pl;
    memset(out, 0, sizeof *out);
    int e = 0;
    /* the rendezvous token authenticates agents to the leader: a worker
     * (user code, maybe printing its environment) never needs it */
    for (char *const *p = base; p && *p && !e; p++)
        if (strchr(*p, '=') && strncmp(*p, "P3D_RDZV_TOKEN=", 15))
            e |= p3d_envv_put(out, *p) < 0;
    /* in this order: the user's --env comes after par3drun's own (it may
     * override them), torchrun's NCCL default after the user's */
    e = e || torch_env(out, L, r, restart) || run_env(out, L, r, restart) || place_env(out, L, r) ||
        batch_env(out, L, pl) || device_env(out, L, r);
    if (e) {
        p3d_err(err, "out of memory building rank %d's environment", r);
        p3d_envv_free(out);
        return -1;
    }
    return 0;
}

int p3d_env_file_read(const char *path, p3d_envv *e, char **err)
{
    int rc = -1, lineno = 0;
    char *line = NULL;
    size_t cap = 0;
    FILE *f = fopen(path, "r");
    if (!f)
        return p3d_err(err, "--env-file %s: %s", path, strerror(errno));
    ssize_t n;
    while ((n = getline(&line, &cap, f)) >= 0) {
        lineno++;
        while (n > 0 && (line[n - 1] == '\n' || line[n - 1] == '\r'))
            line[--n] = 0;
        char *s = line;
        while (isspace((unsigned char)*s))
            s++;
        if (!*s || *s == '#')
            continue;
        if (strncmp(s, "export ", 7) == 0)
            s += 7;
        char *eq = strchr(s, '=');
        int ok = eq && eq > s;
        for (char *c = s; ok && c < eq; c++)
            ok = isalnum((unsigned char)*c) || *c == '_';
        if (!ok) {
            p3d_err(err, "%s:%d: expected KEY=VALUE (KEY of letters, digits, _), got '%s'", path, lineno, s);
            goto out;
        }
        /* strip one pair of matching quotes around the value */
        size_t vl = strlen(eq + 1);
        if (vl >= 2 && (eq[1] == '"' || eq[1] == '\'') && eq[vl] == eq[1]) {
            memmove(eq + 1, eq + 2, vl - 2);
            eq[vl - 1] = 0;
        }
        if (p3d_envv_put(e, s) < 0) {
            p3d_err(err, "out of memory reading %s", path);
            goto out;
        }
    }
    if (ferror(f)) {
        p3d_err(err, "--env-file %s: read error", path);
        goto out;
    }
    rc = 0;
out:
    free(line);
    fclose(f);
    return rc;
}

/* A probe, never a listener: bound to no address in particular and closed
 * at once, a port it finds is free on every address of this node, the
 * one the port will be listened on included. */
int p3d_free_port(void)
{
    int port = 0, s = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (s < 0)
        return 0;
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_ANY)};
    socklen_t al = sizeof a;
    if (bind(s, (struct sockaddr *)&a, sizeof a) == 0 && getsockname(s, (struct sockaddr *)&a, &al) == 0)
        port = ntohs(a.sin_port);
    close(s);
    return port;
}
