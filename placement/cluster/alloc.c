/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * alloc.c — the GPUs this node's allocation lets a job use (p3d/cluster.h).
 *
 * Where the allocation is written down, first match wins:
 *  1. SLURM_STEP_GPUS (inside an srun step), else SLURM_JOB_GPUS (the batch
 *     script): physical indices, in nvidia-smi / PCI bus order — the order
 *     of the node record. Slurm pairs them with CUDA_VISIBLE_DEVICES entry
 *     by entry, both in ascending index order: "0,1,2,3" when the cgroup
 *     (ConstrainDevices) renumbered the devices, "4,5,6,7" when it did not.
 *  2. outside Slurm, an inherited CUDA_VISIBLE_DEVICES: indices, or GPU-…
 *     UUIDs (a unique prefix is enough, as for CUDA) matched against the
 *     UUIDs of the node record (hwloc's NVML OS devices).
 *
 * Why the child's entries come from the inherited list and not from the
 * index: only the inherited list is right in both Slurm setups; an index
 * is wrong as soon as the cgroup renumbers.
 *
 * Pure: reads an environ-like array, never the process environment, so the
 * unit tests feed it whatever a scheduler would set.
 */
#include "topo_internal.h"

#include <ctype.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

extern char **environ;

void p3d_alloc_free(p3d_alloc *a)
{
    if (!a)
        return;
    for (int i = 0; i < a->n; i++)
        free(a->visible[i]);
    free(a->visible);
    free(a->gpu);
    free(a->value);
    memset(a, 0, sizeof *a);
}

static const char *env_get(char *const *envp, const char *key)
{
    size_t kl = strlen(key);
    for (char *const *p = envp; p && *p; p++)
        if (strncmp(*p, key, kl) == 0 && (*p)[kl] == '=')
            return *p + kl + 1;
    return NULL;
}

/* Splits a comma list into trimmed entries (malloc'd, *n entries). Empty
 * entries are refused. */
static int split(const char *var, const char *s, char ***out, int *n, char **err)
{
    char **v = NULL;
    int k = 0;
    *out = NULL;
    *n = 0;
    const char *p = s;
    while (*p) {
        const char *e = strchr(p, ',');
        size_t len = e ? (size_t)(e - p) : strlen(p);
        while (len && isspace((unsigned char)*p)) {
            p++;
            len--;
        }
        while (len && isspace((unsigned char)p[len - 1]))
            len--;
        if (!len) {
            for (int i = 0; i < k; i++)
                free(v[i]);
            free(v);
            return p3d_err(err, "%s='%s': empty entry (expected a comma-separated list)", var, s);
        }
        char **nv = realloc(v, sizeof *v * (size_t)(k + 1));
        if (nv)
            v = nv;
        char *d = nv ? strndup(p, len) : NULL;
        if (!d) {
            for (int i = 0; i < k; i++)
                free(v[i]);
            free(v);
            return p3d_err(err, "out of memory");
        }
        v[k++] = d;
        if (!e)
            break;
        p = e + 1;
        if (!*p) {
            for (int i = 0; i < k; i++)
                free(v[i]);
            free(v);
            return p3d_err(err, "%s='%s': empty entry after the last comma", var, s);
        }
    }
    *out = v;
    *n = k;
    return 0;
}

/* "12" -> 12; -1 when not a plain non-negative decimal. */
static long plain_index(const char *s)
{
    if (!isdigit((unsigned char)s[0]))
        return -1;
    char *end;
    errno = 0;
    long v = strtol(s, &end, 10);
    return (*end || errno || v > 1000000) ? -1 : v;
}

/* Appends the indices of a Slurm GPU list ("4,5,6,7", "0-3,6") to a. */
static int slurm_indices(p3d_alloc *a, char **ent, int nent, const p3d_node *node, char **err)
{
    for (int i = 0; i < nent; i++) {
        long lo, hi;
        char *dash = strchr(ent[i], '-');
        if (dash) {
            *dash = 0;
            lo = plain_index(ent[i]);
            hi = plain_index(dash + 1);
            *dash = '-';
        } else {
            lo = hi = plain_index(ent[i]);
        }
        if (lo < 0 || hi < lo)
            return p3d_err(err, "%s='%s': '%s' is not a GPU index or range (expected e.g. 4,5,6,7 or 0-3)", a->var,
                           a->value, ent[i]);
        for (long g = lo; g <= hi; g++) {
            if (g >= node->ngpus)
                return p3d_err(err, "%s='%s': GPU %ld, but this node (%s) has %d GPU%s (indices 0-%d)", a->var,
                               a->value, g, node->source ? node->source : "?", node->ngpus, node->ngpus == 1 ? "" : "s",
                               node->ngpus - 1);
            int *ng = realloc(a->gpu, sizeof *ng * (size_t)(a->n + 1));
            char **nv = ng ? realloc(a->visible, sizeof *nv * (size_t)(a->n + 1)) : NULL;
            if (ng)
                a->gpu = ng;
            if (!nv)
                return p3d_err(err, "out of memory");
            a->visible = nv;
            a->visible[a->n] = NULL;
            a->gpu[a->n++] = (int)g;
        }
    }
    return 0;
}

/* Index in node of the GPU whose UUID starts with u (unique), or -1 with
 * *err. */
static int by_uuid(const p3d_alloc *a, const p3d_node *node, const char *u, char **err)
{
    int hit = -1, nuuid = 0;
    size_t ul = strlen(u);
    for (int g = 0; g < node->ngpus; g++) {
        if (!node->gpus[g].uuid[0])
            continue;
        nuuid++;
        if (strncasecmp(node->gpus[g].uuid, u, ul) == 0) {
            if (hit >= 0)
                return p3d_err(err, "%s: '%s' matches GPUs %d and %d; give more of the UUID", a->var, u, hit, g);
            hit = g;
        }
    }
    if (hit >= 0)
        return hit;
    if (!nuuid)
        return p3d_err(err,
                       "%s='%s' names GPUs by UUID, but the topology of this node (%s) carries no GPU UUIDs "
                       "(hwloc without its NVML backend, or a file): give indices instead",
                       a->var, a->value, node->source ? node->source : "?");
    return p3d_err(err, "%s: no GPU of this node has UUID '%s'", a->var, u);
}

/* Fills a from an inherited CUDA_VISIBLE_DEVICES. */
static int from_cvd(p3d_alloc *a, char **ent, int nent, const p3d_node *node, char **err)
{
    a->gpu = calloc((size_t)nent + 1, sizeof *a->gpu);
    a->visible = calloc((size_t)nent + 1, sizeof *a->visible);
    if (!a->gpu || !a->visible)
        return p3d_err(err, "out of memory");
    for (int i = 0; i < nent; i++) {
        const char *s = ent[i];
        long g;
        if (!strncasecmp(s, "MIG-", 4))
            return p3d_err(err,
                           "%s='%s': MIG instances are not placed by par3drun (one rank per whole GPU); "
                           "give whole GPUs",
                           a->var, a->value);
        if (!strncasecmp(s, "GPU-", 4)) {
            g = by_uuid(a, node, s, err);
            if (g < 0)
                return -1;
        } else {
            g = plain_index(s);
            if (g < 0)
                /* CUDA stops at the first invalid entry ("-1", "NoDevFiles"):
                 * what came before is the list */
                break;
            if (g >= node->ngpus)
                return p3d_err(err, "%s='%s': GPU %ld, but this node (%s) has %d GPU%s", a->var, a->value, g,
                               node->source ? node->source : "?", node->ngpus, node->ngpus == 1 ? "" : "s");
        }
        a->gpu[a->n] = (int)g;
        a->visible[a->n++] = ent[i];
        ent[i] = NULL;
    }
    return 0;
}

static int cmp_pair(const void *x, const void *y)
{
    const int *a = x, *b = y;
    return (a[0] > b[0]) - (a[0] < b[0]);
}

int p3d_alloc_from_env(char *const *envp, const p3d_node *node, p3d_alloc *a, char **err)
{
    char **ent = NULL, **cvd = NULL;
    int nent = 0, ncvd = 0, rc = -1;
    memset(a, 0, sizeof *a);
    const char *vars[] = {"SLURM_STEP_GPUS", "SLURM_JOB_GPUS", "CUDA_VISIBLE_DEVICES"};
    const char *val = NULL;
    int which;
    for (which = 0; which < 3; which++) {
        val = env_get(envp, vars[which]);
        /* Slurm's lists are set and non-empty when GPUs were allocated;
         * an empty CUDA_VISIBLE_DEVICES means "no GPU" */
        if (val && (*val || which == 2))
            break;
    }
    /* a node without GPUs has nothing to restrict (a CPU box that merely
     * inherited CUDA_VISIBLE_DEVICES) */
    if (which == 3 || node->ngpus == 0)
        return 0;
    snprintf(a->var, sizeof a->var, "%s", vars[which]);
    if (!(a->value = strdup(val)))
        return p3d_err(err, "out of memory");
    a->active = 1;
    if (split(a->var, val, &ent, &nent, err) < 0)
        goto out;
    if (which < 2) {
        if (slurm_indices(a, ent, nent, node, err) < 0)
            goto out;
        const char *cv = env_get(envp, "CUDA_VISIBLE_DEVICES");
        if (cv && split("CUDA_VISIBLE_DEVICES", cv, &cvd, &ncvd, err) < 0)
            goto out;
        if (cv && ncvd != a->n) {
            p3d_err(err,
                    "CUDA_VISIBLE_DEVICES='%s' has %d entr%s but %s='%s' names %d GPU%s: cannot tell which "
                    "device is which (unset CUDA_VISIBLE_DEVICES, or ask Slurm for the GPUs you want)",
                    cv, ncvd, ncvd == 1 ? "y" : "ies", a->var, a->value, a->n, a->n == 1 ? "" : "s");
            goto out;
        }
        for (int i = 0; i < a->n; i++) {
            if (cv) {
                a->visible[i] = cvd[i];
                cvd[i] = NULL;
            } else if (asprintf(&a->visible[i], "%d", a->gpu[i]) < 0) {
                a->visible[i] = NULL;
                p3d_err(err, "out of memory");
                goto out;
            }
        }
    } else if (from_cvd(a, ent, nent, node, err) < 0) {
        goto out;
    }
    /* PCI order (the record's), each GPU once */
    int *pair = malloc(sizeof *pair * 2 * (size_t)(a->n + 1));
    if (!pair) {
        p3d_err(err, "out of memory");
        goto out;
    }
    for (int i = 0; i < a->n; i++) {
        pair[2 * i] = a->gpu[i];
        pair[2 * i + 1] = i;
    }
    qsort(pair, (size_t)a->n, 2 * sizeof *pair, cmp_pair);
    char **vis = malloc(sizeof *vis * (size_t)(a->n + 1));
    if (!vis) {
        free(pair);
        p3d_err(err, "out of memory");
        goto out;
    }
    for (int i = 0; i < a->n; i++) {
        a->gpu[i] = pair[2 * i];
        vis[i] = a->visible[pair[2 * i + 1]];
    }
    free(a->visible);
    a->visible = vis;
    free(pair);
    for (int i = 1; i < a->n; i++)
        if (a->gpu[i] == a->gpu[i - 1]) {
            p3d_err(err, "%s='%s': GPU %d is listed twice", a->var, a->value, a->gpu[i]);
            goto out;
        }
    rc = 0;
out:
    for (int i = 0; i < nent; i++)
        free(ent[i]);
    free(ent);
    for (int i = 0; i < ncvd; i++)
        free(cvd[i]);
    free(cvd);
    if (rc < 0)
        p3d_alloc_free(a);
    return rc;
}

/* "4-7" / "0,2,5" — indices of node not in a. */
static void excluded_list(const p3d_alloc *a, const p3d_node *n, char *buf, size_t cap)
{
    size_t len = 0;
    buf[0] = 0;
    int k = 0;
    for (int g = 0; g < n->ngpus; g++) {
        int in = 0;
        for (int i = 0; i < a->n && !in; i++)
            in = a->gpu[i] == g;
        if (in)
            continue;
        int hi = g;
        while (hi + 1 < n->ngpus) {
            int in2 = 0;
            for (int i = 0; i < a->n && !in2; i++)
                in2 = a->gpu[i] == hi + 1;
            if (in2)
                break;
            hi++;
        }
        int w = hi > g ? snprintf(buf + len, cap - len, "%s%d-%d", k ? "," : "", g, hi)
                       : snprintf(buf + len, cap - len, "%s%d", k ? "," : "", g);
        if (w < 0 || (size_t)w >= cap - len)
            return;
        len += (size_t)w;
        k++;
        g = hi;
    }
}

p3d_node *p3d_node_shell(const p3d_node *n, int k, char **err)
{
    p3d_node *m = p3d_node_new(n->hostname, n->source, n->source_kind);
    if (!m) {
        p3d_err(err, "out of memory");
        return NULL;
    }
    if (p3d_node_alloc(m, k, n->nnics, err) < 0)
        goto fail;
    m->nnuma = n->nnuma;
    m->npackages = n->npackages;
    m->ncores = n->ncores;
    m->npus = n->npus;
    m->fabric_clique = n->fabric_clique;
    if (n->fabric_uuid && !(m->fabric_uuid = strdup(n->fabric_uuid))) {
        p3d_err(err, "out of memory");
        goto fail;
    }
    for (int j = 0; j < n->nnics; j++)
        m->nics[j] = n->nics[j];
    return m;
fail:
    p3d_node_free(m);
    return NULL;
}

p3d_node *p3d_node_subset(const p3d_node *n, const int *idx, int k, char **err)
{
    p3d_node *m = p3d_node_shell(n, k, err);
    if (!m)
        return NULL;
    for (int i = 0; i < k; i++) {
        p3d_gpu *g = &m->gpus[i];
        const p3d_gpu *s = &n->gpus[idx[i]];
        free(g->cpus);
        *g = *s;
        g->index = i;
        g->cpus = NULL;
        if (s->cpus && !(g->cpus = strdup(s->cpus)))
            goto oom;
        for (int j = 0; j < k; j++) {
            m->nvlink[i * k + j] = n->nvlink[idx[i] * n->ngpus + idx[j]];
            m->gg_class[i * k + j] = n->gg_class[idx[i] * n->ngpus + idx[j]];
        }
        for (int j = 0; j < n->nnics; j++)
            m->gn_class[i * n->nnics + j] = n->gn_class[idx[i] * n->nnics + j];
    }
    if (p3d_node_finish(m, err) < 0)
        goto fail;
    return m;
oom:
    p3d_err(err, "out of memory");
fail:
    p3d_node_free(m);
    return NULL;
}

int p3d_alloc_apply(const p3d_alloc *a, p3d_node **np, int nproc, char **err)
{
    p3d_node *n = *np;
    if (!a->active)
        return 0;
    if (nproc > a->n)
        return p3d_err(err,
                       "--nproc-per-node %d: the allocation gives this node %d GPU%s (%s=%s); give at most %d, "
                       "or ask the scheduler for more GPUs (e.g. srun --gpus-per-node=%d)",
                       nproc, a->n, a->n == 1 ? "" : "s", a->var, a->value, a->n, nproc);
    p3d_node *m = p3d_node_subset(n, a->gpu, a->n, err);
    if (!m)
        return -1;
    for (int i = 0; i < a->n; i++)
        snprintf(m->gpus[i].visible, sizeof m->gpus[i].visible, "%s", a->visible[i] ? a->visible[i] : "");
    /* p3d_node_finish re-derived the notes of the subset; add why */
    if (a->n < n->ngpus) {
        char ex[512], kept[512];
        excluded_list(a, n, ex, sizeof ex);
        size_t len = 0;
        kept[0] = 0;
        for (int i = 0; i < a->n && len < sizeof kept - 12; i++)
            len += (size_t)snprintf(kept + len, sizeof kept - len, "%s%d", i ? "," : "", a->gpu[i]);
        p3d_node_note(m, "allocation: GPU%s %s of %d excluded, not in %s=%s; the %d usable (%s) are numbered 0-%d here",
                      n->ngpus - a->n == 1 ? "" : "s", ex, n->ngpus, a->var, a->value, a->n, kept, a->n - 1);
    } else {
        p3d_node_note(m, "allocation: all %d GPUs usable (%s=%s)", a->n, a->var, a->value);
    }
    p3d_node_free(n);
    *np = m;
    return 0;
}

int p3d_node_apply_allocation(p3d_node **n, int nproc, char **err)
{
    p3d_alloc a;
    if (p3d_alloc_from_env(environ, *n, &a, err) < 0)
        return -1;
    int rc = p3d_alloc_apply(&a, n, nproc, err);
    p3d_alloc_free(&a);
    return rc;
}

/* ---- racks from SLURM_TOPOLOGY_ADDR ------------------------------------- */

char *p3d_slurm_addr_rack(char *const *envp)
{
    const char *addr = env_get(envp, "SLURM_TOPOLOGY_ADDR");
    const char *pat = env_get(envp, "SLURM_TOPOLOGY_ADDR_PATTERN");
    if (!addr || !*addr)
        return NULL;
    /* components: the pattern names each ("switch", "node", "block"); the
     * rack is the last one before the node. Without a usable pattern the
     * node is the last component. */
    size_t na = 1, np = 1;
    for (const char *p = addr; *p; p++)
        na += *p == '.';
    for (const char *p = pat ? pat : ""; *p; p++)
        np += *p == '.';
    size_t node_at = na - 1;
    if (pat && *pat && np == na) {
        size_t i = 0;
        const char *p = pat;
        while (p) {
            if (!strncmp(p, "node", 4) && (p[4] == '.' || !p[4]))
                node_at = i;
            p = strchr(p, '.');
            p = p ? p + 1 : NULL;
            i++;
        }
    }
    if (node_at == 0)
        return NULL; /* no switch above the node */
    const char *p = addr;
    for (size_t i = 0; i + 1 < node_at; i++)
        p = strchr(p, '.') + 1;
    const char *e = strchr(p, '.');
    size_t len = e ? (size_t)(e - p) : strlen(p);
    return len ? strndup(p, len) : NULL;
}

char *p3d_slurm_env_rack(void)
{
    return p3d_slurm_addr_rack(environ);
}
