/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * topo_hwloc_collect.c — what a loaded hwloc topology says about one node,
 * as the raw node record (topo_hwloc.h): GPUs, NICs, NUMA/package
 * locality, PCIe-tree link classes and the NVLinkBandwidth distances
 * matrix. topo_hwloc.c loads the topology and completes the record.
 *
 * Why some choices (docs/topology.md has the user-facing version):
 *  - A GPU is a PCI device that carries a cuda* or nvml* OS device, or, when
 *    the export has no OS devices, an NVIDIA (0x10de) PCI device of class
 *    VGA (0x0300) or 3D controller (0x0302). AMD GPUs (rsmi*) are reported
 *    in a note but not placed: launch and the worker speak CUDA/NCCL only.
 *  - NICs are RDMA devices (OpenFabrics: mlx5_*, EFA) when the node has any,
 *    as in `nvidia-smi topo -m`; a node without RDMA lists its PCI network
 *    interfaces instead. One NIC per PCI function (mlx5_0 and its ib0 are one).
 *  - NVLinkBandwidth values are MB/s (hwloc's NVML backend); the node keeps
 *    GB/s. A heterogeneous matrix (GPU <-> NVSwitch, GPU <-> CPU) is reduced
 *    to GPU x GPU: all NVSwitch ports are merged into one switch and a GPU
 *    pair with no direct link gets min(bw(a,switch), bw(b,switch)) — the
 *    same as hwloc's merge-switch-ports + transitive-closure transforms.
 *    Links to CPUs (POWER8/9 NVLink) are ignored.
 */
#include "topo_hwloc.h"

#include <hwloc.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- identifying objects ----------------------------------------------- */

static int starts(const char *s, const char *p)
{
    return s && !strncmp(s, p, strlen(p));
}

static int osdev_is_nvidia_gpu(hwloc_obj_t o)
{
    if (o->type != HWLOC_OBJ_OS_DEVICE)
        return 0;
    if (o->attr->osdev.type != HWLOC_OBJ_OSDEV_COPROC && o->attr->osdev.type != HWLOC_OBJ_OSDEV_GPU)
        return 0;
    return starts(o->name, "cuda") || starts(o->name, "nvml") ||
           (o->subtype && (!strcmp(o->subtype, "CUDA") || !strcmp(o->subtype, "NVML")));
}

static int osdev_is_amd_gpu(hwloc_obj_t o)
{
    return o->type == HWLOC_OBJ_OS_DEVICE && (starts(o->name, "rsmi") || (o->subtype && !strcmp(o->subtype, "RSMI")));
}

static int pcidev_is_nvidia_gpu(hwloc_obj_t o)
{
    return o->type == HWLOC_OBJ_PCI_DEVICE && o->attr->pcidev.vendor_id == 0x10de &&
           (o->attr->pcidev.class_id == 0x0300 || o->attr->pcidev.class_id == 0x0302);
}

/* Non-I/O ancestor's nodeset: where a device's memory traffic lands. */
static hwloc_obj_t cpu_side(hwloc_topology_t t, hwloc_obj_t o)
{
    return hwloc_get_non_io_ancestor_obj(t, o);
}

static int lowest_numa(hwloc_topology_t t, hwloc_obj_t o)
{
    hwloc_obj_t a = cpu_side(t, o);
    if (!a || !a->nodeset || hwloc_bitmap_iszero(a->nodeset))
        return -1;
    /* A locality spanning all NUMA nodes of a multi-NUMA machine says
     * nothing about which node is near: report unknown rather than 0. */
    int nn = hwloc_get_nbobjs_by_type(t, HWLOC_OBJ_NUMANODE);
    if (nn > 1 && hwloc_bitmap_weight(a->nodeset) >= nn)
        return -1;
    return hwloc_bitmap_first(a->nodeset);
}

static int package_of(hwloc_topology_t t, hwloc_obj_t o)
{
    hwloc_obj_t a = cpu_side(t, o);
    if (!a || !a->cpuset || hwloc_bitmap_iszero(a->cpuset))
        return -1;
    hwloc_obj_t p = NULL;
    while ((p = hwloc_get_next_obj_by_type(t, HWLOC_OBJ_PACKAGE, p)))
        if (p->cpuset && hwloc_bitmap_isincluded(a->cpuset, p->cpuset))
            return (int)p->os_index == -1 ? (int)p->logical_index : (int)p->os_index;
    return -1;
}

static char *cpulist(hwloc_topology_t t, hwloc_obj_t o)
{
    hwloc_obj_t a = cpu_side(t, o);
    char *s = NULL;
    if (a && a->cpuset && hwloc_bitmap_list_asprintf(&s, a->cpuset) >= 0)
        return s;
    return strdup("");
}

/* ---- PCIe link classes ------------------------------------------------- */

static int is_pci_bridge(hwloc_obj_t o)
{
    return o->type == HWLOC_OBJ_BRIDGE && o->attr->bridge.upstream_type == HWLOC_OBJ_BRIDGE_PCI;
}

static int is_host_bridge(hwloc_obj_t o)
{
    return o->type == HWLOC_OBJ_BRIDGE && o->attr->bridge.upstream_type == HWLOC_OBJ_BRIDGE_HOST;
}

static int is_ancestor(hwloc_obj_t anc, hwloc_obj_t o)
{
    for (; o; o = o->parent)
        if (o == anc)
            return 1;
    return 0;
}

/* PCI bridges strictly between o and its ancestor c. */
static int bridges_below(hwloc_obj_t o, hwloc_obj_t c)
{
    int k = 0;
    for (o = o->parent; o && o != c; o = o->parent)
        k += is_pci_bridge(o);
    return k;
}

/* nvidia-smi's classes from the PCI tree. A PCIe switch shows in hwloc as an
 * upstream-port bridge whose children are downstream-port bridges, so two
 * devices behind one switch meet at the upstream port with at most one
 * bridge (their own downstream port) on each side: PIX. More bridges on
 * either side means nested switches: PXB. Meeting at the host bridge: PHB.
 * Meeting above it: NODE when their CPU-side localities share a NUMA node,
 * else SYS. a or b may be NULL (no PCI object known): then NUMA decides. */
static p3d_link pci_class(hwloc_topology_t t, hwloc_obj_t a, hwloc_obj_t b)
{
    if (a && b) {
        hwloc_obj_t c = a->parent;
        while (c && !is_ancestor(c, b))
            c = c->parent;
        if (c && (is_pci_bridge(c) || c->type == HWLOC_OBJ_PCI_DEVICE))
            return bridges_below(a, c) <= 1 && bridges_below(b, c) <= 1 ? P3D_LINK_PIX : P3D_LINK_PXB;
        if (c && is_host_bridge(c))
            return P3D_LINK_PHB;
    }
    hwloc_obj_t ca = a ? cpu_side(t, a) : NULL, cb = b ? cpu_side(t, b) : NULL;
    if (ca && cb && ca->nodeset && cb->nodeset && hwloc_bitmap_intersects(ca->nodeset, cb->nodeset))
        return P3D_LINK_NODE;
    return P3D_LINK_SYS;
}

/* ---- collecting GPUs and NICs ------------------------------------------ */

typedef struct gpu_ref {
    hwloc_obj_t pci;   /* PCI device, or NULL for an OS-device-only GPU */
    hwloc_obj_t osdev; /* preferred OS device (cuda* over nvml*), or NULL */
    hwloc_obj_t any;   /* pci ? pci : osdev: for locality */
} gpu_ref;

typedef struct nic_ref {
    hwloc_obj_t pci, osdev;
    const char *kind;
} nic_ref;

static int gpu_cmp(const void *pa, const void *pb)
{
    const gpu_ref *a = pa, *b = pb;
    if (a->pci && b->pci) {
        const struct hwloc_pcidev_attr_s *x = &a->pci->attr->pcidev, *y = &b->pci->attr->pcidev;
        unsigned long kx =
            ((unsigned long)x->domain << 24) | ((unsigned long)x->bus << 16) | ((unsigned long)x->dev << 8) | x->func;
        unsigned long ky =
            ((unsigned long)y->domain << 24) | ((unsigned long)y->bus << 16) | ((unsigned long)y->dev << 8) | y->func;
        return kx < ky ? -1 : kx > ky;
    }
    if (!!a->pci != !!b->pci)
        return a->pci ? -1 : 1;
    return strverscmp(a->osdev->name ? a->osdev->name : "", b->osdev->name ? b->osdev->name : "");
}

static int nic_cmp(const void *pa, const void *pb)
{
    const nic_ref *a = pa, *b = pb;
    return strverscmp(a->osdev->name ? a->osdev->name : "", b->osdev->name ? b->osdev->name : "");
}

/* Finds (or adds) the GPU entry for anchor pci/osdev. */
static gpu_ref *gpu_slot(gpu_ref *v, int *n, hwloc_obj_t pci)
{
    for (int i = 0; i < *n; i++)
        if (pci && v[i].pci == pci)
            return &v[i];
    v[*n] = (gpu_ref){pci, NULL, pci};
    return &v[(*n)++];
}

static int collect_gpus(hwloc_topology_t t, gpu_ref **out, int *nout, int *namd)
{
    int cap = 0, n = 0;
    hwloc_obj_t o = NULL;
    *namd = 0;
    while ((o = hwloc_get_next_osdev(t, o)))
        cap++;
    while ((o = hwloc_get_next_pcidev(t, o)))
        cap++;
    gpu_ref *v = calloc((size_t)(cap ? cap : 1), sizeof *v);
    if (!v)
        return -1;
    while ((o = hwloc_get_next_osdev(t, o))) {
        if (osdev_is_amd_gpu(o))
            (*namd)++;
        if (!osdev_is_nvidia_gpu(o))
            continue;
        hwloc_obj_t p = o->parent;
        if (p && p->type != HWLOC_OBJ_PCI_DEVICE)
            p = NULL;
        gpu_ref *g = p ? gpu_slot(v, &n, p) : NULL;
        if (!g) {
            v[n] = (gpu_ref){NULL, o, o};
            g = &v[n++];
            continue;
        }
        /* prefer cuda* (what CUDA numbers) over nvml* over others */
        if (!g->osdev || (starts(o->name, "cuda") && !starts(g->osdev->name, "cuda")))
            g->osdev = o;
    }
    while ((o = hwloc_get_next_pcidev(t, o)))
        if (pcidev_is_nvidia_gpu(o))
            gpu_slot(v, &n, o);
    qsort(v, (size_t)n, sizeof *v, gpu_cmp);
    *out = v;
    *nout = n;
    return 0;
}

/* NVIDIAUUID of the GPU's nvml* OS device (on the PCI device, or os). */
static const char *gpu_uuid(hwloc_obj_t pci, hwloc_obj_t os)
{
    const char *u = os ? hwloc_obj_get_info_by_name(os, "NVIDIAUUID") : NULL;
    for (hwloc_obj_t c = pci ? pci->io_first_child : NULL; c && !u; c = c->next_sibling)
        if (c->type == HWLOC_OBJ_OS_DEVICE)
            u = hwloc_obj_get_info_by_name(c, "NVIDIAUUID");
    return u;
}

static int collect_nics(hwloc_topology_t t, nic_ref **out, int *nout)
{
    int cap = 0, n = 0, any_rdma = 0;
    hwloc_obj_t o = NULL;
    while ((o = hwloc_get_next_osdev(t, o))) {
        cap++;
        if (o->attr->osdev.type == HWLOC_OBJ_OSDEV_OPENFABRICS)
            any_rdma = 1;
    }
    nic_ref *v = calloc((size_t)(cap ? cap : 1), sizeof *v);
    if (!v)
        return -1;
    while ((o = hwloc_get_next_osdev(t, o))) {
        hwloc_obj_t p = o->parent;
        if (!p || p->type != HWLOC_OBJ_PCI_DEVICE || !o->name)
            continue;
        int of = o->attr->osdev.type == HWLOC_OBJ_OSDEV_OPENFABRICS;
        int net = o->attr->osdev.type == HWLOC_OBJ_OSDEV_NETWORK;
        if (!(any_rdma ? of : net))
            continue;
        int dup = 0; /* one NIC per PCI function */
        for (int i = 0; i < n; i++)
            dup |= v[i].pci == p;
        if (dup)
            continue;
        const char *kind = "eth";
        if (of)
            kind = p->attr->pcidev.vendor_id == 0x1d0f || starts(o->name, "efa") ? "efa" : "ib";
        v[n++] = (nic_ref){p, o, kind};
    }
    qsort(v, (size_t)n, sizeof *v, nic_cmp);
    *out = v;
    *nout = n;
    return 0;
}

/* ---- NVLink matrix ----------------------------------------------------- */

/* Which GPU (index) an object of the distances matrix stands for, or -1. */
static int gpu_of_obj(const gpu_ref *g, int n, hwloc_obj_t o)
{
    for (int i = 0; i < n; i++) {
        if (g[i].pci && (o == g[i].pci || o->parent == g[i].pci))
            return i;
        if (!g[i].pci && o == g[i].osdev)
            return i;
    }
    return -1;
}

static int read_nvlink(hwloc_topology_t t, p3d_node *nd, const gpu_ref *g, int *had, char **err)
{
    int rc = -1, ng = nd->ngpus;
    unsigned nr = 1;
    struct hwloc_distances_s *d = NULL;
    int *role = NULL; /* GPU index, -2 switch, -1 ignored (CPU side) */
    double *to_sw = NULL;
    if (hwloc_distances_get_by_name(t, "NVLinkBandwidth", &nr, &d, 0) < 0) {
        p3d_err(err, "%s: cannot read the NVLinkBandwidth matrix", nd->source);
        goto out;
    }
    *had = nr > 0 && d;
    if (nr == 0 || !d || ng == 0) {
        rc = 0;
        goto out;
    }
    unsigned k = d->nbobjs;
    role = malloc(sizeof(int) * (k ? k : 1));
    to_sw = calloc((size_t)ng, sizeof *to_sw);
    if (!role || !to_sw) {
        p3d_err(err, "out of memory");
        goto out;
    }
    for (unsigned i = 0; i < k; i++) {
        hwloc_obj_t o = d->objs[i];
        role[i] = -1;
        if (!o)
            continue;
        int gi = gpu_of_obj(g, ng, o);
        if (gi >= 0)
            role[i] = gi;
        else if (o->type == HWLOC_OBJ_PCI_DEVICE || o->type == HWLOC_OBJ_OS_DEVICE)
            role[i] = -2; /* NVSwitch (or another NVLink peer device) */
    }
    /* Both directions must agree; p3d_node_finish checks the GPU x GPU
     * result, this checks the raw pairs so the message names hwloc's. */
    for (unsigned i = 0; i < k; i++)
        for (unsigned j = 0; j < k; j++) {
            if (i == j || role[i] == -1 || role[j] == -1)
                continue;
            hwloc_uint64_t a = d->values[i * k + j], b = d->values[j * k + i];
            if (a != b) {
                p3d_err(err,
                        "%s: NVLinkBandwidth matrix not symmetric: "
                        "%s->%s is %llu MB/s but %s->%s is %llu MB/s",
                        nd->source, d->objs[i]->name ? d->objs[i]->name : "?",
                        d->objs[j]->name ? d->objs[j]->name : "?", (unsigned long long)a,
                        d->objs[j]->name ? d->objs[j]->name : "?", d->objs[i]->name ? d->objs[i]->name : "?",
                        (unsigned long long)b);
                goto out;
            }
            if (role[i] >= 0 && role[j] >= 0 && role[i] != role[j]) {
                /* max, not sum: cuda0 and nvml0 may both stand for GPU 0 */
                double *v = &nd->nvlink[(size_t)role[i] * ng + role[j]];
                if ((double)a / 1000.0 > *v)
                    *v = (double)a / 1000.0;
            } else if (role[i] >= 0 && role[j] == -2)
                to_sw[role[i]] += (double)a / 1000.0;
        }
    for (int a = 0; a < ng; a++)
        for (int b = 0; b < ng; b++) {
            double *v = &nd->nvlink[(size_t)a * ng + b];
            if (a != b && *v == 0 && to_sw[a] > 0 && to_sw[b] > 0)
                *v = to_sw[a] < to_sw[b] ? to_sw[a] : to_sw[b];
        }
    rc = 0;
out:
    if (d)
        hwloc_distances_release(t, d);
    free(role);
    free(to_sw);
    return rc;
}

/* ---- building the node ------------------------------------------------- */

static void copy_str(char *dst, size_t cap, const char *s)
{
    snprintf(dst, cap, "%s", s ? s : "");
}

/* Discovery's facts: everything the record holds that comes from hwloc,
 * nothing that the completion step (complete_node, topo_hwloc.c) adds.
 * Live discovery caches this part (topo_cache.c). */
int p3d_hwloc_collect_node(hwloc_topology_t t, const char *source, const char *kind, const char *hostname,
                           p3d_node **out, p3d_topo_extra *x, char **err)
{
    int rc = -1, ng = 0, nn = 0, namd = 0;
    gpu_ref *g = NULL;
    nic_ref *c = NULL;
    p3d_node *nd = NULL;
    hwloc_obj_t root = hwloc_get_root_obj(t);
    const char *hn = hostname;
    if (!hn && root)
        hn = hwloc_obj_get_info_by_name(root, "HostName");
    nd = p3d_node_new(hn ? hn : "unknown", source, kind);
    if (!nd || collect_gpus(t, &g, &ng, &namd) < 0 || collect_nics(t, &c, &nn) < 0) {
        p3d_err(err, "out of memory");
        goto out;
    }
    if (p3d_node_alloc(nd, ng, nn, err) < 0)
        goto out;
    nd->nnuma = hwloc_get_nbobjs_by_type(t, HWLOC_OBJ_NUMANODE);
    nd->npackages = hwloc_get_nbobjs_by_type(t, HWLOC_OBJ_PACKAGE);
    nd->ncores = hwloc_get_nbobjs_by_type(t, HWLOC_OBJ_CORE);
    nd->npus = hwloc_get_nbobjs_by_type(t, HWLOC_OBJ_PU);
    for (int i = 0; i < ng; i++) {
        p3d_gpu *gp = &nd->gpus[i];
        hwloc_obj_t pci = g[i].pci, os = g[i].osdev;
        if (pci)
            snprintf(gp->pci, sizeof gp->pci, "%04x:%02x:%02x.%x", (unsigned)pci->attr->pcidev.domain,
                     pci->attr->pcidev.bus, pci->attr->pcidev.dev, pci->attr->pcidev.func);
        const char *model = os ? hwloc_obj_get_info_by_name(os, "GPUModel") : NULL;
        if (!model && pci)
            model = hwloc_obj_get_info_by_name(pci, "PCIDevice");
        copy_str(gp->model, sizeof gp->model, model);
        copy_str(gp->osdev, sizeof gp->osdev, os ? os->name : NULL);
        /* the UUID, for CUDA_VISIBLE_DEVICES=GPU-... (alloc.c) */
        copy_str(gp->uuid, sizeof gp->uuid, gpu_uuid(pci, os));
        const char *mem = os ? hwloc_obj_get_info_by_name(os, "CUDAGlobalMemorySize") : NULL;
        if (mem)
            gp->mem_bytes = strtoull(mem, NULL, 10) * 1024ULL;
        gp->numa = lowest_numa(t, g[i].any);
        gp->package = package_of(t, g[i].any);
        if (!(gp->cpus = cpulist(t, g[i].any))) {
            p3d_err(err, "out of memory");
            goto out;
        }
    }
    for (int j = 0; j < nn; j++) {
        p3d_nic *ni = &nd->nics[j];
        copy_str(ni->name, sizeof ni->name, c[j].osdev->name);
        hwloc_obj_t p = c[j].pci;
        snprintf(ni->pci, sizeof ni->pci, "%04x:%02x:%02x.%x", (unsigned)p->attr->pcidev.domain, p->attr->pcidev.bus,
                 p->attr->pcidev.dev, p->attr->pcidev.func);
        copy_str(ni->kind, sizeof ni->kind, c[j].kind);
        ni->numa = lowest_numa(t, p);
    }
    for (int a = 0; a < ng; a++) {
        for (int b = 0; b < ng; b++)
            if (a != b)
                nd->gg_class[(size_t)a * ng + b] = (unsigned char)pci_class(t, g[a].pci, g[b].pci);
        for (int j = 0; j < nn; j++)
            nd->gn_class[(size_t)a * nn + j] = (unsigned char)pci_class(t, g[a].pci, c[j].pci);
    }
    x->had_matrix = 0;
    x->namd = namd;
    if (read_nvlink(t, nd, g, &x->had_matrix, err) < 0)
        goto out;
    *out = nd;
    nd = NULL;
    rc = 0;
out:
    free(g);
    free(c);
    p3d_node_free(nd);
    return rc;
}
