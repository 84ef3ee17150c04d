/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * topo_report.c — `par3drun topo` output: text in the notation users know
 * from `nvidia-smi topo -m`, and JSON (fields in docs/topology.md).
 *
 * Text layout: a GPU x GPU matrix with NUMA and CPU affinity columns, a
 * GPU x NIC matrix (split into blocks of NIC columns so lines stay within
 * 100 characters), the NIC legend, the NVLink domains, each GPU's nearest
 * NIC, then notes. NV cells show NV<links> with links = GB/s / 25 (NVLink
 * 2-4 move 25 GB/s per link per direction), which reproduces nvidia-smi's
 * numbers for V100/A100/H100 systems; the GB/s themselves are in the domain
 * lines and in the JSON.
 */
#include "topo_internal.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "strbuf.h"

#define CELL 6         /* width of one matrix column */
#define LINE_MAX_W 100 /* DESIGN.md: text fits 100 columns for 8 GPUs */
#define NIC_BLOCK 14   /* NIC columns per GPU x NIC block: 6 + 14*6 < 100 */

static const char *const C_NV = "\033[32m", *const C_SYS = "\033[33m", *const C_OFF = "\033[0m";

static void link_cell(char *buf, size_t cap, const p3d_node *n, int i, int j)
{
    int c = n->gg_class[(size_t)i * n->ngpus + j];
    if (c == P3D_LINK_NVLINK) {
        double gbps = n->nvlink[(size_t)i * n->ngpus + j];
        long links = lround(gbps / 25.0);
        /* clamp so the cell always fits: no real node has 9999 links */
        int shown = links < 1 ? 1 : links > 9999 ? 9999 : (int)links;
        snprintf(buf, cap, "NV%d", shown);
    } else {
        snprintf(buf, cap, "%s", p3d_link_name((p3d_link)c));
    }
}

/* One padded cell; colour wraps the text, never the padding, so columns
 * line up with and without colour. */
static void put_cell(p3d_sb *b, const char *s, int color)
{
    const char *on = NULL;
    if (color && !strncmp(s, "NV", 2))
        on = C_NV;
    else if (color && !strcmp(s, "SYS"))
        on = C_SYS;
    if (on)
        p3d_sb_printf(b, "%s%s%s", on, s, C_OFF);
    else
        p3d_sb_puts(b, s);
    int pad = CELL - (int)strlen(s);
    p3d_sb_pad(b, ' ', pad > 0 ? pad : 1);
}

static void put_label(p3d_sb *b, const char *fmt, int i)
{
    char lab[16];
    snprintf(lab, sizeof lab, fmt, i);
    p3d_sb_puts(b, lab);
    int pad = CELL + 1 - (int)strlen(lab);
    p3d_sb_pad(b, ' ', pad > 0 ? pad : 1);
}

static void put_numa(p3d_sb *b, int numa)
{
    char s[16];
    if (numa >= 0)
        snprintf(s, sizeof s, "%d", numa);
    else
        snprintf(s, sizeof s, "N/A");
    p3d_sb_printf(b, "%-6s", s);
}

/* Compact "0-3,5" list of GPU indices of a domain. */
static void put_gpu_set(p3d_sb *b, const int *m, int k)
{
    for (int a = 0; a < k;) {
        int e = a;
        while (e + 1 < k && m[e + 1] == m[e] + 1)
            e++;
        p3d_sb_printf(b, "%s%d", a ? "," : "", m[a]);
        if (e > a)
            p3d_sb_printf(b, "%s%d", e == a + 1 ? "," : "-", m[e]);
        a = e + 1;
    }
}

static void gpu_matrix(p3d_sb *b, const p3d_node *n, int color)
{
    int g = n->ngpus;
    /* what remains of the line for the CPU affinity column */
    int used = CELL + 1 + g * CELL + 6;
    int room = LINE_MAX_W - used;
    p3d_sb_pad(b, ' ', CELL + 1);
    for (int j = 0; j < g; j++) {
        char lab[16];
        snprintf(lab, sizeof lab, "GPU%d", j);
        put_cell(b, lab, 0);
    }
    p3d_sb_puts(b, "NUMA  CPU Affinity\n");
    for (int i = 0; i < g; i++) {
        put_label(b, "GPU%d", i);
        for (int j = 0; j < g; j++) {
            char cell[16];
            link_cell(cell, sizeof cell, n, i, j);
            put_cell(b, cell, color);
        }
        put_numa(b, n->gpus[i].numa);
        const char *cpus = n->gpus[i].cpus && *n->gpus[i].cpus ? n->gpus[i].cpus : "N/A";
        int len = (int)strlen(cpus);
        if (room >= 8 && len > room)
            p3d_sb_printf(b, "%.*s...\n", room - 3, cpus);
        else
            p3d_sb_printf(b, "%s\n", cpus);
    }
}

static void nic_matrix(p3d_sb *b, const p3d_node *n, int color)
{
    int g = n->ngpus, k = n->nnics;
    for (int start = 0; start < k; start += NIC_BLOCK) {
        int end = start + NIC_BLOCK < k ? start + NIC_BLOCK : k;
        p3d_sb_putc(b, '\n');
        p3d_sb_pad(b, ' ', CELL + 1);
        for (int j = start; j < end; j++) {
            char lab[16];
            snprintf(lab, sizeof lab, "NIC%d", j);
            put_cell(b, lab, 0);
        }
        while (b->len && b->p[b->len - 1] == ' ')
            b->len--;
        p3d_sb_putc(b, '\n');
        for (int i = 0; i < g; i++) {
            put_label(b, "GPU%d", i);
            for (int j = start; j < end; j++)
                put_cell(b, p3d_link_name((p3d_link)n->gn_class[(size_t)i * k + j]), color);
            /* trailing blanks from the padding are noise in diffs */
            while (b->len && b->p[b->len - 1] == ' ')
                b->len--;
            p3d_sb_putc(b, '\n');
        }
    }
}

static void nic_legend(p3d_sb *b, const p3d_node *n)
{
    int k = n->nnics;
    p3d_sb_puts(b, "\nNIC legend:\n");
    for (int j = 0; j < k; j++) {
        const p3d_nic *c = &n->nics[j];
        p3d_sb_printf(b, "  NIC%-3d %-12s %-5s %-13s NUMA ", j, c->name, c->kind, c->pci[0] ? c->pci : "N/A");
        put_numa(b, c->numa);
        while (b->len && b->p[b->len - 1] == ' ')
            b->len--;
        p3d_sb_putc(b, '\n');
    }
}

static void domains_text(p3d_sb *b, const p3d_node *n)
{
    int g = n->ngpus;
    int *m = malloc(sizeof(int) * (size_t)(g ? g : 1));
    if (!m) {
        b->oom = 1;
        return;
    }
    p3d_sb_puts(b, "\nNVLink domains (a TP group inside one domain talks over "
                   "NVLink only):\n");
    for (int d = 0; d < n->ndomains; d++) {
        int k = p3d_node_domain_members(n, d, m, g);
        double lo = INFINITY, hi = 0;
        for (int a = 0; a < k; a++)
            for (int c = a + 1; c < k; c++) {
                double v = n->nvlink[(size_t)m[a] * g + m[c]];
                lo = fmin(lo, v);
                hi = fmax(hi, v);
            }
        p3d_sb_printf(b, "  domain %d: GPU ", d);
        put_gpu_set(b, m, k);
        if (k == 1)
            p3d_sb_puts(b, "  (1 GPU, no NVLink peer)\n");
        else if (lo == hi)
            p3d_sb_printf(b, "  (%d GPUs, all-to-all, %g GB/s per pair)\n", k, lo);
        else
            p3d_sb_printf(b, "  (%d GPUs, all-to-all, %g-%g GB/s per pair)\n", k, lo, hi);
    }
    if (n->nvlink_connected_not_clique)
        p3d_sb_puts(b, "  NVLink also joins these domains (not all-to-all): "
                       "a larger TP group would use an NVLink ring\n");
    free(m);
}

static void nearest_text(p3d_sb *b, const p3d_node *n)
{
    if (!n->nnics || !n->ngpus)
        return;
    p3d_sb_puts(b, "\nNearest NIC per GPU:\n");
    for (int i = 0; i < n->ngpus; i++) {
        const p3d_gpu *gp = &n->gpus[i];
        if (gp->nearest_nic < 0) {
            p3d_sb_printf(b, "  GPU%-3d none\n", i);
            continue;
        }
        const p3d_nic *c = &n->nics[gp->nearest_nic];
        p3d_sb_printf(b, "  GPU%-3d %-12s %-4s ", i, c->name,
                      p3d_link_name((p3d_link)n->gn_class[(size_t)i * n->nnics + gp->nearest_nic]));
        if (gp->nic_same_numa)
            p3d_sb_printf(b, "same NUMA node (%d)\n", gp->numa);
        else if (gp->numa >= 0)
            p3d_sb_printf(b, "no NIC on its NUMA node %d (NIC on %d)\n", gp->numa, c->numa);
        else
            p3d_sb_puts(b, "GPU's NUMA node unknown\n");
    }
}

/* One note as "  - text", wrapped at spaces to LINE_MAX_W columns with a
 * 4-space continuation indent. */
static void put_wrapped(p3d_sb *b, const char *s, size_t len)
{
    const int width = LINE_MAX_W - 4;
    const char *end = s + len;
    p3d_sb_puts(b, "  - ");
    while (s < end) {
        size_t rest = (size_t)(end - s), take = rest;
        if ((int)rest > width) {
            take = (size_t)width;
            while (take > 0 && s[take] != ' ')
                take--;
            if (take == 0) /* one long word: cut it */
                take = (size_t)width;
        }
        p3d_sb_putn(b, s, take);
        p3d_sb_putc(b, '\n');
        s += take;
        while (s < end && *s == ' ')
            s++;
        if (s < end)
            p3d_sb_puts(b, "    ");
    }
}

/* ", 2 packages" or ", unknown packages": a count of 0 means the source
 * does not give it (nvidia-smi text has no CPU inventory); a real node has
 * at least one of each. */
static void count_text(p3d_sb *b, int v, const char *one, const char *many)
{
    if (v > 0)
        p3d_sb_printf(b, ", %d %s", v, v == 1 ? one : many);
    else
        p3d_sb_printf(b, ", unknown %s", many);
}

/* The node's name: its hostname, else the source file's name without
 * directory and extension (an nvidia-smi text names no host). */
static void node_name(p3d_sb *b, const p3d_node *n)
{
    if (n->hostname) {
        p3d_sb_puts(b, n->hostname);
        return;
    }
    if (!n->source || !*n->source) {
        p3d_sb_puts(b, "(unnamed)");
        return;
    }
    const char *base = strrchr(n->source, '/');
    base = base ? base + 1 : n->source;
    const char *dot = strrchr(base, '.');
    size_t len = dot && dot != base ? (size_t)(dot - base) : strlen(base);
    p3d_sb_printf(b, "%.*s", (int)len, base);
}

char *p3d_topo_text(const p3d_node *n, int color)
{
    p3d_sb b = {0};
    if (!n)
        return NULL;
    /* the source path has a line of its own: it is the one line that may
     * exceed 100 columns */
    p3d_sb_puts(&b, "Node ");
    node_name(&b, n);
    p3d_sb_printf(&b, " (hash %s)\nSource: %s (%s)\n", n->hash, n->source ? n->source : "?",
                  n->source_kind ? n->source_kind : "?");
    p3d_sb_printf(&b, "%d GPU%s, %d NIC%s", n->ngpus, n->ngpus == 1 ? "" : "s", n->nnics, n->nnics == 1 ? "" : "s");
    count_text(&b, n->npackages, "package", "packages");
    count_text(&b, n->nnuma, "NUMA node", "NUMA nodes");
    count_text(&b, n->ncores, "core", "cores");
    count_text(&b, n->npus, "PU", "PUs");
    p3d_sb_puts(&b, "\n");
    if (n->fabric_uuid)
        p3d_sb_printf(&b, "GPU fabric: cluster %s, clique %d\n", n->fabric_uuid, n->fabric_clique);
    if (n->ngpus) {
        p3d_sb_puts(&b, "\nLegend: X = self, NV# = NVLink (# = GB/s / 25), "
                        "PIX < PXB < PHB < NODE < SYS (PCIe)\n\n");
        gpu_matrix(&b, n, color);
        if (n->nnics)
            nic_matrix(&b, n, color);
        if (n->nnics)
            nic_legend(&b, n);
        domains_text(&b, n);
        nearest_text(&b, n);
    } else if (n->nnics) {
        nic_legend(&b, n);
    }
    if (n->notes) {
        p3d_sb_puts(&b, "\nNotes:\n");
        const char *p = n->notes;
        while (*p) {
            const char *nl = strchr(p, '\n');
            size_t len = nl ? (size_t)(nl - p) : strlen(p);
            put_wrapped(&b, p, len);
            p += len + (nl ? 1 : 0);
        }
    }
    return p3d_sb_finish(&b);
}

/* ---- JSON -------------------------------------------------------------- */

static void json_int_or_null(p3d_sb *b, int v)
{
    if (v >= 0)
        p3d_sb_int(b, v);
    else
        p3d_sb_puts(b, "null");
}

static void json_gpu(p3d_sb *b, const p3d_node *n, int i)
{
    const p3d_gpu *gp = &n->gpus[i];
    int k = n->nnics;
    p3d_sb_printf(b, "%s\n    {\"index\": %d, \"pci\": ", i ? "," : "", i);
    p3d_sb_json_str(b, gp->pci[0] ? gp->pci : NULL);
    p3d_sb_puts(b, ", \"numa\": ");
    json_int_or_null(b, gp->numa);
    p3d_sb_puts(b, ", \"nearest_nic\": ");
    p3d_sb_json_str(b, gp->nearest_nic >= 0 ? n->nics[gp->nearest_nic].name : NULL);
    p3d_sb_puts(b, ", \"nearest_nic_class\": ");
    p3d_sb_json_str(b, gp->nearest_nic >= 0 ? p3d_link_name((p3d_link)n->gn_class[(size_t)i * k + gp->nearest_nic])
                                            : NULL);
    p3d_sb_printf(b,
                  ", \"nic_same_numa\": %s, \"domain\": %d,\n"
                  "     \"package\": ",
                  gp->nic_same_numa ? "true" : "false", gp->domain);
    json_int_or_null(b, gp->package);
    p3d_sb_puts(b, ", \"cpus\": ");
    p3d_sb_json_str(b, gp->cpus ? gp->cpus : "");
    p3d_sb_puts(b, ", \"model\": ");
    p3d_sb_json_str(b, gp->model[0] ? gp->model : NULL);
    p3d_sb_puts(b, ", \"osdev\": ");
    p3d_sb_json_str(b, gp->osdev[0] ? gp->osdev : NULL);
    p3d_sb_printf(b, ", \"mem_bytes\": %llu}", (unsigned long long)gp->mem_bytes);
}

static void json_nic(p3d_sb *b, const p3d_node *n, int j)
{
    const p3d_nic *c = &n->nics[j];
    p3d_sb_printf(b, "%s\n    {\"index\": %d, \"name\": ", j ? "," : "", j);
    p3d_sb_json_str(b, c->name);
    p3d_sb_puts(b, ", \"pci\": ");
    p3d_sb_json_str(b, c->pci[0] ? c->pci : NULL);
    p3d_sb_puts(b, ", \"kind\": ");
    p3d_sb_json_str(b, c->kind);
    p3d_sb_puts(b, ", \"numa\": ");
    json_int_or_null(b, c->numa);
    p3d_sb_putc(b, '}');
}

/* "nvlink", "gpu_links" and "gpu_nic_links": one row per GPU each. The
 * opening '[' of "nvlink" is the caller's. */
static void json_matrices(p3d_sb *b, const p3d_node *n)
{
    int g = n->ngpus, k = n->nnics;
    for (int i = 0; i < g; i++) {
        p3d_sb_puts(b, i ? ",\n    [" : "\n    [");
        for (int j = 0; j < g; j++) {
            if (j)
                p3d_sb_puts(b, ", ");
            p3d_sb_json_num(b, n->nvlink[(size_t)i * g + j]);
        }
        p3d_sb_putc(b, ']');
    }
    p3d_sb_puts(b, g ? "\n  ],\n  \"gpu_links\": [" : "],\n  \"gpu_links\": [");
    for (int i = 0; i < g; i++) {
        p3d_sb_puts(b, i ? ",\n    [" : "\n    [");
        for (int j = 0; j < g; j++) {
            char cell[16];
            link_cell(cell, sizeof cell, n, i, j);
            p3d_sb_printf(b, "%s\"%s\"", j ? ", " : "", cell);
        }
        p3d_sb_putc(b, ']');
    }
    p3d_sb_puts(b, g ? "\n  ],\n  \"gpu_nic_links\": [" : "],\n  \"gpu_nic_links\": [");
    for (int i = 0; i < g; i++) {
        p3d_sb_puts(b, i ? ",\n    [" : "\n    [");
        for (int j = 0; j < k; j++)
            p3d_sb_printf(b, "%s\"%s\"", j ? ", " : "", p3d_link_name((p3d_link)n->gn_class[(size_t)i * k + j]));
        p3d_sb_putc(b, ']');
    }
}

/* The members of each NVLink domain; the opening '[' is the caller's. */
static void json_domains(p3d_sb *b, const p3d_node *n)
{
    int g = n->ngpus;
    int *m = malloc(sizeof(int) * (size_t)(g ? g : 1));
    if (!m)
        b->oom = 1;
    for (int d = 0; m && d < n->ndomains; d++) {
        int cnt = p3d_node_domain_members(n, d, m, g);
        p3d_sb_puts(b, d ? ", [" : "[");
        for (int a = 0; a < cnt; a++)
            p3d_sb_printf(b, "%s%d", a ? ", " : "", m[a]);
        p3d_sb_putc(b, ']');
    }
    free(m);
}

/* "notes": one string per line of n->notes, and the object's end. */
static void json_notes(p3d_sb *b, const p3d_node *n)
{
    p3d_sb_puts(b, ",\n  \"notes\": [");
    const char *p = n->notes ? n->notes : "";
    int first = 1;
    while (*p) {
        const char *nl = strchr(p, '\n');
        size_t len = nl ? (size_t)(nl - p) : strlen(p);
        char *line = strndup(p, len);
        if (!line) {
            b->oom = 1;
            break;
        }
        p3d_sb_puts(b, first ? "\n    " : ",\n    ");
        p3d_sb_json_str(b, line);
        free(line);
        first = 0;
        p += len + (nl ? 1 : 0);
    }
    p3d_sb_puts(b, first ? "]\n}\n" : "\n  ]\n}\n");
}

char *p3d_topo_json(const p3d_node *n)
{
    p3d_sb b = {0};
    if (!n)
        return NULL;
    int g = n->ngpus, k = n->nnics;
    p3d_sb_puts(&b, "{\n  \"node\": ");
    p3d_sb_json_str(&b, n->hostname);
    p3d_sb_puts(&b, ",\n  \"source\": ");
    p3d_sb_json_str(&b, n->source);
    p3d_sb_puts(&b, ",\n  \"source_kind\": ");
    p3d_sb_json_str(&b, n->source_kind);
    p3d_sb_printf(&b, ",\n  \"hash\": \"%s\",\n", n->hash);
    /* 0 = the source does not give it (see count_text): null */
    p3d_sb_puts(&b, "  \"cpu\": {\"packages\": ");
    json_int_or_null(&b, n->npackages > 0 ? n->npackages : -1);
    p3d_sb_puts(&b, ", \"numa_nodes\": ");
    json_int_or_null(&b, n->nnuma > 0 ? n->nnuma : -1);
    p3d_sb_puts(&b, ", \"cores\": ");
    json_int_or_null(&b, n->ncores > 0 ? n->ncores : -1);
    p3d_sb_puts(&b, ", \"pus\": ");
    json_int_or_null(&b, n->npus > 0 ? n->npus : -1);
    p3d_sb_puts(&b, "},\n");
    p3d_sb_puts(&b, "  \"gpus\": [");
    for (int i = 0; i < g; i++)
        json_gpu(&b, n, i);
    p3d_sb_puts(&b, g ? "\n  ],\n  \"nics\": [" : "],\n  \"nics\": [");
    for (int j = 0; j < k; j++)
        json_nic(&b, n, j);
    p3d_sb_puts(&b, k ? "\n  ],\n  \"nvlink\": [" : "],\n  \"nvlink\": [");
    json_matrices(&b, n);
    p3d_sb_puts(&b, g ? "\n  ],\n  \"domains\": [" : "],\n  \"domains\": [");
    json_domains(&b, n);
    p3d_sb_printf(&b, "],\n  \"nvlink_connected_not_clique\": %s,\n",
                  n->nvlink_connected_not_clique ? "true" : "false");
    p3d_sb_puts(&b, "  \"fabric\": ");
    if (n->fabric_uuid) {
        p3d_sb_puts(&b, "{\"cluster_uuid\": ");
        p3d_sb_json_str(&b, n->fabric_uuid);
        p3d_sb_puts(&b, ", \"clique\": ");
        json_int_or_null(&b, n->fabric_clique);
        p3d_sb_puts(&b, "}");
    } else {
        p3d_sb_puts(&b, "null");
    }
    json_notes(&b, n);
    return p3d_sb_finish(&b);
}
