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
#include "launch.h"

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
    hwloc_bitmap_t *cpus;    /* per local rank, NULL = leave unbound */
    hwloc_bitmap_t *mems;    /* nodesets */
    int *numa;               /* os index, -1 unknown */
    char **why;              /* per rank: reason it is not bound, or NULL */
    char *mode;
    cpu_set_t *fast;         /* fast path: per rank affinity, NULL when topo */
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

/* Keeps every rank's CPUs inside this process's allowed set (the cgroup
 * cpuset / srun --cpus-per-task, as sched_getaffinity reports it): a rank
 * whose NUMA node has no allowed CPU gets the allowed CPUs nearest to it
 * (those of the NUMA nodes closest by os index, i.e. the same package
 * first), and --report-bindings says so. Warns once when the allowed set
 * has fewer CPUs than ranks. */
static int clamp_to_allowed(p3d_binder *b, int nlocal, char **err)
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
        fprintf(stderr, "par3drun: warning: this process may use %d CPU%s for %d local ranks (Slurm: give "
                        "--cpus-per-task or --exclusive); ranks share CPUs\n",
                nallowed, nallowed == 1 ? "" : "s", nlocal);
    for (int i = 0; i < nlocal && nallowed > 0; i++) {
        if (!b->cpus[i])
            continue;
        hwloc_bitmap_t in = hwloc_bitmap_alloc();
        if (!in) {
            hwloc_bitmap_free(allowed);
            return p3d_err(err, "out of memory");
        }
        hwloc_bitmap_and(in, b->cpus[i], allowed);
        if (hwloc_bitmap_iszero(in)) {
            /* nearest allowed: the allowed CPUs closest in number to the
             * rank's own (CPU numbering follows packages and NUMA nodes) */
            int first = hwloc_bitmap_first(b->cpus[i]), want = hwloc_bitmap_weight(b->cpus[i]);
            if (want > nallowed / (nlocal > 0 ? nlocal : 1))
                want = nallowed / (nlocal > 0 ? nlocal : 1);
            if (want < 1)
                want = 1;
            for (int k = 0; k < want; k++) {
                int best = -1, bestd = 0;
                unsigned c;
                hwloc_bitmap_foreach_begin(c, allowed)
                {
                    int d = abs((int)c - first);
                    if (!hwloc_bitmap_isset(in, c) && (best < 0 || d < bestd))
                        best = (int)c, bestd = d;
                }
                hwloc_bitmap_foreach_end();
                if (best >= 0)
                    hwloc_bitmap_set(in, (unsigned)best);
            }
            char *was = NULL, *now = NULL;
            hwloc_bitmap_list_asprintf(&was, b->cpus[i]);
            hwloc_bitmap_list_asprintf(&now, in);
            free(b->why[i]);
            if (asprintf(&b->why[i], "NUMA %d's CPUs %s are outside the allowed set: nearest allowed %s", b->numa[i],
                         was ? was : "?", now ? now : "?") < 0)
                b->why[i] = NULL;
            free(was);
            free(now);
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
    hwloc_bitmap_free(allowed);
    return 0;
}

int p3d_bind_prepare(const p3d_launch *L, int node, const int *ranks, int nlocal, p3d_binder **out,
                     char **note, char **err)
{
    const p3d_node *topo = L->cluster->nodes[node].topo;
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
        int g = L->pl->ranks[ranks[i]].gpu;
        b->numa[i] = (topo && g >= 0 && g < topo->ngpus) ? topo->gpus[g].numa : -1;
    }
    if (!strcmp(mode, "none")) {
        *note = strdup("binding: none (--bind none)");
        rc = 0;
        goto out;
    }
    if (L->emulate) {
        *note = strdup("binding: skipped under --emulate (the nodes are not this host)");
        rc = 0;
        goto out;
    }
    if (!topo || !topo->source_kind || strcmp(topo->source_kind, "local") != 0) {
        if (asprintf(note, "binding: skipped, topology '%s' was read from a %s, not discovered on this host",
                     topo && topo->source ? topo->source : "?",
                     topo && topo->source_kind ? topo->source_kind : "file") < 0)
            *note = NULL;
        rc = 0;
        goto out;
    }
    int fast = !strcmp(mode, "numa");
    for (int i = 0; fast && i < nlocal; i++) {
        int g = L->pl->ranks[ranks[i]].gpu;
        if (p3d_is_cpu_slot(topo, g)) {
            if (topo->nnuma > 1)
                fast = 0;
        } else if (!topo->gpus[g].cpus || !topo->gpus[g].cpus[0] || topo->gpus[g].numa < 0) {
            fast = 0;
        }
    }
    if (fast) {
        b->fast = calloc((size_t)nlocal + 1, sizeof *b->fast);
        if (!b->fast) {
            p3d_err(err, "out of memory");
            goto out;
        }
        for (int i = 0; i < nlocal; i++) {
            int g = L->pl->ranks[ranks[i]].gpu;
            if (p3d_is_cpu_slot(topo, g)) {
                /* not bound, but all of this host is one NUMA node: that
                 * is the node it runs on (what --bind core reports too) */
                b->numa[i] = only_numa_node();
                b->why[i] = strdup("CPU slot on a host with one NUMA node: nothing to bind");
                continue;
            }
            b->cpus[i] = hwloc_bitmap_alloc();
            b->mems[i] = hwloc_bitmap_alloc();
            if (!b->cpus[i] || !b->mems[i] || hwloc_bitmap_list_sscanf(b->cpus[i], topo->gpus[g].cpus) < 0) {
                p3d_err(err, "binding: %s: GPU %d: bad cpuset '%s'", L->cluster->nodes[node].name, g,
                        topo->gpus[g].cpus);
                goto out;
            }
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
        if (clamp_to_allowed(b, nlocal, err) < 0)
            goto out;
        rc = 0;
        goto out;
    }
    if (hwloc_topology_init(&b->topo) < 0 ||
        hwloc_topology_set_io_types_filter(b->topo, HWLOC_TYPE_FILTER_KEEP_NONE) < 0 ||
        hwloc_topology_load(b->topo) < 0) {
        p3d_err(err, "binding: hwloc cannot read this host's topology: %s (use --bind none)", strerror(errno));
        goto out;
    }
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
    if (!strcmp(mode, "core")) {
        /* split each NUMA node's cores among the ranks that share it */
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
                hwloc_obj_t core =
                    hwloc_get_obj_inside_cpuset_by_type(b->topo, numa_set, HWLOC_OBJ_CORE, (unsigned)c);
                if (core)
                    hwloc_bitmap_or(set, set, core->cpuset);
            }
            hwloc_bitmap_free(b->cpus[i]);
            b->cpus[i] = set;
        }
    }
    if (clamp_to_allowed(b, nlocal, err) < 0)
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
        if (syscall(SYS_set_mempolicy, MPOL_BIND, mask, sizeof mask * 8) < 0 && errno != ENOSYS &&
            errno != EPERM)
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

char *p3d_bind_report(const p3d_binder *b, const p3d_launch *L, int node, const int *ranks, int nlocal)
{
    const p3d_cnode *cn = &L->cluster->nodes[node];
    const p3d_node *topo = cn->topo;
    char *o = NULL;
    size_t ol = 0;
    FILE *f = open_memstream(&o, &ol);
    if (!f)
        return NULL;
    for (int i = 0; i < nlocal; i++) {
        const p3d_rank *k = &L->pl->ranks[ranks[i]];
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
        fprintf(f, "bind: %s rank %d (local %d) -> cpus %s -> NUMA %s -> ", cn->name, ranks[i], k->local_rank,
                cpus ? cpus : "not bound", nbuf);
        if (g && p3d_is_cpu_slot(topo, k->gpu))
            fprintf(f, "CPU slot %d (no GPU)", k->gpu);
        else if (g)
            fprintf(f, "GPU %d (%s)", g->index, g->pci[0] ? g->pci : "pci ?");
        else
            fprintf(f, "GPU none");
        fprintf(f, " -> NIC %s",
                g && g->nearest_nic >= 0 && g->nearest_nic < topo->nnics ? topo->nics[g->nearest_nic].name
                                                                         : "none");
        if (b && b->why[i])
            fprintf(f, " (%s)", b->why[i]);
        fputc('\n', f);
        free(cpus);
    }
    fclose(f);
    return o;
}
