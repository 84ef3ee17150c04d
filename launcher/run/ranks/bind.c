/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * bind.c — CPU and memory binding of each local rank next to its GPU.
 *
 * --bind numa: the rank's CPUs are its GPU's NUMA node's CPUs, its memory
 * is bound to that NUMA node. --bind core: the same NUMA node, but its cores
 * are split evenly among the local ranks that share it. --bind none: nothing.
 * Ranks without a GPU (CPU slots) are spread over the NUMA nodes in
 * local-rank order.
 *
 * The fast path needs no second discovery: with --bind numa and a GPU per
 * rank, the GPU's cpuset and NUMA node from this host's hwloc discovery
 * (the node record) are applied with sched_setaffinity/set_mempolicy — a
 * new hwloc topology load costs more than launching 32 ranks (plugins). The
 * slow path (--bind core, CPU slots on several NUMA nodes) loads a thin
 * hwloc topology (no I/O objects) and binds through hwloc. A host with one
 * NUMA node has nothing to bind CPU slots to. Against a topology read from a
 * file, or under --emulate, binding is skipped with a note — binding this
 * host by another machine's NUMA numbers would be wrong.
 */
#include "ranks.h"
#include "say.h"

#include <errno.h>
#include <hwloc.h>
#include <linux/mempolicy.h>
#include <sched.h>
#include <sys/syscall.h>
#include <unistd.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct p3d_binder {
    hwloc_topology_t topo;
    int nlocal;
    hwloc_bitmap_t *cpus; /* per local rank, NULL = leave unbound */
    hwloc_bitmap_t *mems; /* nodesets */
    int *numa;            /* os index, -1 unknown */
    char **why;           /* per rank: reason it is not bound, or NULL */
    char *mode;
    cpu_set_t *fast; /* fast path: per rank affinity, NULL when topo */
};

void p3d_binder_free(p3d_binder *b)
{
    if (!b)
        return;
    for (int i = 0; i < b->nlocal; i++) {
        if (b->cpus && b->cpus[i])
            hwloc_bitmap_free(b->cpus[i]);
        if (b->mems && b->mems[i])
            hwloc_bitmap_free(b->mems[i]);
        if (b->why)
            free(b->why[i]);
    }
    free(b->cpus);
    free(b->mems);
    free(b->numa);
    free(b->why);
    free(b->mode);
    free(b->fast);
    if (b->topo)
        hwloc_topology_destroy(b->topo);
    free(b);
}

/* The os index of this host's NUMA node when it has exactly one (sysfs
 * "online" is then a single number), else -1. Read instead of loading
 * hwloc: the fast path exists to avoid that load. */
static int only_numa_node(void)
{
    char buf[64] = "";
    FILE *f = fopen("/sys/devices/system/node/online", "re");
    if (!f)
        return -1;
    if (!fgets(buf, sizeof buf, f))
        buf[0] = 0;
    fclose(f);
    char *end;
    long v = strtol(buf, &end, 10);
    if (end == buf || v < 0 || (*end && *end != '\n'))
        return -1;
    return (int)v;
}

/* This host's NUMA nodes as sysfs lists them (the fast path reads these
 * small files instead of loading hwloc): their os indexes, CPUs, and the
 * SLIT distance matrix (ACPI: 10 = local, larger = farther). */
typedef struct numa_map {
    int n;
    int *os;
    hwloc_bitmap_t *cpus;
    int *dist; /* n x n, by position in os[] */
} numa_map;

static void numa_map_free(numa_map *m)
{
    for (int i = 0; i < m->n; i++)
        if (m->cpus && m->cpus[i])
            hwloc_bitmap_free(m->cpus[i]);
    free(m->os);
    free(m->cpus);
    free(m->dist);
    memset(m, 0, sizeof *m);
}

static int read_line(const char *path, char *buf, size_t cap)
{
    FILE *f = fopen(path, "re");
    if (!f)
        return -1;
    int ok = fgets(buf, (int)cap, f) != NULL;
    fclose(f);
    return ok ? 0 : -1;
}

/* Fills m from root (/sys/devices/system/node). 0, or -1 when anything is
 * missing or inconsistent (m is then empty: the caller falls back). */
static int numa_map_read(const char *root, numa_map *m)
{
    char path[512], buf[4096];
    memset(m, 0, sizeof *m);
    hwloc_bitmap_t online = hwloc_bitmap_alloc();
    snprintf(path, sizeof path, "%s/online", root);
    if (!online || read_line(path, buf, sizeof buf) < 0 || hwloc_bitmap_list_sscanf(online, buf) < 0 ||
        hwloc_bitmap_weight(online) <= 0 || hwloc_bitmap_weight(online) > 1024)
        goto fail;
    int n = hwloc_bitmap_weight(online);
    m->os = calloc((size_t)n, sizeof *m->os);
    m->cpus = calloc((size_t)n, sizeof *m->cpus);
    m->dist = calloc((size_t)n * (size_t)n, sizeof *m->dist);
    if (!m->os || !m->cpus || !m->dist)
        goto fail;
    unsigned id;
    hwloc_bitmap_foreach_begin(id, online)
    {
        m->os[m->n++] = (int)id;
    }
    hwloc_bitmap_foreach_end();
    for (int i = 0; i < n; i++) {
        snprintf(path, sizeof path, "%s/node%d/cpulist", root, m->os[i]);
        if (!(m->cpus[i] = hwloc_bitmap_alloc()) || read_line(path, buf, sizeof buf) < 0)
            goto fail;
        buf[strcspn(buf, "\n")] = 0;
        if (buf[0] && hwloc_bitmap_list_sscanf(m->cpus[i], buf) < 0) /* a memory-only node has none */
            goto fail;
        snprintf(path, sizeof path, "%s/node%d/distance", root, m->os[i]);
        if (read_line(path, buf, sizeof buf) < 0)
            goto fail;
        char *p = buf, *end;
        for (int j = 0; j < n; j++) {
            long d = strtol(p, &end, 10);
            if (end == p || d < 0 || d > 255)
                goto fail;
            m->dist[i * n + j] = (int)d;
            p = end;
        }
    }
    hwloc_bitmap_free(online);
    return 0;
fail:
    if (online)
        hwloc_bitmap_free(online);
    numa_map_free(m);
    return -1;
}

/* Adds allowed CPUs to `in` until it holds `want`: those of the NUMA nodes
 * nearest to `numa` by SLIT distance first (ties: lower os index), lowest
 * CPU first within a node; without a usable map, the allowed CPUs closest
 * in number to `first` (numbering follows packages). `via` says where
 * the added CPUs came from. */
static void top_up(hwloc_bitmap_t in, hwloc_const_bitmap_t allowed, int numa, int first, int want, const numa_map *m,
                   char *via, size_t vcap)
{
    int row = -1;
    via[0] = 0;
    for (int i = 0; m && i < m->n; i++)
        if (m->os[i] == numa)
            row = i;
    if (row >= 0) {
        size_t vl = 0;
        int *order = malloc((size_t)m->n * sizeof *order), k = 0;
        for (int j = 0; order && j < m->n; j++)
            if (j != row)
                order[k++] = j;
        for (int a = 1; order && a < k; a++) /* insertion sort: a handful of nodes */
            for (int b = a; b > 0 && (m->dist[row * m->n + order[b - 1]] > m->dist[row * m->n + order[b]] ||
                                      (m->dist[row * m->n + order[b - 1]] == m->dist[row * m->n + order[b]] &&
                                       m->os[order[b - 1]] > m->os[order[b]]));
                 b--) {
                int t = order[b];
                order[b] = order[b - 1];
                order[b - 1] = t;
            }
        for (int x = 0; order && x < k && hwloc_bitmap_weight(in) < want; x++) {
            int j = order[x], added = 0;
            unsigned c;
            hwloc_bitmap_foreach_begin(c, m->cpus[j])
            {
                if (hwloc_bitmap_weight(in) < want && hwloc_bitmap_isset(allowed, c) && !hwloc_bitmap_isset(in, c)) {
                    hwloc_bitmap_set(in, c);
                    added++;
                }
            }
            hwloc_bitmap_foreach_end();
            if (added && vl < vcap)
                vl += (size_t)snprintf(via + vl, vcap - vl, "%sNUMA %d at distance %d", vl ? ", " : "", m->os[j],
                                       m->dist[row * m->n + j]);
        }
        free(order);
        if (hwloc_bitmap_weight(in) >= want)
            return;
    }
    /* no distances (or still short): closest CPU numbers */
    while (hwloc_bitmap_weight(in) < want) {
        int best = -1, bestd = 0;
        unsigned c;
        hwloc_bitmap_foreach_begin(c, allowed)
        {
            int d = abs((int)c - first);
            if (!hwloc_bitmap_isset(in, c) && (best < 0 || d < bestd))
                best = (int)c, bestd = d;
        }
        hwloc_bitmap_foreach_end();
        if (best < 0)
            break;
        hwloc_bitmap_set(in, (unsigned)best);
    }
}

/* The binding of one rank cut to `allowed`: its own allowed CPUs, topped
 * up to its share (`want`) from the nearest NUMA nodes. `*why` is set
 * (malloc'd) when CPUs outside its NUMA node were used. */
static hwloc_bitmap_t cut_to_allowed(hwloc_const_bitmap_t own, int numa, hwloc_const_bitmap_t allowed, int want,
                                     const numa_map *m, char **why)
{
    hwloc_bitmap_t in = hwloc_bitmap_alloc();
    *why = NULL;
    if (!in)
        return NULL;
    hwloc_bitmap_and(in, own, allowed);
    int have = hwloc_bitmap_weight(in);
    if (have >= want)
        return in;
    char via[256];
    top_up(in, allowed, numa, hwloc_bitmap_first(own), want, m, via, sizeof via);
    char *was = NULL, *now = NULL, *added = NULL;
    hwloc_bitmap_t extra = hwloc_bitmap_alloc();
    if (extra) {
        hwloc_bitmap_andnot(extra, in, own);
        hwloc_bitmap_list_asprintf(&added, extra);
        hwloc_bitmap_free(extra);
    }
    hwloc_bitmap_list_asprintf(&was, own);
    hwloc_bitmap_list_asprintf(&now, in);
    int r;
    if (have == 0)
        r = asprintf(why, "NUMA %d's CPUs %s are outside the allowed set: nearest allowed %s%s%s%s", numa,
                     was ? was : "?", now ? now : "?", via[0] ? " (" : "", via, via[0] ? ")" : "");
    else
        r = asprintf(why,
                     "NUMA %d has %d allowed CPU%s of the %d this rank's share needs: added nearest allowed %s%s%s%s",
                     numa, have, have == 1 ? "" : "s", want, added ? added : "?", via[0] ? " (" : "", via,
                     via[0] ? ")" : "");
    if (r < 0)
        *why = NULL;
    free(was);
    free(now);
    free(added);
    return in;
}

/* Keeps every rank's CPUs inside this process's allowed set (the cgroup
 * cpuset / srun --cpus-per-task, as sched_getaffinity reports it): a rank
 * keeps its NUMA node's allowed CPUs; when they are fewer than its share of
 * the allowed set (allowed / local ranks, at most its own count), it gets
 * the allowed CPUs of the NUMA nodes nearest by distance on top, and
 * --report-bindings says so. Warns once when the allowed set has fewer CPUs
 * than ranks. sysfs_root: the NUMA nodes' sysfs directory. */
static int clamp_to_allowed(p3d_binder *b, int nlocal, const char *sysfs_root, char **err)
{
    cpu_set_t aff;
    if (sched_getaffinity(0, sizeof aff, &aff) < 0)
        return 0; /* nothing known: leave the binding as it is */
    hwloc_bitmap_t allowed = hwloc_bitmap_alloc();
    if (!allowed)
        return p3d_err(err, "out of memory");
    for (int c = 0; c < CPU_SETSIZE; c++)
        if (CPU_ISSET(c, &aff))
            hwloc_bitmap_set(allowed, (unsigned)c);
    int nallowed = hwloc_bitmap_weight(allowed);
    if (nallowed > 0 && nallowed < nlocal)
        p3d_warn("this process may use %d CPU%s for %d local ranks (Slurm: give --cpus-per-task or "
                 "--exclusive); ranks share CPUs",
                 nallowed, nallowed == 1 ? "" : "s", nlocal);
    numa_map m = {0};
    int have_map = 0;
    for (int i = 0; i < nlocal && nallowed > 0; i++) {
        if (!b->cpus[i])
            continue;
        int want = hwloc_bitmap_weight(b->cpus[i]), share = nallowed / (nlocal > 0 ? nlocal : 1);
        if (want > share)
            want = share;
        if (want < 1)
            want = 1;
        if (!have_map && hwloc_bitmap_weight(b->cpus[i]) > 0) {
            hwloc_bitmap_t t = hwloc_bitmap_alloc();
            if (t) {
                hwloc_bitmap_and(t, b->cpus[i], allowed);
                if (hwloc_bitmap_weight(t) < want) /* read sysfs only when some rank needs it */
                    have_map = numa_map_read(sysfs_root, &m) == 0 ? 1 : -1;
                hwloc_bitmap_free(t);
            }
        }
        char *why = NULL;
        hwloc_bitmap_t in = cut_to_allowed(b->cpus[i], b->numa[i], allowed, want, have_map > 0 ? &m : NULL, &why);
        if (!in) {
            numa_map_free(&m);
            hwloc_bitmap_free(allowed);
            return p3d_err(err, "out of memory");
        }
        if (why) {
            free(b->why[i]);
            b->why[i] = why;
        }
        hwloc_bitmap_free(b->cpus[i]);
        b->cpus[i] = in;
        if (b->fast) {
            CPU_ZERO(&b->fast[i]);
            unsigned c;
            hwloc_bitmap_foreach_begin(c, in)
            {
                if (c < CPU_SETSIZE)
                    CPU_SET(c, &b->fast[i]);
            }
            hwloc_bitmap_foreach_end();
        }
    }
    numa_map_free(&m);
    hwloc_bitmap_free(allowed);
    return 0;
}

char *p3d_bind_nearest(const char *own, int numa, const char *allowed, int want, const char *sysfs_root, char **why)
{
    hwloc_bitmap_t o = hwloc_bitmap_alloc(), a = hwloc_bitmap_alloc(), in = NULL;
    char *out = NULL;
    numa_map m = {0};
    *why = NULL;
    if (o && a && hwloc_bitmap_list_sscanf(o, own) == 0 && hwloc_bitmap_list_sscanf(a, allowed) == 0) {
        int ok = numa_map_read(sysfs_root, &m) == 0;
        in = cut_to_allowed(o, numa, a, want, ok ? &m : NULL, why);
        if (in)
            hwloc_bitmap_list_asprintf(&out, in);
    }
    numa_map_free(&m);
    if (o)
        hwloc_bitmap_free(o);
    if (a)
        hwloc_bitmap_free(a);
    if (in)
        hwloc_bitmap_free(in);
    return out;
}

/* Binding that does not happen, and why (into *note): --bind none,
 * --emulate, a topology not discovered on this host. 1 when skipped. */
static int bind_skipped(const p3d_launch *L, const p3d_node *topo, const char *mode, char **note)
{
    if (!strcmp(mode, "none")) {
        *note = strdup("binding: none (--bind none)");
        return 1;
    }
    if (L->emulate) {
        *note = strdup("binding: skipped under --emulate (the nodes are not this host)");
        return 1;
    }
    if (!topo || !topo->source_kind || strcmp(topo->source_kind, "local") != 0) {
        if (asprintf(note, "binding: skipped, topology '%s' was read from a %s, not discovered on this host",
                     topo && topo->source ? topo->source : "?",
                     topo && topo->source_kind ? topo->source_kind : "file") < 0)
            *note = NULL;
        return 1;
    }
    return 0;
}

/* --bind numa from the discovered topology alone (no hwloc load): every
 * GPU rank's GPU has a cpuset and a NUMA node, and CPU slots only on a
 * host with one NUMA node. */
static int bind_fast_ok(const p3d_launch *L, const p3d_node *topo, const char *mode, const int *ranks, int nlocal)
{
    int fast = !strcmp(mode, "numa");
    for (int i = 0; fast && i < nlocal; i++) {
        int g = L->job->pl->ranks[ranks[i]].gpu;
        if (p3d_is_cpu_slot(topo, g)) {
            if (topo->nnuma > 1)
                fast = 0;
        } else if (!topo->gpus[g].cpus || !topo->gpus[g].cpus[0] || topo->gpus[g].numa < 0) {
            fast = 0;
        }
    }
    return fast;
}

/* The fast path: each rank's GPU's cpuset and NUMA node, as read. */
static int bind_fast(p3d_binder *b, const p3d_launch *L, const p3d_node *topo, int node, const int *ranks, int nlocal,
                     char **err)
{
    b->fast = calloc((size_t)nlocal + 1, sizeof *b->fast);
    if (!b->fast)
        return p3d_err(err, "out of memory");
    for (int i = 0; i < nlocal; i++) {
        int g = L->job->pl->ranks[ranks[i]].gpu;
        if (p3d_is_cpu_slot(topo, g)) {
            /* not bound, but all of this host is one NUMA node: that
             * is the node it runs on (what --bind core reports too) */
            b->numa[i] = only_numa_node();
            b->why[i] = strdup("CPU slot on a host with one NUMA node: nothing to bind");
            continue;
        }
        b->cpus[i] = hwloc_bitmap_alloc();
        b->mems[i] = hwloc_bitmap_alloc();
        if (!b->cpus[i] || !b->mems[i] || hwloc_bitmap_list_sscanf(b->cpus[i], topo->gpus[g].cpus) < 0)
            return p3d_err(err, "binding: %s: GPU %d: bad cpuset '%s'", L->job->cluster->nodes[node].name, g,
                           topo->gpus[g].cpus);
        hwloc_bitmap_only(b->mems[i], (unsigned)topo->gpus[g].numa);
        CPU_ZERO(&b->fast[i]);
        unsigned c;
        hwloc_bitmap_foreach_begin(c, b->cpus[i])
        {
            if (c < CPU_SETSIZE)
                CPU_SET(c, &b->fast[i]);
        }
        hwloc_bitmap_foreach_end();
    }
    return 0;
}

/* This host's topology loaded by hwloc, and each rank's NUMA node's cpus
 * and memory: its GPU's node, or for a CPU slot the nodes in turn. */
static int bind_numa_sets(p3d_binder *b, int nlocal, char **err)
{
    if (hwloc_topology_init(&b->topo) < 0 ||
        hwloc_topology_set_io_types_filter(b->topo, HWLOC_TYPE_FILTER_KEEP_NONE) < 0 ||
        hwloc_topology_load(b->topo) < 0)
        return p3d_err(err, "binding: hwloc cannot read this host's topology: %s (use --bind none)", strerror(errno));
    int nnuma = hwloc_get_nbobjs_by_type(b->topo, HWLOC_OBJ_NUMANODE);
    for (int i = 0; i < nlocal; i++) {
        hwloc_obj_t nobj = NULL;
        if (b->numa[i] >= 0) {
            nobj = hwloc_get_numanode_obj_by_os_index(b->topo, (unsigned)b->numa[i]);
            if (!nobj && asprintf(&b->why[i], "NUMA node %d not found on this host", b->numa[i]) < 0)
                b->why[i] = NULL;
        } else if (nnuma > 0) {
            /* CPU slot: spread over the NUMA nodes in local-rank order */
            nobj = hwloc_get_obj_by_type(b->topo, HWLOC_OBJ_NUMANODE, (unsigned)(i * nnuma / nlocal));
            if (nobj)
                b->numa[i] = (int)nobj->os_index;
        }
        if (!nobj)
            continue;
        b->cpus[i] = hwloc_bitmap_dup(nobj->cpuset);
        b->mems[i] = hwloc_bitmap_dup(nobj->nodeset);
    }
    return 0;
}

/* --bind core: each NUMA node's cores split among the ranks that share it. */
static void bind_split_cores(p3d_binder *b, int nlocal)
{
    for (int i = 0; i < nlocal; i++) {
        if (!b->cpus[i])
            continue;
        int share = 0, k = 0;
        for (int j = 0; j < nlocal; j++)
            if (b->cpus[j] && b->numa[j] == b->numa[i]) {
                if (j < i)
                    k++;
                share++;
            }
        hwloc_bitmap_t numa_set = b->cpus[i];
        int ncores = hwloc_get_nbobjs_inside_cpuset_by_type(b->topo, numa_set, HWLOC_OBJ_CORE);
        if (ncores <= 0)
            continue;
        hwloc_bitmap_t set = hwloc_bitmap_alloc();
        int lo = k * ncores / share, hi = (k + 1) * ncores / share;
        if (hi <= lo) /* more ranks than cores: share round-robin */
            lo = k % ncores, hi = lo + 1;
        for (int c = lo; c < hi; c++) {
            hwloc_obj_t core = hwloc_get_obj_inside_cpuset_by_type(b->topo, numa_set, HWLOC_OBJ_CORE, (unsigned)c);
            if (core)
                hwloc_bitmap_or(set, set, core->cpuset);
        }
        hwloc_bitmap_free(b->cpus[i]);
        b->cpus[i] = set;
    }
}

int p3d_bind_prepare(const p3d_launch *L, int node, const int *ranks, int nlocal, p3d_binder **out, char **note,
                     char **err)
{
    const p3d_node *topo = L->job->cluster->nodes[node].topo;
    const char *mode = L->o->bind ? L->o->bind : "numa";
    int rc = -1;
    p3d_binder *b = calloc(1, sizeof *b);
    *out = NULL;
    *note = NULL;
    if (!b)
        return p3d_err(err, "out of memory");
    b->nlocal = nlocal;
    b->mode = strdup(mode);
    b->cpus = calloc((size_t)nlocal + 1, sizeof *b->cpus);
    b->mems = calloc((size_t)nlocal + 1, sizeof *b->mems);
    b->numa = calloc((size_t)nlocal + 1, sizeof *b->numa);
    b->why = calloc((size_t)nlocal + 1, sizeof *b->why);
    if (!b->mode || !b->cpus || !b->mems || !b->numa || !b->why) {
        p3d_err(err, "out of memory");
        goto out;
    }
    for (int i = 0; i < nlocal; i++) {
        int g = L->job->pl->ranks[ranks[i]].gpu;
        b->numa[i] = (topo && g >= 0 && g < topo->ngpus) ? topo->gpus[g].numa : -1;
    }
    if (bind_skipped(L, topo, mode, note)) {
        rc = 0;
        goto out;
    }
    if (bind_fast_ok(L, topo, mode, ranks, nlocal)) {
        if (bind_fast(b, L, topo, node, ranks, nlocal, err) < 0)
            goto out;
    } else {
        if (bind_numa_sets(b, nlocal, err) < 0)
            goto out;
        if (!strcmp(mode, "core"))
            bind_split_cores(b, nlocal);
    }
    if (clamp_to_allowed(b, nlocal, "/sys/devices/system/node", err) < 0)
        goto out;
    rc = 0;
out:
    if (rc == 0)
        *out = b;
    else
        p3d_binder_free(b);
    return rc;
}

int p3d_bind_needs_fork(const p3d_binder *b)
{
    return b && b->topo != NULL;
}

int p3d_bind_apply(const p3d_binder *b, int local)
{
    if (!b || local < 0 || local >= b->nlocal || !b->cpus[local])
        return 0;
    if (b->fast) {
        if (sched_setaffinity(0, sizeof b->fast[local], &b->fast[local]) < 0)
            return -1;
        unsigned long mask[16] = {0};
        int numa = hwloc_bitmap_first(b->mems[local]);
        if (numa < 0 || numa >= (int)(sizeof mask * 8))
            return 0;
        mask[numa / (8 * (int)sizeof mask[0])] |= 1ul << (numa % (8 * (int)sizeof mask[0]));
        if (syscall(SYS_set_mempolicy, MPOL_BIND, mask, sizeof mask * 8) < 0 && errno != ENOSYS && errno != EPERM)
            return -1;
        return 0;
    }
    if (!b->topo)
        return 0;
    if (hwloc_set_cpubind(b->topo, b->cpus[local], HWLOC_CPUBIND_PROCESS) < 0)
        return -1;
    /* memory: best effort where the kernel lacks NUMA policy support */
    if (hwloc_set_membind(b->topo, b->mems[local], HWLOC_MEMBIND_BIND,
                          HWLOC_MEMBIND_PROCESS | HWLOC_MEMBIND_BYNODESET) < 0 &&
        errno != ENOSYS && errno != EXDEV)
        return -1;
    return 0;
}

int p3d_bind_ncpus(const p3d_binder *b, int local, int nlocal)
{
    if (b && local >= 0 && local < b->nlocal && b->cpus && b->cpus[local]) {
        int n = b->fast ? CPU_COUNT(&b->fast[local]) : hwloc_bitmap_weight(b->cpus[local]);
        if (n > 0)
            return n;
    }
    cpu_set_t all;
    int n = sched_getaffinity(0, sizeof all, &all) == 0 ? CPU_COUNT(&all) : 1;
    n /= nlocal > 0 ? nlocal : 1;
    return n > 0 ? n : 1;
}

char *p3d_bind_report(const p3d_binder *b, const p3d_launch *L, int node, const int *ranks, int nlocal)
{
    const p3d_cnode *cn = &L->job->cluster->nodes[node];
    const p3d_node *topo = cn->topo;
    char *o = NULL;
    size_t ol = 0;
    FILE *f = open_memstream(&o, &ol);
    if (!f)
        return NULL;
    for (int i = 0; i < nlocal; i++) {
        const p3d_rank *k = &L->job->pl->ranks[ranks[i]];
        const p3d_gpu *g = (topo && k->gpu >= 0 && k->gpu < topo->ngpus) ? &topo->gpus[k->gpu] : NULL;
        char *cpus = NULL;
        if (b && b->cpus[i])
            hwloc_bitmap_list_asprintf(&cpus, b->cpus[i]);
        /* NUMA: the node the binding gives (for a GPU rank its GPU's,
         * also with --bind none), "-" when none is known */
        int numa = b ? b->numa[i] : (g ? g->numa : -1);
        char nbuf[16] = "-";
        if (numa >= 0)
            snprintf(nbuf, sizeof nbuf, "%d", numa);
        /* where the rank sits in the mesh: tp pp dp always, cp and ep when
         * the job has them (the same coordinates as the output tags) */
        char at[96];
        int na = snprintf(at, sizeof at, "tp %d pp %d dp %d", k->coord[P3D_DIM_TP], k->coord[P3D_DIM_PP],
                          k->coord[P3D_DIM_DP]);
        if (p3d_mesh_size(&L->job->pl->mesh, P3D_DIM_CP) > 1 && na > 0 && (size_t)na < sizeof at)
            na += snprintf(at + na, sizeof at - (size_t)na, " cp %d", k->coord[P3D_DIM_CP]);
        if (p3d_mesh_size(&L->job->pl->mesh, P3D_DIM_EP) > 1 && na > 0 && (size_t)na < sizeof at)
            snprintf(at + na, sizeof at - (size_t)na, " ep %d", k->coord[P3D_DIM_EP]);
        fprintf(f, "bind: %s rank %d (local %d; %s) -> cpus %s -> NUMA %s -> ", cn->name, ranks[i], k->local_rank, at,
                cpus ? cpus : "not bound", nbuf);
        if (g && p3d_is_cpu_slot(topo, k->gpu))
            fprintf(f, "CPU slot %d (no GPU)", k->gpu);
        else if (g)
            fprintf(f, "GPU %d (%s)", g->index, g->pci[0] ? g->pci : "pci ?");
        else
            fprintf(f, "GPU none");
        fprintf(f, " -> NIC %s",
                g && g->nearest_nic >= 0 && g->nearest_nic < topo->nnics ? topo->nics[g->nearest_nic].name : "none");
        if (b && b->why[i])
            fprintf(f, " (%s)", b->why[i]);
        fputc('\n', f);
        free(cpus);
    }
    fclose(f);
    return o;
}
