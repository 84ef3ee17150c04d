/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * topo_nccl.c — NCCL's own topology XML as a topology source: the format of
 * NCCL_TOPO_FILE (what clouds publish for VMs whose virtual PCI tree
 * misleads hwloc, e.g. Azure's ND-series files) and of NCCL_TOPO_DUMP_FILE
 * (what NCCL believes about any machine).
 *
 *   <system version="1">
 *     <cpu numaid="0" affinity="0000ffff,0000ffff" ...>
 *       <pci busid="0000:0c:00.0" class="0x060400" ...>        a bridge
 *         <pci busid="0000:0f:00.0" class="0x030200" ...>      a GPU
 *           <gpu dev="0" sm="80" ...>
 *             <nvlink target="0000:c0:00.0" count="2" tclass="0x068000"/>
 *         <pci busid="0000:1a:00.0" class="0x020000">          a NIC
 *           <nic><net name="mlx5_bond_1" speed="200000" .../></nic>
 *
 * What is read, and how:
 *  - GPUs: a <pci> holding a <gpu>, or of class 3D controller (0x0302xx) or
 *    VGA (0x0300xx, NVIDIA's vendor id or none); in PCI bus order.
 *  - NICs: one per <net> of a <nic> (its name), a <pci> of class InfiniBand
 *    (0x0207xx) or Ethernet (0x0200xx) without one is a NIC named by its
 *    bus id; a <nic> straight under a <cpu> has no PCI position.
 *  - NUMA: the enclosing <cpu numaid>, its CPUs from the affinity mask
 *    (32-bit hex words, most significant first, as Linux prints cpumasks).
 *  - GPU<->GPU and GPU<->NIC classes from the PCI tree: one bridge between
 *    them PIX, several PXB, different root ports of one CPU NODE, different
 *    CPUs SYS (the words of `nvidia-smi topo -m`, as the hwloc source uses).
 *  - NVLink from <nvlink target count tclass>: to another GPU of the file,
 *    count links between the two; to an NVSwitch (tclass 0x068000), the
 *    GPU sits behind the switches, and every GPU behind them is one domain
 *    with min(links of a, links of b) between a pair (hwloc's merge of
 *    switch ports, topo_hwloc.c, does the same); to a CPU (POWER9) ignored.
 *    Links count 25 GB/s per direction (NVLink 2-4), 20 for sm 6.x, 14.0625
 *    for sm 8.6/8.7 (GA10x bridges), 50 for sm 10.x; another generation is
 *    counted at 25 and said in a note.
 * A file with no <nvlink> at all says so in a note: NCCL adds NVLink from
 * the driver at run time, and the Azure files carry none although those VMs
 * have NVSwitch. Read on the machine itself, the NVML plugin fills the links
 * in (as it does for live hwloc).
 *
 * The XML reader (topo_nccl_xml.c) and the attribute values
 * (topo_nccl_attr.c) are their own files; this one builds the node.
 */
#include "topo_internal.h"
#include "topo_nccl.h"
#include "termsafe.h"

#include <ctype.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- the topology -------------------------------------------------------- */

/* Per element: what the semantic pass found. */
typedef struct nx_info {
    int cpu;          /* index of the enclosing <cpu> element, -1 */
    int numa;         /* its numaid */
    uint64_t key;     /* <pci>: bus id key */
    char busid[32];   /* <pci>: canonical bus id */
    unsigned long cls; /* <pci>: class, 0 when absent */
    int has_class, vendor; /* vendor -1 when absent */
    int gpu_child;    /* <pci>: element index of its <gpu>, -1 */
    int nic_child;    /* <pci>: has a <nic> */
    int sm;           /* <gpu>: sm, -1 */
} nx_info;

typedef struct dev_ref {
    int el;           /* the <pci> (or the <net>/<nic> for a NIC without one) */
    int pci;          /* the <pci> element, -1 for a NIC with no PCI position */
    uint64_t key;
    int order;
    const char *name; /* NIC name */
} dev_ref;

static int cmp_dev(const void *a, const void *b)
{
    const dev_ref *x = a, *y = b;
    if (x->pci >= 0 && y->pci < 0)
        return -1;
    if (x->pci < 0 && y->pci >= 0)
        return 1;
    if (x->key != y->key)
        return x->key < y->key ? -1 : 1;
    return x->order - y->order;
}

/* Link class between two PCI positions (element indices; -1 = none): the
 * bridges on the path between them, as nvidia-smi words it. */
static int pci_link(nx_doc *d, const nx_info *inf, int a, int b)
{
    if (a < 0 || b < 0)
        return P3D_LINK_SYS;
    if (inf[a].cpu != inf[b].cpu)
        return P3D_LINK_SYS;
    /* ancestors that are <pci> elements, from the device up */
    int pa[NX_MAX_DEPTH], pb[NX_MAX_DEPTH], na = 0, nb = 0;
    for (int x = d->el[a].parent; x >= 0 && p3d_nccl_xml_is_name(&d->el[x], "pci"); x = d->el[x].parent)
        pa[na++] = x;
    for (int x = d->el[b].parent; x >= 0 && p3d_nccl_xml_is_name(&d->el[x], "pci"); x = d->el[x].parent)
        pb[nb++] = x;
    for (int i = 0; i < na; i++)
        for (int j = 0; j < nb; j++)
            if (pa[i] == pb[j])
                return i + j + 1 == 1 ? P3D_LINK_PIX : P3D_LINK_PXB;
    /* one device below the other (a NIC function under a GPU's bridge) */
    for (int i = 0; i < na; i++)
        if (pa[i] == b)
            return i == 0 ? P3D_LINK_PIX : P3D_LINK_PXB;
    for (int j = 0; j < nb; j++)
        if (pb[j] == a)
            return j == 0 ? P3D_LINK_PIX : P3D_LINK_PXB;
    return P3D_LINK_NODE;
}

/* NVLink GB/s per link per direction for an sm version; *known = 0 when
 * the generation is not one we know. */
static double link_gbps(int sm, int *known)
{
    *known = 1;
    if (sm >= 60 && sm < 70)
        return 20.0;    /* NVLink 1 (P100) */
    if (sm == 86 || sm == 87)
        return 14.0625; /* GA10x NVLink bridge: 56.25 GB/s over 4 links */
    if (sm >= 70 && sm < 100)
        return 25.0;    /* NVLink 2, 3, 4 (V100, A100, H100) */
    if (sm >= 100 && sm < 110)
        return 50.0;    /* NVLink 5 (B200, GB200) */
    *known = 0;
    return 25.0;
}

/* Which elements may hold which: the tree NCCL writes. */
static int check_parent(nx_doc *d, int i, char **err)
{
    static const struct {
        const char *el, *parents;
    } rules[] = {
        {"cpu", "system"}, {"pci", "cpu pci"}, {"gpu", "pci"}, {"nvlink", "gpu"}, {"nic", "pci cpu"}, {"net", "nic"},
    };
    const nx_el *e = &d->el[i];
    for (size_t r = 0; r < sizeof rules / sizeof *rules; r++) {
        if (!p3d_nccl_xml_is_name(e, rules[r].el))
            continue;
        const nx_el *p = e->parent >= 0 ? &d->el[e->parent] : NULL;
        char pn[40] = "";
        if (p)
            snprintf(pn, sizeof pn, " %.*s ", (int)(p->nlen < 32 ? p->nlen : 32), p->name);
        char allowed[40];
        snprintf(allowed, sizeof allowed, " %s ", rules[r].parents);
        if (!p || !strstr(allowed, pn))
            return p3d_err(err, "%s:%d: <%s> inside %s%.*s%s: expected it inside <%s>", d->path, e->line,
                           rules[r].el, p ? "<" : "no element", p ? (int)p->nlen : 0, p ? p->name : "",
                           p ? ">" : "", rules[r].parents);
    }
    return 0;
}

static const nx_info *sort_inf;
static int cmp_pci_el(const void *a, const void *b)
{
    uint64_t x = sort_inf[*(const int *)a].key, y = sort_inf[*(const int *)b].key;
    return x < y ? -1 : x > y ? 1 : *(const int *)a - *(const int *)b;
}

/* One <pci> per bus id: sorted, so a large file stays n log n. */
static int dup_busid(nx_doc *d, const nx_info *inf, char **err)
{
    int np = 0, rc = -1;
    int *idx = malloc((size_t)d->nel * sizeof *idx);
    if (!idx)
        return p3d_err(err, "out of memory");
    for (int i = 0; i < d->nel; i++)
        if (p3d_nccl_xml_is_name(&d->el[i], "pci"))
            idx[np++] = i;
    sort_inf = inf;
    qsort(idx, (size_t)np, sizeof *idx, cmp_pci_el);
    for (int k = 1; k < np; k++)
        if (inf[idx[k]].key == inf[idx[k - 1]].key) {
            p3d_err(err, "%s:%d: <pci busid=\"%s\"> appears twice (first at line %d): expected one element per PCI "
                         "device",
                    d->path, d->el[idx[k]].line, inf[idx[k]].busid, d->el[idx[k - 1]].line);
            goto out;
        }
    rc = 0;
out:
    free(idx);
    return rc;
}

int p3d_topo_looks_nccl(const char *text, size_t len)
{
    nx_doc d = {.path = "", .text = text, .end = text + len};
    const char *p = text;
    char *err = NULL;
    if (len >= 3 && !memcmp(p, "\xef\xbb\xbf", 3))
        p += 3;
    int k = p3d_nccl_xml_skip_misc(&d, &p, &err);
    free(err);
    return k == 0 && d.end - p >= 7 && !memcmp(p, "<system", 7) &&
           (isspace((unsigned char)p[7]) || p[7] == '>' || p[7] == '/');
}

int p3d_topo_parse_nccl(const char *path, const char *text, size_t len, int augment, p3d_node **out,
                        char **err)
{
    int rc = -1, ngpu = 0, nnic = 0, any_nvlink = 0, unknown_sm = -1;
    nx_doc d = {.path = path, .text = text, .end = text + len};
    nx_info *inf = NULL;
    dev_ref *gpu = NULL, *nic = NULL;
    unsigned char *bits = NULL, *all = NULL;
    double *sw = NULL, *direct = NULL;
    p3d_node *n = NULL;
    *out = NULL;
    if (len > NX_MAX_BYTES) {
        p3d_err(err, "%s: %zu bytes: expected an NCCL topology file of at most %zu MiB (real ones are a few KB)",
                path, len, NX_MAX_BYTES >> 20);
        goto out;
    }
    if (memchr(text, 0, len)) {
        p3d_err(err, "%s: binary data (a NUL byte at offset %zu): expected an NCCL topology XML text", path,
                (size_t)((const char *)memchr(text, 0, len) - text));
        goto out;
    }
    if (p3d_nccl_xml_parse(&d, err) < 0)
        goto out;
    const nx_el *root = &d.el[0];
    if (!p3d_nccl_xml_is_name(root, "system")) {
        p3d_err(err, "%s:%d: root element is <%.*s>: expected <system version=\"1\"> (an NCCL topology file)", path,
                root->line, (int)(root->nlen < 40 ? root->nlen : 40), root->name);
        goto out;
    }
    const nx_attr *ver;
    long v;
    if (p3d_nccl_attr_need(&d, root, "version", "version=\"1\" (the format NCCL_TOPO_DUMP_FILE writes)", &ver,
                           err) < 0 ||
        p3d_nccl_attr_dec(&d, root, ver, 1, 1000, "version=\"1\" (the format NCCL_TOPO_DUMP_FILE writes)", &v,
                          err) < 0)
        goto out;
    inf = calloc((size_t)d.nel, sizeof *inf);
    bits = malloc(NX_MAX_CPUS / 8);
    all = calloc(NX_MAX_CPUS / 8, 1);
    if (!inf || !bits || !all) {
        p3d_err(err, "out of memory");
        goto out;
    }
    /* first pass: every element's own facts; parents come first in d.el */
    int nnuma = 0, numas[256];
    for (int i = 0; i < d.nel; i++) {
        const nx_el *e = &d.el[i];
        nx_info *x = &inf[i];
        x->cpu = e->parent >= 0 ? inf[e->parent].cpu : -1;
        x->numa = e->parent >= 0 ? inf[e->parent].numa : -1;
        x->gpu_child = -1;
        x->vendor = -1;
        x->sm = -1;
        if (i > 0 && check_parent(&d, i, err) < 0)
            goto out;
        const nx_attr *a;
        if (p3d_nccl_xml_is_name(e, "cpu")) {
            long id;
            if (p3d_nccl_attr_need(&d, e, "numaid", "numaid=\"N\" (the NUMA node of the CPU)", &a, err) < 0 ||
                p3d_nccl_attr_dec(&d, e, a, 0, 4095, "a NUMA node number 0..4095", &id, err) < 0)
                goto out;
            x->cpu = i;
            x->numa = (int)id;
            int seen = 0;
            for (int k = 0; k < nnuma; k++)
                seen |= numas[k] == (int)id;
            if (!seen && nnuma < (int)(sizeof numas / sizeof *numas))
                numas[nnuma++] = (int)id;
            if ((a = p3d_nccl_xml_get(&d, e, "affinity"))) {
                if (p3d_nccl_attr_mask(a->val, bits) < 0) {
                    p3d_nccl_attr_bad_val(&d, e, a,
                                          "a CPU mask of comma-separated 32-bit hex words (\"0000ffff,0000ffff\"), "
                                          "at most 8192 CPUs",
                                          err);
                    goto out;
                }
                for (int k = 0; k < NX_MAX_CPUS / 8; k++)
                    all[k] |= bits[k];
            }
        } else if (p3d_nccl_xml_is_name(e, "pci")) {
            if (p3d_nccl_attr_need(&d, e, "busid", "busid=\"DDDD:BB:DD.F\"", &a, err) < 0)
                goto out;
            if (p3d_nccl_attr_busid(a->val, &x->key, x->busid) < 0) {
                p3d_nccl_attr_bad_val(&d, e, a, "a PCI bus id DDDD:BB:DD.F (hex)", err);
                goto out;
            }
            unsigned long h = 0;
            if ((a = p3d_nccl_xml_get(&d, e, "class"))) {
                if (p3d_nccl_attr_hex(&d, e, a, "a PCI class such as 0x030200", &h, err) < 0 || h > 0xffffff) {
                    if (h > 0xffffff)
                        p3d_nccl_attr_bad_val(&d, e, a, "a 24-bit PCI class such as 0x030200", err);
                    goto out;
                }
                x->cls = h;
                x->has_class = 1;
            }
            if ((a = p3d_nccl_xml_get(&d, e, "vendor"))) {
                if (p3d_nccl_attr_hex(&d, e, a, "a PCI vendor id such as 0x10de", &h, err) < 0 || h > 0xffff) {
                    if (h > 0xffff)
                        p3d_nccl_attr_bad_val(&d, e, a, "a 16-bit PCI vendor id such as 0x10de", err);
                    goto out;
                }
                x->vendor = (int)h;
            }
        } else if (p3d_nccl_xml_is_name(e, "gpu")) {
            if (inf[e->parent].gpu_child >= 0) {
                p3d_err(err, "%s:%d: a second <gpu> in <pci busid=\"%s\"> (first at line %d)", path, e->line,
                        inf[e->parent].busid, d.el[inf[e->parent].gpu_child].line);
                goto out;
            }
            inf[e->parent].gpu_child = i;
            long sm;
            if ((a = p3d_nccl_xml_get(&d, e, "sm"))) {
                if (p3d_nccl_attr_dec(&d, e, a, 10, 1000, "a compute capability 10..1000 (sm=\"80\" for 8.0)", &sm,
                                      err) < 0)
                    goto out;
                x->sm = (int)sm;
            }
            if ((a = p3d_nccl_xml_get(&d, e, "dev")) &&
                p3d_nccl_attr_dec(&d, e, a, 0, 4095, "a CUDA device number 0..4095", &sm, err) < 0)
                goto out;
        } else if (p3d_nccl_xml_is_name(e, "nic")) {
            if (p3d_nccl_xml_is_name(&d.el[e->parent], "pci"))
                inf[e->parent].nic_child = 1;
        } else if (p3d_nccl_xml_is_name(e, "net")) {
            long sp;
            if (p3d_nccl_attr_need(&d, e, "name", "name=\"mlx5_0\" (the network device)", &a, err) < 0)
                goto out;
            if (!*a->val || strlen(a->val) >= sizeof((p3d_nic *)0)->name || !p3d_term_clean(a->val, strlen(a->val), 0) ||
                strchr(a->val, ' ')) {
                p3d_nccl_attr_bad_val(&d, e, a, "a device name of 1..31 printable characters without spaces", err);
                goto out;
            }
            if ((a = p3d_nccl_xml_get(&d, e, "speed")) &&
                p3d_nccl_attr_dec(&d, e, a, 0, 100000000, "a link speed in Mb/s, 0..100000000", &sp, err) < 0)
                goto out;
        } else if (p3d_nccl_xml_is_name(e, "nvlink")) {
            long cnt;
            uint64_t k;
            char c[32];
            if (p3d_nccl_attr_need(&d, e, "target", "target=\"DDDD:BB:DD.F\" (the PCI bus id at the other end)", &a,
                                   err) < 0)
                goto out;
            if (p3d_nccl_attr_busid(a->val, &k, c) < 0) {
                p3d_nccl_attr_bad_val(&d, e, a, "a PCI bus id DDDD:BB:DD.F (hex)", err);
                goto out;
            }
            if (p3d_nccl_attr_need(&d, e, "count", "count=\"N\" (the number of links)", &a, err) < 0 ||
                p3d_nccl_attr_dec(&d, e, a, 1, NX_MAX_LINKS, "a link count of 1..64", &cnt, err) < 0)
                goto out;
            unsigned long h;
            if ((a = p3d_nccl_xml_get(&d, e, "tclass")) &&
                p3d_nccl_attr_hex(&d, e, a, "a PCI class such as 0x068000 (NVSwitch) or 0x030200 (GPU)", &h, err) < 0)
                goto out;
            any_nvlink = 1;
        }
    }
    /* GPUs and NICs */
    gpu = calloc((size_t)d.nel, sizeof *gpu);
    nic = calloc((size_t)d.nel, sizeof *nic);
    if (!gpu || !nic) {
        p3d_err(err, "out of memory");
        goto out;
    }
    for (int i = 0; i < d.nel; i++) {
        const nx_el *e = &d.el[i];
        const nx_info *x = &inf[i];
        if (p3d_nccl_xml_is_name(e, "pci")) {
            unsigned long sub = x->cls >> 8;
            int is_gpu = x->gpu_child >= 0 ||
                         (x->has_class && (sub == 0x0302 || (sub == 0x0300 && (x->vendor < 0 || x->vendor == 0x10de))));
            int is_nic = !is_gpu && !x->nic_child && x->has_class && (sub == 0x0207 || sub == 0x0200);
            if (is_gpu)
                gpu[ngpu++] = (dev_ref){i, i, x->key, i, NULL};
            if (is_nic)
                nic[nnic++] = (dev_ref){i, i, x->key, i, x->busid};
        } else if (p3d_nccl_xml_is_name(e, "net") || p3d_nccl_xml_is_name(e, "nic")) {
            int nicel = p3d_nccl_xml_is_name(e, "net") ? e->parent : i;
            int pci = d.el[nicel].parent;
            if (!p3d_nccl_xml_is_name(&d.el[pci], "pci"))
                pci = -1;
            if (p3d_nccl_xml_is_name(e, "nic")) {
                /* a <nic> without any <net>: one NIC named by its bus id */
                int has_net = 0;
                for (int k = i + 1; k < d.nel && d.el[k].depth > e->depth; k++)
                    has_net |= p3d_nccl_xml_is_name(&d.el[k], "net") && d.el[k].parent == i;
                if (has_net)
                    continue;
                if (pci < 0) {
                    p3d_err(err, "%s:%d: <nic> without a <net name=...> and outside any <pci>: expected a <net> that "
                                 "names the device",
                            path, e->line);
                    goto out;
                }
                nic[nnic++] = (dev_ref){i, pci, inf[pci].key, i, inf[pci].busid};
            } else {
                nic[nnic++] = (dev_ref){i, pci, pci >= 0 ? inf[pci].key : 0, i, p3d_nccl_xml_get(&d, e, "name")->val};
            }
        }
    }
    if (ngpu > 4096 || nnic > 4096) {
        p3d_err(err, "%s: %d GPUs and %d NICs: expected at most 4096 of each (one machine)", path, ngpu, nnic);
        goto out;
    }
    if (dup_busid(&d, inf, err) < 0)
        goto out;
    qsort(gpu, (size_t)ngpu, sizeof *gpu, cmp_dev);
    qsort(nic, (size_t)nnic, sizeof *nic, cmp_dev);
    for (int j = 1; j < nnic; j++)
        for (int k = 0; k < j; k++)
            if (!strcmp(nic[j].name, nic[k].name)) {
                p3d_err(err, "%s:%d: NIC '%s' appears twice (first at line %d): expected one <net> per device", path,
                        d.el[nic[j].el].line, p3d_tesc(nic[j].name), d.el[nic[k].el].line);
                goto out;
            }
    n = p3d_node_new(NULL, path, "nccl-xml");
    if (!n || p3d_node_alloc(n, ngpu, nnic, err) < 0) {
        if (!n)
            p3d_err(err, "out of memory");
        goto out;
    }
    n->nnuma = nnuma;
    int npus = 0;
    char *allcpus = p3d_nccl_attr_mask_list(all, &npus);
    free(allcpus);
    n->npus = npus;
    for (int a = 0; a < ngpu; a++) {
        p3d_gpu *g = &n->gpus[a];
        const nx_info *x = &inf[gpu[a].pci];
        snprintf(g->pci, sizeof g->pci, "%s", x->busid);
        g->numa = x->numa;
        const nx_attr *aff = x->cpu >= 0 ? p3d_nccl_xml_get(&d, &d.el[x->cpu], "affinity") : NULL;
        int cnt;
        if (aff && p3d_nccl_attr_mask(aff->val, bits) == 0)
            g->cpus = p3d_nccl_attr_mask_list(bits, &cnt);
    }
    for (int j = 0; j < nnic; j++) {
        p3d_nic *c = &n->nics[j];
        snprintf(c->name, sizeof c->name, "%s", nic[j].name);
        if (nic[j].pci >= 0)
            snprintf(c->pci, sizeof c->pci, "%s", inf[nic[j].pci].busid);
        c->numa = inf[nic[j].el].numa;
        unsigned long sub = nic[j].pci >= 0 && inf[nic[j].pci].has_class ? inf[nic[j].pci].cls >> 8 : 0;
        const char *kind = sub == 0x0207 ? "ib" : sub == 0x0200 ? "eth" : "other";
        if (!sub && (!strncmp(c->name, "mlx", 3) || !strncmp(c->name, "ib", 2)))
            kind = "ib";
        else if (!sub && !strncmp(c->name, "efa", 3))
            kind = "efa";
        snprintf(c->kind, sizeof c->kind, "%s", kind);
    }
    for (int a = 0; a < ngpu; a++) {
        for (int b = 0; b < ngpu; b++)
            if (a != b)
                n->gg_class[(size_t)a * ngpu + b] = (unsigned char)pci_link(&d, inf, gpu[a].pci, gpu[b].pci);
        for (int j = 0; j < nnic; j++) {
            int link = nic[j].pci >= 0 ? pci_link(&d, inf, gpu[a].pci, nic[j].pci)
                       : inf[nic[j].el].cpu == inf[gpu[a].pci].cpu ? P3D_LINK_NODE
                                                                   : P3D_LINK_SYS;
            n->gn_class[(size_t)a * nnic + j] = (unsigned char)link;
        }
    }
    /* NVLink: direct GPU pairs and links to the switches */
    sw = calloc(ngpu ? (size_t)ngpu : 1, sizeof *sw);
    direct = calloc(ngpu ? (size_t)ngpu * (size_t)ngpu : 1, sizeof *direct);
    if (!sw || !direct) {
        p3d_err(err, "out of memory");
        goto out;
    }
    double speed = 0;
    for (int a = 0; a < ngpu; a++) {
        int gel = inf[gpu[a].pci].gpu_child, known;
        double s = link_gbps(gel >= 0 ? inf[gel].sm : -1, &known);
        if (!known && unknown_sm < 0)
            unknown_sm = gel >= 0 ? inf[gel].sm : 0;
        if (a == 0 || s < speed)
            speed = s;
        if (gel < 0)
            continue;
        for (int i = gel + 1; i < d.nel && d.el[i].depth > d.el[gel].depth; i++) {
            const nx_el *e = &d.el[i];
            if (!p3d_nccl_xml_is_name(e, "nvlink") || e->parent != gel)
                continue;
            uint64_t key;
            char c[32];
            long cnt = 0;
            unsigned long tc = 0;
            const nx_attr *ta = p3d_nccl_xml_get(&d, e, "tclass");
            p3d_nccl_attr_busid(p3d_nccl_xml_get(&d, e, "target")->val, &key, c);
            p3d_nccl_attr_dec(&d, e, p3d_nccl_xml_get(&d, e, "count"), 1, NX_MAX_LINKS, "", &cnt, err);
            if (ta)
                p3d_nccl_attr_hex(&d, e, ta, "", &tc, err);
            int peer = -1;
            for (int b = 0; b < ngpu; b++)
                if (gpu[b].key == key)
                    peer = b;
            if (peer == a) {
                p3d_err(err, "%s:%d: <nvlink target=\"%s\"> of GPU %s links the GPU to itself: expected another "
                             "GPU or an NVSwitch",
                        path, e->line, c, n->gpus[a].pci);
                goto out;
            }
            if (peer >= 0)
                direct[(size_t)a * ngpu + peer] += (double)cnt;
            else if (ta && tc == 0x068000)
                sw[a] += (double)cnt;
            else if (ta && ((tc >> 8) == 0x0604 || (tc >> 8) == 0x0600 || (tc >> 16) == 0x0b))
                continue; /* NVLink to a CPU (POWER9): not GPU-to-GPU */
            else {
                p3d_err(err, "%s:%d: <nvlink target=\"%s\"%s%s%s>: the target is no GPU of this file: expected a "
                             "GPU's bus id, or tclass=\"0x068000\" for an NVSwitch",
                        path, e->line, c, ta ? " tclass=\"" : "", ta ? p3d_tesc(ta->val) : "", ta ? "\"" : "");
                goto out;
            }
            if (sw[a] > NX_MAX_LINKS || (peer >= 0 && direct[(size_t)a * ngpu + peer] > NX_MAX_LINKS)) {
                p3d_err(err, "%s:%d: GPU %s has more than %d NVLinks to %s: expected a real link count", path,
                        e->line, n->gpus[a].pci, NX_MAX_LINKS, c);
                goto out;
            }
        }
    }
    for (int a = 0; a < ngpu; a++)
        for (int b = 0; b < ngpu; b++) {
            if (a == b)
                continue;
            double links = direct[(size_t)a * ngpu + b] > direct[(size_t)b * ngpu + a] ? direct[(size_t)a * ngpu + b]
                                                                                       : direct[(size_t)b * ngpu + a];
            double via = sw[a] < sw[b] ? sw[a] : sw[b];
            n->nvlink[(size_t)a * ngpu + b] = (links > via ? links : via) * speed;
        }
    if (ngpu > 1 && !any_nvlink) {
        int filled = augment ? p3d_topo_nvml_augment(n) : 0;
        if (filled)
            p3d_node_note(n, "NVLink from live NVML: this NCCL topology file has no <nvlink> elements");
        else
            p3d_node_note(n, "this NCCL topology file has no <nvlink> elements, so its GPUs are shown as PCIe-only; "
                             "NCCL adds NVLink from the driver at run time (cloud VM files such as Azure's ND-series "
                             "carry none although those VMs have NVSwitch): read it on the machine itself for live "
                             "NVML to fill the links in, or use an NCCL_TOPO_DUMP_FILE dump of the machine");
    }
    if (any_nvlink && unknown_sm >= 0)
        p3d_node_note(n, "NVLink counted at %g GB/s per link per direction: %s", speed,
                      unknown_sm ? "GPU generation sm not one par3drun knows" : "the file names no GPU generation (sm)");
    else if (any_nvlink && ngpu)
        p3d_node_note(n, "NVLink from the NCCL topology file: %g GB/s per link per direction (sm %d)", speed,
                      inf[gpu[0].pci].gpu_child >= 0 ? inf[inf[gpu[0].pci].gpu_child].sm : 0);
    if (ngpu == 0)
        p3d_node_note(n, "no GPU in this NCCL topology file: only NUMA facts are shown");
    if (p3d_node_finish(n, err) < 0)
        goto out;
    *out = n;
    n = NULL;
    rc = 0;
out:
    p3d_nccl_xml_free(&d);
    free(inf);
    free(gpu);
    free(nic);
    free(bits);
    free(all);
    free(sw);
    free(direct);
    p3d_node_free(n);
    return rc;
}
