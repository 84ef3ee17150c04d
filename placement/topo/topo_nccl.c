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
 * The XML reader is our own and strict (hwloc's parser is for hwloc's
 * format; no other XML library is linked): elements, attributes in single
 * or double quotes with the five predefined entities, comments and a
 * prolog; no text content, DTD or CDATA. Limits keep a hostile file small:
 * see NX_MAX_*. Every refusal names file:line and what was expected.
 */
#include "topo_internal.h"
#include "termsafe.h"

#include <ctype.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Real files are a few KB (an 8-GPU dump with NVSwitch links: 11 KB). */
#define NX_MAX_BYTES ((size_t)4 << 20)
#define NX_MAX_DEPTH 32
#define NX_MAX_ELEMENTS 65536
#define NX_MAX_ATTRS 32
#define NX_MAX_VALUE 1024
#define NX_MAX_CPUS 8192
#define NX_MAX_LINKS 64 /* NVLinks of one GPU to one target (H100: 18 in all) */

/* ---- the XML reader ------------------------------------------------------ */

typedef struct nx_attr {
    const char *name;
    size_t nlen;
    char *val; /* decoded, NUL-terminated, malloc'd */
    int line;
} nx_attr;

typedef struct nx_el {
    const char *name;
    size_t nlen;
    int line, parent, depth;
    int attr0, nattr;
} nx_el;

typedef struct nx_doc {
    const char *path, *text, *end;
    const char *lpos; /* line cache: lpos is on line lline */
    int lline;
    nx_el *el;
    int nel, capel;
    nx_attr *at;
    int nat, capat;
} nx_doc;

static void nx_free(nx_doc *d)
{
    for (int i = 0; i < d->nat; i++)
        free(d->at[i].val);
    free(d->at);
    free(d->el);
    memset(d, 0, sizeof *d);
}

/* Line of p; positions are asked for in increasing order while parsing,
 * so counting on from the last one keeps this linear. */
static int nx_line(nx_doc *d, const char *p)
{
    if (!d->lpos || p < d->lpos) {
        d->lpos = d->text;
        d->lline = 1;
    }
    for (; d->lpos < p && d->lpos < d->end; d->lpos++)
        d->lline += *d->lpos == '\n';
    return d->lline;
}

static int name_char(int c)
{
    return isalnum(c) || c == '_' || c == '-' || c == ':' || c == '.';
}

/* Decodes the value [v, ve) (quotes excluded) into a fresh string. */
static int nx_value(nx_doc *d, const char *v, const char *ve, char **out, char **err)
{
    size_t n = (size_t)(ve - v);
    if (n > NX_MAX_VALUE)
        return p3d_err(err, "%s:%d: an attribute value of %zu bytes: expected at most %d", d->path, nx_line(d, v), n,
                       NX_MAX_VALUE);
    char *s = malloc(n + 1), *o = s;
    if (!s)
        return p3d_err(err, "out of memory");
    static const struct {
        const char *ent;
        char c;
    } ents[] = {{"&amp;", '&'}, {"&lt;", '<'}, {"&gt;", '>'}, {"&quot;", '"'}, {"&apos;", '\''}};
    for (const char *p = v; p < ve;) {
        if (*p == '<') {
            free(s);
            return p3d_err(err, "%s:%d: '<' inside an attribute value: expected &lt; (not well-formed XML)", d->path,
                           nx_line(d, p));
        }
        if (*p != '&') {
            *o++ = *p++;
            continue;
        }
        size_t k = 0;
        for (; k < sizeof ents / sizeof *ents; k++)
            if ((size_t)(ve - p) >= strlen(ents[k].ent) && !memcmp(p, ents[k].ent, strlen(ents[k].ent)))
                break;
        if (k == sizeof ents / sizeof *ents) {
            free(s);
            return p3d_err(err, "%s:%d: '&' in an attribute value: expected one of &amp; &lt; &gt; &quot; &apos;",
                           d->path, nx_line(d, p));
        }
        *o++ = ents[k].c;
        p += strlen(ents[k].ent);
    }
    *o = 0;
    *out = s;
    return 0;
}

static int nx_push_el(nx_doc *d, const char *name, size_t nlen, int line, int parent, int depth, char **err)
{
    if (d->nel >= NX_MAX_ELEMENTS)
        return p3d_err(err, "%s:%d: more than %d elements: expected an NCCL topology of one machine", d->path, line,
                       NX_MAX_ELEMENTS);
    if (d->nel == d->capel) {
        int cap = d->capel ? d->capel * 2 : 64;
        nx_el *e = realloc(d->el, (size_t)cap * sizeof *e);
        if (!e)
            return p3d_err(err, "out of memory");
        d->el = e;
        d->capel = cap;
    }
    d->el[d->nel++] = (nx_el){name, nlen, line, parent, depth, d->nat, 0};
    return 0;
}

static int nx_push_attr(nx_doc *d, const char *name, size_t nlen, char *val, int line, char **err)
{
    if (d->nat == d->capat) {
        int cap = d->capat ? d->capat * 2 : 256;
        nx_attr *a = realloc(d->at, (size_t)cap * sizeof *a);
        if (!a) {
            free(val);
            return p3d_err(err, "out of memory");
        }
        d->at = a;
        d->capat = cap;
    }
    d->at[d->nat++] = (nx_attr){name, nlen, val, line};
    d->el[d->nel - 1].nattr++;
    return 0;
}

static int is_name(const nx_el *e, const char *s)
{
    return e->nlen == strlen(s) && !memcmp(e->name, s, e->nlen);
}

/* Skips whitespace, comments and processing instructions; 0, or -1 with
 * *err on an unterminated one or a DTD/CDATA. */
static int nx_skip_misc(nx_doc *d, const char **pp, char **err)
{
    const char *p = *pp;
    for (;;) {
        while (p < d->end && isspace((unsigned char)*p))
            p++;
        if (p + 1 < d->end && p[0] == '<' && p[1] == '?') {
            const char *e = memmem(p, (size_t)(d->end - p), "?>", 2);
            if (!e)
                return p3d_err(err, "%s:%d: '<?' never closed (truncated file?)", d->path, nx_line(d, p));
            p = e + 2;
            continue;
        }
        if (p + 3 < d->end && !memcmp(p, "<!--", 4)) {
            const char *e = memmem(p + 4, (size_t)(d->end - p - 4), "-->", 3);
            if (!e)
                return p3d_err(err, "%s:%d: comment never closed (truncated file?)", d->path, nx_line(d, p));
            p = e + 3;
            continue;
        }
        if (p + 1 < d->end && p[0] == '<' && p[1] == '!')
            return p3d_err(err, "%s:%d: '<!' (a DTD or CDATA section): not expected in an NCCL topology file",
                           d->path, nx_line(d, p));
        break;
    }
    *pp = p;
    return 0;
}

/* Reads the whole document into d->el / d->at (a tree by parent index). */
static int nx_parse(nx_doc *d, char **err)
{
    const char *p = d->text;
    int stack[NX_MAX_DEPTH + 1], depth = 0, done = 0;
    if (p + 3 <= d->end && !memcmp(p, "\xef\xbb\xbf", 3))
        p += 3;
    for (;;) {
        if (nx_skip_misc(d, &p, err) < 0)
            return -1;
        if (p >= d->end)
            break;
        if (*p != '<') {
            char snip[24];
            size_t k = 0;
            while (k < 20 && p + k < d->end && p[k] != '<' && p[k] != '\n')
                k++;
            snprintf(snip, sizeof snip, "%.*s", (int)k, p);
            if (done)
                return p3d_err(err, "%s:%d: content after </system>: expected the end of the file", d->path,
                               nx_line(d, p));
            return p3d_err(err, "%s:%d: text '%s' between elements: an NCCL topology file has elements and "
                                "attributes only",
                           d->path, nx_line(d, p), p3d_tesc(snip));
        }
        if (done)
            return p3d_err(err, "%s:%d: content after </system>: expected the end of the file", d->path,
                           nx_line(d, p));
        const char *lt = p++;
        int closing = p < d->end && *p == '/';
        if (closing)
            p++;
        const char *name = p;
        while (p < d->end && name_char((unsigned char)*p))
            p++;
        size_t nlen = (size_t)(p - name);
        int line = nx_line(d, lt);
        if (!nlen)
            return p3d_err(err, "%s:%d: '<' not followed by an element name: not well-formed XML", d->path, line);
        if (closing) {
            while (p < d->end && isspace((unsigned char)*p))
                p++;
            if (p >= d->end)
                return p3d_err(err, "%s:%d: </%.*s never closed (truncated file?)", d->path, line, (int)nlen, name);
            if (*p != '>')
                return p3d_err(err, "%s:%d: </%.*s: expected '>'", d->path, line, (int)nlen, name);
            p++;
            const nx_el *open = depth ? &d->el[stack[depth - 1]] : NULL;
            if (!open || open->nlen != nlen || memcmp(open->name, name, nlen))
                return p3d_err(err, "%s:%d: </%.*s> does not close %s%.*s%s", d->path, line, (int)nlen, name,
                               open ? "<" : "any open element", open ? (int)open->nlen : 0, open ? open->name : "",
                               open ? ">" : "");
            if (--depth == 0)
                done = 1;
            continue;
        }
        if (depth >= NX_MAX_DEPTH)
            return p3d_err(err, "%s:%d: elements nested deeper than %d: expected an NCCL topology (a few levels of "
                                "PCI bridges)",
                           d->path, line, NX_MAX_DEPTH);
        if (nx_push_el(d, name, nlen, line, depth ? stack[depth - 1] : -1, depth, err) < 0)
            return -1;
        int self = 0;
        for (;;) {
            const char *ws = p;
            while (p < d->end && isspace((unsigned char)*p))
                p++;
            if (p >= d->end)
                return p3d_err(err, "%s:%d: <%.*s never closed (truncated file?)", d->path, line, (int)nlen, name);
            if (*p == '>') {
                p++;
                break;
            }
            if (*p == '/') {
                if (p + 1 >= d->end)
                    return p3d_err(err, "%s:%d: <%.*s never closed (truncated file?)", d->path, line, (int)nlen,
                                   name);
                if (p[1] != '>')
                    return p3d_err(err, "%s:%d: <%.*s: '/' not followed by '>'", d->path, nx_line(d, p), (int)nlen,
                                   name);
                p += 2;
                self = 1;
                break;
            }
            const char *an = p;
            while (p < d->end && name_char((unsigned char)*p))
                p++;
            size_t anlen = (size_t)(p - an);
            int aline = nx_line(d, an);
            if (!anlen || ws == an)
                return p3d_err(err, "%s:%d: malformed attribute in <%.*s>: expected name=\"value\"", d->path, aline,
                               (int)nlen, name);
            while (p < d->end && isspace((unsigned char)*p))
                p++;
            if (p >= d->end)
                return p3d_err(err, "%s:%d: <%.*s never closed (truncated file?)", d->path, line, (int)nlen, name);
            if (*p != '=')
                return p3d_err(err, "%s:%d: attribute '%.*s' of <%.*s>: expected name=\"value\"", d->path, aline,
                               (int)anlen, an, (int)nlen, name);
            p++;
            while (p < d->end && isspace((unsigned char)*p))
                p++;
            if (p >= d->end)
                return p3d_err(err, "%s:%d: <%.*s never closed (truncated file?)", d->path, line, (int)nlen, name);
            if (*p != '"' && *p != '\'')
                return p3d_err(err, "%s:%d: attribute '%.*s' of <%.*s>: expected a quoted value", d->path, aline,
                               (int)anlen, an, (int)nlen, name);
            char q = *p++;
            const char *ve = memchr(p, q, (size_t)(d->end - p));
            if (!ve)
                return p3d_err(err, "%s:%d: attribute '%.*s' has no closing quote (truncated file?)", d->path, aline,
                               (int)anlen, an);
            const nx_el *e = &d->el[d->nel - 1];
            if (e->nattr >= NX_MAX_ATTRS)
                return p3d_err(err, "%s:%d: <%.*s> has more than %d attributes", d->path, aline, (int)nlen, name,
                               NX_MAX_ATTRS);
            for (int i = e->attr0; i < e->attr0 + e->nattr; i++)
                if (d->at[i].nlen == anlen && !memcmp(d->at[i].name, an, anlen))
                    return p3d_err(err, "%s:%d: attribute '%.*s' given twice in <%.*s>", d->path, aline, (int)anlen,
                                   an, (int)nlen, name);
            char *val = NULL;
            if (nx_value(d, p, ve, &val, err) < 0 || nx_push_attr(d, an, anlen, val, aline, err) < 0)
                return -1;
            p = ve + 1;
        }
        if (self) {
            if (depth == 0)
                done = 1;
        } else {
            stack[depth++] = d->nel - 1;
        }
    }
    if (depth)
        return p3d_err(err, "%s: the file ends inside <%.*s> opened at line %d (truncated file?)", d->path,
                       (int)d->el[stack[depth - 1]].nlen, d->el[stack[depth - 1]].name, d->el[stack[depth - 1]].line);
    if (!d->nel)
        return p3d_err(err, "%s: no element: expected <system version=\"1\"> (an NCCL topology file)", d->path);
    return 0;
}

static const nx_attr *nx_get(nx_doc *d, const nx_el *e, const char *name)
{
    for (int i = e->attr0; i < e->attr0 + e->nattr; i++)
        if (d->at[i].nlen == strlen(name) && !memcmp(d->at[i].name, name, d->at[i].nlen))
            return &d->at[i];
    return NULL;
}

/* ---- attribute values ---------------------------------------------------- */

/* The one line every bad value gets: file:line, element, attribute, value,
 * what was expected. */
static int bad_val(nx_doc *d, const nx_el *e, const nx_attr *a, const char *want, char **err)
{
    return p3d_err(err, "%s:%d: <%.*s %.*s=\"%s\">: expected %s", d->path, a->line, (int)e->nlen, e->name,
                   (int)a->nlen, a->name, p3d_tesc(a->val), want);
}

static int need(nx_doc *d, const nx_el *e, const char *attr, const char *want, const nx_attr **out,
                char **err)
{
    *out = nx_get(d, e, attr);
    if (!*out)
        return p3d_err(err, "%s:%d: <%.*s> has no %s attribute: expected %s", d->path, e->line, (int)e->nlen, e->name,
                       attr, want);
    return 0;
}

/* A decimal integer in [lo, hi]. */
static int dec_attr(nx_doc *d, const nx_el *e, const nx_attr *a, long lo, long hi, const char *want,
                    long *out, char **err)
{
    const char *s = a->val;
    long v = 0;
    int nd = 0;
    for (; *s >= '0' && *s <= '9'; s++, nd++) {
        if (v > (hi - (*s - '0')) / 10)
            return bad_val(d, e, a, want, err);
        v = v * 10 + (*s - '0');
    }
    if (!nd || *s || v < lo)
        return bad_val(d, e, a, want, err);
    *out = v;
    return 0;
}

/* "0x030200" (up to 8 hex digits). */
static int hex_attr(nx_doc *d, const nx_el *e, const nx_attr *a, const char *want, unsigned long *out,
                    char **err)
{
    const char *s = a->val;
    unsigned long v = 0;
    int nd = 0;
    if (s[0] != '0' || (s[1] != 'x' && s[1] != 'X'))
        return bad_val(d, e, a, want, err);
    for (s += 2; isxdigit((unsigned char)*s) && nd < 9; s++, nd++)
        v = v * 16 + (unsigned long)(isdigit((unsigned char)*s) ? *s - '0' : tolower((unsigned char)*s) - 'a' + 10);
    if (!nd || nd > 8 || *s)
        return bad_val(d, e, a, want, err);
    *out = v;
    return 0;
}

/* "0000:0c:00.0" -> a sortable key and the lower-case canonical text. */
static int busid_parse(const char *s, uint64_t *key, char canon[32])
{
    unsigned dom = 0, bus = 0, dev = 0, fn = 0;
    int nd[4] = {0}, part = 0;
    unsigned *f[4] = {&dom, &bus, &dev, &fn};
    static const int maxd[4] = {8, 2, 2, 1};
    for (const char *p = s;; p++) {
        if (isxdigit((unsigned char)*p)) {
            if (++nd[part] > maxd[part])
                return -1;
            *f[part] = *f[part] * 16 + (unsigned)(isdigit((unsigned char)*p) ? *p - '0'
                                                                              : tolower((unsigned char)*p) - 'a' + 10);
        } else if ((*p == ':' && part < 2) || (*p == '.' && part == 2)) {
            if (!nd[part])
                return -1;
            part++;
        } else if (!*p && part == 3 && nd[3]) {
            break;
        } else {
            return -1;
        }
    }
    if (dev > 0x1f || fn > 7)
        return -1;
    *key = ((uint64_t)dom << 16) | (bus << 8) | (dev << 3) | fn;
    snprintf(canon, 32, "%04x:%02x:%02x.%x", dom, bus, dev, fn);
    return 0;
}

/* Linux cpumask text: comma-separated 32-bit hex words, most significant
 * first. Fills bits[NX_MAX_CPUS/8]; 0, or -1 when malformed or too wide. */
static int mask_parse(const char *s, unsigned char *bits)
{
    size_t nwords = 1, len = strlen(s);
    for (const char *p = s; *p; p++)
        nwords += *p == ',';
    if (!len || nwords * 32 > NX_MAX_CPUS)
        return -1;
    memset(bits, 0, NX_MAX_CPUS / 8);
    size_t w = nwords;
    const char *p = s;
    while (w--) {
        const char *c = strchr(p, ',');
        size_t n = c ? (size_t)(c - p) : strlen(p);
        if (!n || n > 8)
            return -1;
        unsigned long v = 0;
        for (size_t i = 0; i < n; i++) {
            if (!isxdigit((unsigned char)p[i]))
                return -1;
            v = v * 16 + (unsigned long)(isdigit((unsigned char)p[i]) ? p[i] - '0' : tolower((unsigned char)p[i]) - 'a' + 10);
        }
        for (int b = 0; b < 32; b++)
            if (v >> b & 1) {
                size_t cpu = w * 32 + (size_t)b;
                bits[cpu / 8] |= (unsigned char)(1u << (cpu % 8));
            }
        p = c ? c + 1 : p + n;
    }
    return 0;
}

/* "0-23,48-71"; NULL when empty or out of memory. */
static char *mask_list(const unsigned char *bits, int *count)
{
    char *out = malloc(NX_MAX_CPUS * 6 + 1);
    size_t k = 0;
    int n = 0;
    if (!out)
        return NULL;
    out[0] = 0;
    for (int i = 0; i < NX_MAX_CPUS;) {
        if (!(bits[i / 8] >> (i % 8) & 1)) {
            i++;
            continue;
        }
        int j = i;
        while (j + 1 < NX_MAX_CPUS && (bits[(j + 1) / 8] >> ((j + 1) % 8) & 1))
            j++;
        k += (size_t)snprintf(out + k, NX_MAX_CPUS * 6 + 1 - k, i == j ? "%s%d" : "%s%d-%d", k ? "," : "", i, j);
        n += j - i + 1;
        i = j + 1;
    }
    *count = n;
    if (!n) {
        free(out);
        return NULL;
    }
    return out;
}

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
    for (int x = d->el[a].parent; x >= 0 && is_name(&d->el[x], "pci"); x = d->el[x].parent)
        pa[na++] = x;
    for (int x = d->el[b].parent; x >= 0 && is_name(&d->el[x], "pci"); x = d->el[x].parent)
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
        if (!is_name(e, rules[r].el))
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
        if (is_name(&d->el[i], "pci"))
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
    int k = nx_skip_misc(&d, &p, &err);
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
    if (nx_parse(&d, err) < 0)
        goto out;
    const nx_el *root = &d.el[0];
    if (!is_name(root, "system")) {
        p3d_err(err, "%s:%d: root element is <%.*s>: expected <system version=\"1\"> (an NCCL topology file)", path,
                root->line, (int)(root->nlen < 40 ? root->nlen : 40), root->name);
        goto out;
    }
    const nx_attr *ver;
    long v;
    if (need(&d, root, "version", "version=\"1\" (the format NCCL_TOPO_DUMP_FILE writes)", &ver, err) < 0 ||
        dec_attr(&d, root, ver, 1, 1000, "version=\"1\" (the format NCCL_TOPO_DUMP_FILE writes)", &v, err) < 0)
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
        if (is_name(e, "cpu")) {
            long id;
            if (need(&d, e, "numaid", "numaid=\"N\" (the NUMA node of the CPU)", &a, err) < 0 ||
                dec_attr(&d, e, a, 0, 4095, "a NUMA node number 0..4095", &id, err) < 0)
                goto out;
            x->cpu = i;
            x->numa = (int)id;
            int seen = 0;
            for (int k = 0; k < nnuma; k++)
                seen |= numas[k] == (int)id;
            if (!seen && nnuma < (int)(sizeof numas / sizeof *numas))
                numas[nnuma++] = (int)id;
            if ((a = nx_get(&d, e, "affinity"))) {
                if (mask_parse(a->val, bits) < 0) {
                    bad_val(&d, e, a,
                             "a CPU mask of comma-separated 32-bit hex words (\"0000ffff,0000ffff\"), at most 8192 CPUs",
                             err);
                    goto out;
                }
                for (int k = 0; k < NX_MAX_CPUS / 8; k++)
                    all[k] |= bits[k];
            }
        } else if (is_name(e, "pci")) {
            if (need(&d, e, "busid", "busid=\"DDDD:BB:DD.F\"", &a, err) < 0)
                goto out;
            if (busid_parse(a->val, &x->key, x->busid) < 0) {
                bad_val(&d, e, a, "a PCI bus id DDDD:BB:DD.F (hex)", err);
                goto out;
            }
            unsigned long h = 0;
            if ((a = nx_get(&d, e, "class"))) {
                if (hex_attr(&d, e, a, "a PCI class such as 0x030200", &h, err) < 0 || h > 0xffffff) {
                    if (h > 0xffffff)
                        bad_val(&d, e, a, "a 24-bit PCI class such as 0x030200", err);
                    goto out;
                }
                x->cls = h;
                x->has_class = 1;
            }
            if ((a = nx_get(&d, e, "vendor"))) {
                if (hex_attr(&d, e, a, "a PCI vendor id such as 0x10de", &h, err) < 0 || h > 0xffff) {
                    if (h > 0xffff)
                        bad_val(&d, e, a, "a 16-bit PCI vendor id such as 0x10de", err);
                    goto out;
                }
                x->vendor = (int)h;
            }
        } else if (is_name(e, "gpu")) {
            if (inf[e->parent].gpu_child >= 0) {
                p3d_err(err, "%s:%d: a second <gpu> in <pci busid=\"%s\"> (first at line %d)", path, e->line,
                        inf[e->parent].busid, d.el[inf[e->parent].gpu_child].line);
                goto out;
            }
            inf[e->parent].gpu_child = i;
            long sm;
            if ((a = nx_get(&d, e, "sm"))) {
                if (dec_attr(&d, e, a, 10, 1000, "a compute capability 10..1000 (sm=\"80\" for 8.0)", &sm, err) < 0)
                    goto out;
                x->sm = (int)sm;
            }
            if ((a = nx_get(&d, e, "dev")) &&
                dec_attr(&d, e, a, 0, 4095, "a CUDA device number 0..4095", &sm, err) < 0)
                goto out;
        } else if (is_name(e, "nic")) {
            if (is_name(&d.el[e->parent], "pci"))
                inf[e->parent].nic_child = 1;
        } else if (is_name(e, "net")) {
            long sp;
            if (need(&d, e, "name", "name=\"mlx5_0\" (the network device)", &a, err) < 0)
                goto out;
            if (!*a->val || strlen(a->val) >= sizeof((p3d_nic *)0)->name || !p3d_term_clean(a->val, strlen(a->val), 0) ||
                strchr(a->val, ' ')) {
                bad_val(&d, e, a, "a device name of 1..31 printable characters without spaces", err);
                goto out;
            }
            if ((a = nx_get(&d, e, "speed")) &&
                dec_attr(&d, e, a, 0, 100000000, "a link speed in Mb/s, 0..100000000", &sp, err) < 0)
                goto out;
        } else if (is_name(e, "nvlink")) {
            long cnt;
            uint64_t k;
            char c[32];
            if (need(&d, e, "target", "target=\"DDDD:BB:DD.F\" (the PCI bus id at the other end)", &a, err) < 0)
                goto out;
            if (busid_parse(a->val, &k, c) < 0) {
                bad_val(&d, e, a, "a PCI bus id DDDD:BB:DD.F (hex)", err);
                goto out;
            }
            if (need(&d, e, "count", "count=\"N\" (the number of links)", &a, err) < 0 ||
                dec_attr(&d, e, a, 1, NX_MAX_LINKS, "a link count of 1..64", &cnt, err) < 0)
                goto out;
            unsigned long h;
            if ((a = nx_get(&d, e, "tclass")) &&
                hex_attr(&d, e, a, "a PCI class such as 0x068000 (NVSwitch) or 0x030200 (GPU)", &h, err) < 0)
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
        if (is_name(e, "pci")) {
            unsigned long sub = x->cls >> 8;
            int is_gpu = x->gpu_child >= 0 ||
                         (x->has_class && (sub == 0x0302 || (sub == 0x0300 && (x->vendor < 0 || x->vendor == 0x10de))));
            int is_nic = !is_gpu && !x->nic_child && x->has_class && (sub == 0x0207 || sub == 0x0200);
            if (is_gpu)
                gpu[ngpu++] = (dev_ref){i, i, x->key, i, NULL};
            if (is_nic)
                nic[nnic++] = (dev_ref){i, i, x->key, i, x->busid};
        } else if (is_name(e, "net") || is_name(e, "nic")) {
            int nicel = is_name(e, "net") ? e->parent : i;
            int pci = d.el[nicel].parent;
            if (!is_name(&d.el[pci], "pci"))
                pci = -1;
            if (is_name(e, "nic")) {
                /* a <nic> without any <net>: one NIC named by its bus id */
                int has_net = 0;
                for (int k = i + 1; k < d.nel && d.el[k].depth > e->depth; k++)
                    has_net |= is_name(&d.el[k], "net") && d.el[k].parent == i;
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
                nic[nnic++] = (dev_ref){i, pci, pci >= 0 ? inf[pci].key : 0, i, nx_get(&d, e, "name")->val};
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
    char *allcpus = mask_list(all, &npus);
    free(allcpus);
    n->npus = npus;
    for (int a = 0; a < ngpu; a++) {
        p3d_gpu *g = &n->gpus[a];
        const nx_info *x = &inf[gpu[a].pci];
        snprintf(g->pci, sizeof g->pci, "%s", x->busid);
        g->numa = x->numa;
        const nx_attr *aff = x->cpu >= 0 ? nx_get(&d, &d.el[x->cpu], "affinity") : NULL;
        int cnt;
        if (aff && mask_parse(aff->val, bits) == 0)
            g->cpus = mask_list(bits, &cnt);
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
            if (!is_name(e, "nvlink") || e->parent != gel)
                continue;
            uint64_t key;
            char c[32];
            long cnt = 0;
            unsigned long tc = 0;
            const nx_attr *ta = nx_get(&d, e, "tclass");
            busid_parse(nx_get(&d, e, "target")->val, &key, c);
            dec_attr(&d, e, nx_get(&d, e, "count"), 1, NX_MAX_LINKS, "", &cnt, err);
            if (ta)
                hex_attr(&d, e, ta, "", &tc, err);
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
    nx_free(&d);
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
