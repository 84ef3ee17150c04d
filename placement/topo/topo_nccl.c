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
    int cpu;               /* index of the enclosing <cpu> element, -1 */
    int numa;              /* its numaid */
    uint64_t key;          /* <pci>: bus id key */
    char busid[32];        /* <pci>: canonical bus id */
    unsigned long cls;     /* <pci>: class, 0 when absent */
    int has_class, vendor; /* vendor -1 when absent */
    int gpu_child;         /* <pci>: element index of its <gpu>, -1 */
    int nic_child;         /* <pci>: has a <nic> */
    int sm;                /* <gpu>: sm, -1 */
} nx_info;

typedef struct dev_ref {
    int el;  /* the <pci> (or the <net>/<nic> for a NIC without one) */
    int pci; /* the <pci> element, -1 for a NIC with no PCI position */
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
        return 20.0; /* NVLink 1 (P100) */
    if (sm == 86 || sm == 87)
        return 14.0625; /* GA10x NVLink bridge: 56.25 GB/s over 4 links */
    if (sm >= 70 && sm < 100)
        return 25.0; /* NVLink 2, 3, 4 (V100, A100, H100) */
    if (sm >= 100 && sm < 110)
        return 50.0; /* NVLink 5 (B200, GB200) */
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
            return p3d_err(err, "%s:%d: <%s> inside %s%.*s%s: expected it inside <%s>", d->path, e->line, rules[r].el,
                           p ? "<" : "no element", p ? (int)p->nlen : 0, p ? p->name : "", p ? ">" : "",
                           rules[r].parents);
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
            p3d_err(err,
                    "%s:%d: <pci busid=\"%s\"> appears twice (first at line %d): expected one element per PCI "
                    "device",
                    d->path, d->el[idx[k]].line, inf[idx[k]].busid, d->el[idx[k - 1]].line);
            goto out;
        }
    rc = 0;
out:
    free(idx);
    return rc;
}

/* Sniffs the root element's name: past a BOM, whitespace, the XML
 * declaration, comments, processing instructions and a DTD. The parse proper is
 * libxml2's (topo_nccl_xml.c). */
int p3d_topo_looks_nccl(const char *text, size_t len)
{
    const char *p = text, *end = text + len;
    if (len >= 3 && !memcmp(p, "\xef\xbb\xbf", 3))
        p += 3;
    for (;;) {
        while (p < end && isspace((unsigned char)*p))
            p++;
        const char *close = NULL;
        if (end - p >= 2 && !memcmp(p, "<?", 2))
            close = memmem(p, (size_t)(end - p), "?>", 2);
        else if (end - p >= 4 && !memcmp(p, "<!--", 4))
            close = memmem(p + 4, (size_t)(end - p - 4), "-->", 3);
        else if (end - p >= 9 && !memcmp(p, "<!DOCTYPE", 9)) {
            /* the parser refuses it with its line; here it only must not hide the root */
            const char *gt = memchr(p, '>', (size_t)(end - p)), *br = memchr(p, '[', (size_t)(end - p));
            close = br && gt && br < gt ? memmem(br, (size_t)(end - br), "]>", 2) : gt;
        } else
            break;
        if (!close)
            return 0;
        p = close + (*close == '?' || *close == ']' ? 2 : *close == '>' ? 1 : 3);
    }
    return end - p >= 7 && !memcmp(p, "<system", 7) &&
           (end - p == 7 || isspace((unsigned char)p[7]) || p[7] == '>' || p[7] == '/');
}

/* Everything one parse holds, so that each pass below is a function of it. */
typedef struct nx_parse {
    nx_doc d;
    nx_info *inf;
    dev_ref *gpu, *nic;
    int ngpu, nnic;
    unsigned char *bits, *all; /* a scratch CPU mask; the union of every <cpu>'s */
    int nnuma, numas[256];
    int any_nvlink, unknown_sm;
    double *sw, *direct; /* NVLinks of each GPU to the switches; to each other GPU */
    double speed;
    p3d_node *n;
} nx_parse;

static int read_cpu(nx_parse *p, int i, char **err)
{
    nx_doc *d = &p->d;
    const nx_el *e = &d->el[i];
    nx_info *x = &p->inf[i];
    const nx_attr *a;
    long id;
    if (p3d_nccl_attr_need(d, e, "numaid", "numaid=\"N\" (the NUMA node of the CPU)", &a, err) < 0 ||
        p3d_nccl_attr_dec(d, e, a, 0, 4095, "a NUMA node number 0..4095", &id, err) < 0)
        return -1;
    x->cpu = i;
    x->numa = (int)id;
    int seen = 0;
    for (int k = 0; k < p->nnuma; k++)
        seen |= p->numas[k] == (int)id;
    if (!seen && p->nnuma < (int)(sizeof p->numas / sizeof *p->numas))
        p->numas[p->nnuma++] = (int)id;
    if ((a = p3d_nccl_xml_get(d, e, "affinity"))) {
        if (p3d_nccl_attr_mask(a->val, p->bits) < 0) {
            p3d_nccl_attr_bad_val(d, e, a,
                                  "a CPU mask of comma-separated 32-bit hex words (\"0000ffff,0000ffff\"), "
                                  "at most 8192 CPUs",
                                  err);
            return -1;
        }
        for (int k = 0; k < NX_MAX_CPUS / 8; k++)
            p->all[k] |= p->bits[k];
    }
    return 0;
}

/* An optional hex attribute of at most max: 1 with *h when present, 0 when
 * absent. too_big: what the message expects when the value passes max. */
static int hex_attr(nx_doc *d, const nx_el *e, const char *name, const char *expect, const char *too_big,
                    unsigned long max, unsigned long *h, char **err)
{
    const nx_attr *a = p3d_nccl_xml_get(d, e, name);
    if (!a)
        return 0;
    if (p3d_nccl_attr_hex(d, e, a, expect, h, err) < 0 || *h > max) {
        if (*h > max)
            p3d_nccl_attr_bad_val(d, e, a, too_big, err);
        return -1;
    }
    return 1;
}

static int read_pci(nx_parse *p, int i, char **err)
{
    nx_doc *d = &p->d;
    const nx_el *e = &d->el[i];
    nx_info *x = &p->inf[i];
    const nx_attr *a;
    if (p3d_nccl_attr_need(d, e, "busid", "busid=\"DDDD:BB:DD.F\"", &a, err) < 0)
        return -1;
    if (p3d_nccl_attr_busid(a->val, &x->key, x->busid) < 0) {
        p3d_nccl_attr_bad_val(d, e, a, "a PCI bus id DDDD:BB:DD.F (hex)", err);
        return -1;
    }
    unsigned long h = 0;
    int got = hex_attr(d, e, "class", "a PCI class such as 0x030200", "a 24-bit PCI class such as 0x030200", 0xffffff,
                       &h, err);
    if (got < 0)
        return -1;
    if (got) {
        x->cls = h;
        x->has_class = 1;
    }
    got = hex_attr(d, e, "vendor", "a PCI vendor id such as 0x10de", "a 16-bit PCI vendor id such as 0x10de", 0xffff,
                   &h, err);
    if (got < 0)
        return -1;
    if (got)
        x->vendor = (int)h;
    return 0;
}

static int read_gpu(nx_parse *p, int i, char **err)
{
    nx_doc *d = &p->d;
    const nx_el *e = &d->el[i];
    nx_info *up = &p->inf[e->parent];
    const nx_attr *a;
    if (up->gpu_child >= 0) {
        p3d_err(err, "%s:%d: a second <gpu> in <pci busid=\"%s\"> (first at line %d)", d->path, e->line, up->busid,
                d->el[up->gpu_child].line);
        return -1;
    }
    up->gpu_child = i;
    long sm;
    if ((a = p3d_nccl_xml_get(d, e, "sm"))) {
        if (p3d_nccl_attr_dec(d, e, a, 10, 1000, "a compute capability 10..1000 (sm=\"80\" for 8.0)", &sm, err) < 0)
            return -1;
        p->inf[i].sm = (int)sm;
    }
    if ((a = p3d_nccl_xml_get(d, e, "dev")) &&
        p3d_nccl_attr_dec(d, e, a, 0, 4095, "a CUDA device number 0..4095", &sm, err) < 0)
        return -1;
    return 0;
}

static int read_net(nx_parse *p, int i, char **err)
{
    nx_doc *d = &p->d;
    const nx_el *e = &d->el[i];
    const nx_attr *a;
    long sp;
    if (p3d_nccl_attr_need(d, e, "name", "name=\"mlx5_0\" (the network device)", &a, err) < 0)
        return -1;
    if (!*a->val || strlen(a->val) >= sizeof((p3d_nic *)0)->name || !p3d_term_clean(a->val, strlen(a->val), 0) ||
        strchr(a->val, ' ')) {
        p3d_nccl_attr_bad_val(d, e, a, "a device name of 1..31 printable characters without spaces", err);
        return -1;
    }
    if ((a = p3d_nccl_xml_get(d, e, "speed")) &&
        p3d_nccl_attr_dec(d, e, a, 0, 100000000, "a link speed in Mb/s, 0..100000000", &sp, err) < 0)
        return -1;
    return 0;
}

static int read_nvlink(nx_parse *p, int i, char **err)
{
    nx_doc *d = &p->d;
    const nx_el *e = &d->el[i];
    const nx_attr *a;
    long cnt;
    uint64_t k;
    char c[32];
    if (p3d_nccl_attr_need(d, e, "target", "target=\"DDDD:BB:DD.F\" (the PCI bus id at the other end)", &a, err) < 0)
        return -1;
    if (p3d_nccl_attr_busid(a->val, &k, c) < 0) {
        p3d_nccl_attr_bad_val(d, e, a, "a PCI bus id DDDD:BB:DD.F (hex)", err);
        return -1;
    }
    if (p3d_nccl_attr_need(d, e, "count", "count=\"N\" (the number of links)", &a, err) < 0 ||
        p3d_nccl_attr_dec(d, e, a, 1, NX_MAX_LINKS, "a link count of 1..64", &cnt, err) < 0)
        return -1;
    unsigned long h;
    if ((a = p3d_nccl_xml_get(d, e, "tclass")) &&
        p3d_nccl_attr_hex(d, e, a, "a PCI class such as 0x068000 (NVSwitch) or 0x030200 (GPU)", &h, err) < 0)
        return -1;
    p->any_nvlink = 1;
    return 0;
}

/* First pass: every element's own facts, checked; parents come first in
 * d.el, so an element inherits its <cpu> and NUMA node from the one above. */
static int read_elements(nx_parse *p, char **err)
{
    nx_doc *d = &p->d;
    for (int i = 0; i < d->nel; i++) {
        const nx_el *e = &d->el[i];
        nx_info *x = &p->inf[i];
        x->cpu = e->parent >= 0 ? p->inf[e->parent].cpu : -1;
        x->numa = e->parent >= 0 ? p->inf[e->parent].numa : -1;
        x->gpu_child = -1;
        x->vendor = -1;
        x->sm = -1;
        if (i > 0 && check_parent(d, i, err) < 0)
            return -1;
        int rc = 0;
        if (p3d_nccl_xml_is_name(e, "cpu"))
            rc = read_cpu(p, i, err);
        else if (p3d_nccl_xml_is_name(e, "pci"))
            rc = read_pci(p, i, err);
        else if (p3d_nccl_xml_is_name(e, "gpu"))
            rc = read_gpu(p, i, err);
        else if (p3d_nccl_xml_is_name(e, "nic")) {
            if (p3d_nccl_xml_is_name(&d->el[e->parent], "pci"))
                p->inf[e->parent].nic_child = 1;
        } else if (p3d_nccl_xml_is_name(e, "net"))
            rc = read_net(p, i, err);
        else if (p3d_nccl_xml_is_name(e, "nvlink"))
            rc = read_nvlink(p, i, err);
        if (rc < 0)
            return -1;
    }
    return 0;
}

/* A <nic> or <net> element as a NIC: one per <net>, or the <nic> itself
 * (named by its <pci>'s bus id) when it holds no <net>. */
static int collect_nic(nx_parse *p, int i, char **err)
{
    nx_doc *d = &p->d;
    const nx_el *e = &d->el[i];
    int nicel = p3d_nccl_xml_is_name(e, "net") ? e->parent : i;
    int pci = d->el[nicel].parent;
    if (!p3d_nccl_xml_is_name(&d->el[pci], "pci"))
        pci = -1;
    if (!p3d_nccl_xml_is_name(e, "nic")) {
        p->nic[p->nnic++] = (dev_ref){i, pci, pci >= 0 ? p->inf[pci].key : 0, i, p3d_nccl_xml_get(d, e, "name")->val};
        return 0;
    }
    int has_net = 0;
    for (int k = i + 1; k < d->nel && d->el[k].depth > e->depth; k++)
        has_net |= p3d_nccl_xml_is_name(&d->el[k], "net") && d->el[k].parent == i;
    if (has_net)
        return 0;
    if (pci < 0) {
        p3d_err(err,
                "%s:%d: <nic> without a <net name=...> and outside any <pci>: expected a <net> that "
                "names the device",
                d->path, e->line);
        return -1;
    }
    p->nic[p->nnic++] = (dev_ref){i, pci, p->inf[pci].key, i, p->inf[pci].busid};
    return 0;
}

/* Second pass: which elements are GPUs and NICs, in PCI bus order. */
static int collect_devices(nx_parse *p, char **err)
{
    nx_doc *d = &p->d;
    p->gpu = calloc((size_t)d->nel, sizeof *p->gpu);
    p->nic = calloc((size_t)d->nel, sizeof *p->nic);
    if (!p->gpu || !p->nic) {
        p3d_err(err, "out of memory");
        return -1;
    }
    for (int i = 0; i < d->nel; i++) {
        const nx_el *e = &d->el[i];
        const nx_info *x = &p->inf[i];
        if (p3d_nccl_xml_is_name(e, "pci")) {
            unsigned long sub = x->cls >> 8;
            int is_gpu = x->gpu_child >= 0 ||
                         (x->has_class && (sub == 0x0302 || (sub == 0x0300 && (x->vendor < 0 || x->vendor == 0x10de))));
            int is_nic = !is_gpu && !x->nic_child && x->has_class && (sub == 0x0207 || sub == 0x0200);
            if (is_gpu)
                p->gpu[p->ngpu++] = (dev_ref){i, i, x->key, i, NULL};
            if (is_nic)
                p->nic[p->nnic++] = (dev_ref){i, i, x->key, i, x->busid};
        } else if (p3d_nccl_xml_is_name(e, "net") || p3d_nccl_xml_is_name(e, "nic")) {
            if (collect_nic(p, i, err) < 0)
                return -1;
        }
    }
    if (p->ngpu > 4096 || p->nnic > 4096) {
        p3d_err(err, "%s: %d GPUs and %d NICs: expected at most 4096 of each (one machine)", d->path, p->ngpu, p->nnic);
        return -1;
    }
    if (dup_busid(d, p->inf, err) < 0)
        return -1;
    qsort(p->gpu, (size_t)p->ngpu, sizeof *p->gpu, cmp_dev);
    qsort(p->nic, (size_t)p->nnic, sizeof *p->nic, cmp_dev);
    for (int j = 1; j < p->nnic; j++)
        for (int k = 0; k < j; k++)
            if (!strcmp(p->nic[j].name, p->nic[k].name)) {
                p3d_err(err, "%s:%d: NIC '%s' appears twice (first at line %d): expected one <net> per device", d->path,
                        d->el[p->nic[j].el].line, p3d_tesc(p->nic[j].name), d->el[p->nic[k].el].line);
                return -1;
            }
    return 0;
}

static void fill_nic(nx_parse *p, int j)
{
    p3d_nic *c = &p->n->nics[j];
    const dev_ref *r = &p->nic[j];
    snprintf(c->name, sizeof c->name, "%s", r->name);
    if (r->pci >= 0)
        snprintf(c->pci, sizeof c->pci, "%s", p->inf[r->pci].busid);
    c->numa = p->inf[r->el].numa;
    unsigned long sub = r->pci >= 0 && p->inf[r->pci].has_class ? p->inf[r->pci].cls >> 8 : 0;
    const char *kind = sub == 0x0207 ? "ib" : sub == 0x0200 ? "eth" : "other";
    if (!sub && (!strncmp(c->name, "mlx", 3) || !strncmp(c->name, "ib", 2)))
        kind = "ib";
    else if (!sub && !strncmp(c->name, "efa", 3))
        kind = "efa";
    snprintf(c->kind, sizeof c->kind, "%s", kind);
}

/* The node's GPUs and NICs, and the PCI classes between them. */
static int fill_node(nx_parse *p, char **err)
{
    nx_doc *d = &p->d;
    int ngpu = p->ngpu, nnic = p->nnic;
    p3d_node *n = p->n = p3d_node_new(NULL, d->path, "nccl-xml");
    if (!n || p3d_node_alloc(n, ngpu, nnic, err) < 0) {
        if (!n)
            p3d_err(err, "out of memory");
        return -1;
    }
    n->nnuma = p->nnuma;
    int npus = 0;
    char *allcpus = p3d_nccl_attr_mask_list(p->all, &npus);
    free(allcpus);
    n->npus = npus;
    for (int a = 0; a < ngpu; a++) {
        p3d_gpu *g = &n->gpus[a];
        const nx_info *x = &p->inf[p->gpu[a].pci];
        snprintf(g->pci, sizeof g->pci, "%s", x->busid);
        g->numa = x->numa;
        const nx_attr *aff = x->cpu >= 0 ? p3d_nccl_xml_get(d, &d->el[x->cpu], "affinity") : NULL;
        int cnt;
        if (aff && p3d_nccl_attr_mask(aff->val, p->bits) == 0)
            g->cpus = p3d_nccl_attr_mask_list(p->bits, &cnt);
    }
    for (int j = 0; j < nnic; j++)
        fill_nic(p, j);
    for (int a = 0; a < ngpu; a++) {
        for (int b = 0; b < ngpu; b++)
            if (a != b)
                n->gg_class[(size_t)a * ngpu + b] = (unsigned char)pci_link(d, p->inf, p->gpu[a].pci, p->gpu[b].pci);
        for (int j = 0; j < nnic; j++) {
            const dev_ref *r = &p->nic[j];
            int link = r->pci >= 0                                      ? pci_link(d, p->inf, p->gpu[a].pci, r->pci)
                       : p->inf[r->el].cpu == p->inf[p->gpu[a].pci].cpu ? P3D_LINK_NODE
                                                                        : P3D_LINK_SYS;
            n->gn_class[(size_t)a * nnic + j] = (unsigned char)link;
        }
    }
    return 0;
}

/* One <nvlink> of GPU a: counted to a peer GPU or to the switches (or
 * passed over when it goes to a CPU). Its attributes were checked in the
 * first pass. */
static int count_nvlink(nx_parse *p, int a, const nx_el *e, char **err)
{
    nx_doc *d = &p->d;
    int ngpu = p->ngpu;
    uint64_t key;
    char c[32];
    long cnt = 0;
    unsigned long tc = 0;
    const nx_attr *ta = p3d_nccl_xml_get(d, e, "tclass");
    p3d_nccl_attr_busid(p3d_nccl_xml_get(d, e, "target")->val, &key, c);
    p3d_nccl_attr_dec(d, e, p3d_nccl_xml_get(d, e, "count"), 1, NX_MAX_LINKS, "", &cnt, err);
    if (ta)
        p3d_nccl_attr_hex(d, e, ta, "", &tc, err);
    int peer = -1;
    for (int b = 0; b < ngpu; b++)
        if (p->gpu[b].key == key)
            peer = b;
    if (peer == a) {
        p3d_err(err,
                "%s:%d: <nvlink target=\"%s\"> of GPU %s links the GPU to itself: expected another "
                "GPU or an NVSwitch",
                d->path, e->line, c, p->n->gpus[a].pci);
        return -1;
    }
    if (peer >= 0)
        p->direct[(size_t)a * ngpu + peer] += (double)cnt;
    else if (ta && tc == 0x068000)
        p->sw[a] += (double)cnt;
    else if (ta && ((tc >> 8) == 0x0604 || (tc >> 8) == 0x0600 || (tc >> 16) == 0x0b))
        return 0; /* NVLink to a CPU (POWER9): not GPU-to-GPU */
    else {
        p3d_err(err,
                "%s:%d: <nvlink target=\"%s\"%s%s%s>: the target is no GPU of this file: expected a "
                "GPU's bus id, or tclass=\"0x068000\" for an NVSwitch",
                d->path, e->line, c, ta ? " tclass=\"" : "", ta ? p3d_tesc(ta->val) : "", ta ? "\"" : "");
        return -1;
    }
    if (p->sw[a] > NX_MAX_LINKS || (peer >= 0 && p->direct[(size_t)a * ngpu + peer] > NX_MAX_LINKS)) {
        p3d_err(err, "%s:%d: GPU %s has more than %d NVLinks to %s: expected a real link count", d->path, e->line,
                p->n->gpus[a].pci, NX_MAX_LINKS, c);
        return -1;
    }
    return 0;
}

/* NVLink: direct GPU pairs and links to the switches, then the bandwidth
 * of each pair at the slowest GPU generation's speed per link. */
static int fill_nvlink(nx_parse *p, char **err)
{
    nx_doc *d = &p->d;
    int ngpu = p->ngpu;
    p->sw = calloc(ngpu ? (size_t)ngpu : 1, sizeof *p->sw);
    p->direct = calloc(ngpu ? (size_t)ngpu * (size_t)ngpu : 1, sizeof *p->direct);
    if (!p->sw || !p->direct) {
        p3d_err(err, "out of memory");
        return -1;
    }
    for (int a = 0; a < ngpu; a++) {
        int gel = p->inf[p->gpu[a].pci].gpu_child, known;
        double s = link_gbps(gel >= 0 ? p->inf[gel].sm : -1, &known);
        if (!known && p->unknown_sm < 0)
            p->unknown_sm = gel >= 0 ? p->inf[gel].sm : 0;
        if (a == 0 || s < p->speed)
            p->speed = s;
        if (gel < 0)
            continue;
        for (int i = gel + 1; i < d->nel && d->el[i].depth > d->el[gel].depth; i++) {
            const nx_el *e = &d->el[i];
            if (!p3d_nccl_xml_is_name(e, "nvlink") || e->parent != gel)
                continue;
            if (count_nvlink(p, a, e, err) < 0)
                return -1;
        }
    }
    for (int a = 0; a < ngpu; a++)
        for (int b = 0; b < ngpu; b++) {
            if (a == b)
                continue;
            double ab = p->direct[(size_t)a * ngpu + b], ba = p->direct[(size_t)b * ngpu + a];
            double links = ab > ba ? ab : ba;
            double via = p->sw[a] < p->sw[b] ? p->sw[a] : p->sw[b];
            p->n->nvlink[(size_t)a * ngpu + b] = (links > via ? links : via) * p->speed;
        }
    return 0;
}

/* What the reader should know about where the NVLink figures came from. */
static void note_nvlink(nx_parse *p, int augment)
{
    p3d_node *n = p->n;
    if (p->ngpu > 1 && !p->any_nvlink) {
        int filled = augment ? p3d_topo_nvml_augment(n) : 0;
        if (filled)
            p3d_node_note(n, "NVLink from live NVML: this NCCL topology file has no <nvlink> elements");
        else
            p3d_node_note(n, "this NCCL topology file has no <nvlink> elements, so its GPUs are shown as PCIe-only; "
                             "NCCL adds NVLink from the driver at run time (cloud VM files such as Azure's ND-series "
                             "carry none although those VMs have NVSwitch): read it on the machine itself for live "
                             "NVML to fill the links in, or use an NCCL_TOPO_DUMP_FILE dump of the machine");
    }
    if (p->any_nvlink && p->unknown_sm >= 0)
        p3d_node_note(n, "NVLink counted at %g GB/s per link per direction: %s", p->speed,
                      p->unknown_sm ? "GPU generation sm not one par3drun knows"
                                    : "the file names no GPU generation (sm)");
    else if (p->any_nvlink && p->ngpu)
        p3d_node_note(n, "NVLink from the NCCL topology file: %g GB/s per link per direction (sm %d)", p->speed,
                      p->inf[p->gpu[0].pci].gpu_child >= 0 ? p->inf[p->inf[p->gpu[0].pci].gpu_child].sm : 0);
    if (p->ngpu == 0)
        p3d_node_note(n, "no GPU in this NCCL topology file: only NUMA facts are shown");
}

/* The text as an XML document whose root is <system version="1">. */
static int read_doc(nx_parse *p, size_t len, char **err)
{
    nx_doc *d = &p->d;
    const char *path = d->path;
    if (len > NX_MAX_BYTES) {
        p3d_err(err, "%s: %zu bytes: expected an NCCL topology file of at most %zu MiB (real ones are a few KB)", path,
                len, NX_MAX_BYTES >> 20);
        return -1;
    }
    if (p3d_nccl_xml_parse(d, err) < 0)
        return -1;
    const nx_el *root = &d->el[0];
    if (!p3d_nccl_xml_is_name(root, "system")) {
        p3d_err(err, "%s:%d: root element is <%.*s>: expected <system version=\"1\"> (an NCCL topology file)", path,
                root->line, (int)(root->nlen < 40 ? root->nlen : 40), root->name);
        return -1;
    }
    const nx_attr *ver;
    long v;
    if (p3d_nccl_attr_need(d, root, "version", "version=\"1\" (the format NCCL_TOPO_DUMP_FILE writes)", &ver, err) <
            0 ||
        p3d_nccl_attr_dec(d, root, ver, 1, 1000, "version=\"1\" (the format NCCL_TOPO_DUMP_FILE writes)", &v, err) < 0)
        return -1;
    return 0;
}

int p3d_topo_parse_nccl(const char *path, const char *text, size_t len, int augment, p3d_node **out, char **err)
{
    int rc = -1;
    nx_parse p = {.d = {.path = path, .text = text, .end = text + len}, .unknown_sm = -1};
    *out = NULL;
    if (read_doc(&p, len, err) < 0)
        goto out;
    p.inf = calloc((size_t)p.d.nel, sizeof *p.inf);
    p.bits = malloc(NX_MAX_CPUS / 8);
    p.all = calloc(NX_MAX_CPUS / 8, 1);
    if (!p.inf || !p.bits || !p.all) {
        p3d_err(err, "out of memory");
        goto out;
    }
    if (read_elements(&p, err) < 0 || collect_devices(&p, err) < 0 || fill_node(&p, err) < 0 ||
        fill_nvlink(&p, err) < 0)
        goto out;
    note_nvlink(&p, augment);
    if (p3d_node_finish(p.n, err) < 0)
        goto out;
    *out = p.n;
    p.n = NULL;
    rc = 0;
out:
    p3d_nccl_xml_free(&p.d);
    free(p.inf);
    free(p.gpu);
    free(p.nic);
    free(p.bits);
    free(p.all);
    free(p.sw);
    free(p.direct);
    p3d_node_free(p.n);
    return rc;
}
