/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * topo_nvsmi.c — one node's topology from the text of `nvidia-smi topo -m`
 * (or `-mp`), the form users have far more often than an hwloc XML with
 * NVLink in it. What is read and what is assumed: docs/nvidia-smi-topo.md.
 *
 * The text is a matrix: a header line naming the columns (GPU0..GPUn-1,
 * then NICs, then "CPU Affinity", "NUMA Affinity", "GPU NUMA ID"), one row
 * per GPU and per NIC, then a Legend (ignored, except for the "NIC Legend"
 * of newer drivers that maps NIC0.. to device names). Cells are separated
 * by tabs in the real output and by runs of spaces once pasted through a
 * web page, so both count as separators; the only multi-word column names
 * are merged back by name.
 */
#include "topo_internal.h"
#include "topo_nvsmi.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* NV# means "# bonded NVLinks". NVLink 2, 3 and 4 (V100, A100, H100) all
 * move 25 GB/s per link per direction, so NV12 on an A100 is 300 GB/s per
 * direction (NVIDIA's "600 GB/s" counts both). The text names no GPU model,
 * so one figure is used for every generation; it over-states NVLink 1 (P100,
 * 20 GB/s) and the RTX NVLink bridges (~14 GB/s). Per direction, like hwloc's
 * NVLinkBandwidth matrix (MB/s per direction), so both sources agree. */
#define NVSMI_GBPS_PER_LINK 25.0

/* Far above any real node; bounds the allocations a hostile file can ask for. */
#define NVSMI_MAX_COLS 1024

enum col_kind { COL_GPU, COL_NIC, COL_CPUAFF, COL_NUMAAFF, COL_GPUNUMA };

typedef struct nv_col {
    int kind;
    char name[NVSMI_NAME_LEN];
} nv_col;

/* One parsed row of the matrix. cls/nv hold ncol cells (link class and NV
 * link count); line is 0 while the row has not been seen. */
typedef struct nv_row {
    int line;
    unsigned char *cls;
    int *nv;
    char *cpus;     /* CPU Affinity (GPU rows), malloc'd, NULL if N/A */
    int numa;       /* lowest NUMA Affinity entry, -1 when unknown */
    int numa_multi; /* NUMA Affinity listed more than one node */
} nv_row;

/* The parser's state, so that one cleanup frees everything. */
typedef struct nv_parse {
    const char *path;
    char *buf;  /* copy of the text, cut into lines */
    char **tok; /* token pointers for the current line */
    int tokcap;
    nv_col *cols;
    int ncols; /* all header columns */
    int nmat;  /* matrix columns: GPUs then NICs */
    int ngpu, nnic;
    int naff; /* affinity columns after the matrix */
    int header_line;
    nv_row *rows; /* nmat rows: GPU rows then NIC rows, by column */
} nv_parse;

static void nv_parse_free(nv_parse *ps)
{
    if (ps->rows)
        for (int i = 0; i < ps->nmat; i++) {
            free(ps->rows[i].cls);
            free(ps->rows[i].nv);
            free(ps->rows[i].cpus);
        }
    free(ps->rows);
    free(ps->cols);
    free(ps->tok);
    free(ps->buf);
}

/* Reads the header tokens into ps->cols. */
static int parse_header(nv_parse *ps, char **tok, int nt, int line, char **err)
{
    ps->cols = calloc((size_t)nt, sizeof *ps->cols);
    if (!ps->cols)
        return p3d_err(err, "%s: out of memory", ps->path);
    for (int i = 0; i < nt; i++) {
        nv_col c = {0};
        int g = nvsmi_gpu_label(tok[i]);
        if (!strcmp(tok[i], "CPU") && i + 1 < nt && !strcmp(tok[i + 1], "Affinity")) {
            c.kind = COL_CPUAFF;
            snprintf(c.name, sizeof c.name, "CPU Affinity");
            i++;
        } else if (!strcmp(tok[i], "NUMA") && i + 1 < nt && !strcmp(tok[i + 1], "Affinity")) {
            c.kind = COL_NUMAAFF;
            snprintf(c.name, sizeof c.name, "NUMA Affinity");
            i++;
        } else if (!strcmp(tok[i], "GPU") && i + 2 < nt && !strcmp(tok[i + 1], "NUMA") && !strcmp(tok[i + 2], "ID")) {
            c.kind = COL_GPUNUMA;
            snprintf(c.name, sizeof c.name, "GPU NUMA ID");
            i += 2;
        } else if (g >= 0) {
            if (g != ps->ngpu || ps->nnic || ps->naff)
                return p3d_err(err,
                               "%s:%d: header column '%s' out of place (expected GPU%d "
                               "here: GPU columns come first, numbered from 0)",
                               ps->path, line, tok[i], ps->ngpu);
            c.kind = COL_GPU;
            snprintf(c.name, sizeof c.name, "%s", tok[i]);
            ps->ngpu++;
        } else if (nvsmi_nic_label_ok(tok[i])) {
            if (ps->naff)
                return p3d_err(err,
                               "%s:%d: header column '%s' after the affinity columns "
                               "(expected GPU and NIC columns first)",
                               ps->path, line, tok[i]);
            for (int j = 0; j < ps->ncols; j++)
                if (ps->cols[j].kind == COL_NIC && !strcmp(ps->cols[j].name, tok[i]))
                    return p3d_err(err, "%s:%d: header names NIC '%s' twice", ps->path, line, tok[i]);
            c.kind = COL_NIC;
            snprintf(c.name, sizeof c.name, "%s", tok[i]);
            ps->nnic++;
        } else {
            /* "CPU Affi" of a header wrapped by a terminal: show both words */
            int two = i + 1 < nt && (!strcmp(tok[i], "CPU") || !strcmp(tok[i], "NUMA"));
            return p3d_err(err,
                           "%s:%d: mangled header: column %d '%s%s%s' is not a GPU, "
                           "NIC or affinity column name (expected GPU0 GPU1 ... NICs "
                           "... CPU Affinity NUMA Affinity)",
                           ps->path, line, ps->ncols + 1, tok[i], two ? " " : "", two ? tok[i + 1] : "");
        }
        if (c.kind >= COL_CPUAFF) {
            for (int j = 0; j < ps->ncols; j++)
                if (ps->cols[j].kind == c.kind)
                    return p3d_err(err, "%s:%d: header names '%s' twice", ps->path, line, c.name);
            ps->naff++;
        }
        ps->cols[ps->ncols++] = c;
    }
    if (ps->ngpu == 0)
        return p3d_err(err, "%s:%d: header has no GPU columns", ps->path, line);
    ps->nmat = ps->ngpu + ps->nnic;
    if (ps->nmat > NVSMI_MAX_COLS)
        return p3d_err(err, "%s:%d: %d matrix columns (at most %d)", ps->path, line, ps->nmat, NVSMI_MAX_COLS);
    ps->rows = calloc((size_t)ps->nmat, sizeof *ps->rows);
    if (!ps->rows)
        return p3d_err(err, "%s: out of memory", ps->path);
    for (int i = 0; i < ps->nmat; i++) {
        ps->rows[i].numa = -1;
        ps->rows[i].cls = calloc((size_t)ps->nmat, 1);
        ps->rows[i].nv = calloc((size_t)ps->nmat, sizeof(int));
        if (!ps->rows[i].cls || !ps->rows[i].nv)
            return p3d_err(err, "%s: out of memory", ps->path);
    }
    ps->header_line = line;
    return 0;
}

/* Reads one GPU or NIC row (r = its matrix column). */
static int parse_row(nv_parse *ps, int r, char **tok, int nt, int line, char **err)
{
    nv_row *row = &ps->rows[r];
    int is_gpu = r < ps->ngpu;
    int ncells = nt - 1;
    if (row->line)
        return p3d_err(err, "%s:%d: second row for %s (first on line %d)", ps->path, line, ps->cols[r].name, row->line);
    /* NIC rows carry no affinity in real output; accept it when present. */
    if (is_gpu ? ncells != ps->nmat + ps->naff : ncells != ps->nmat && ncells != ps->nmat + ps->naff)
        return p3d_err(err,
                       "%s:%d: row %s has %d fields, expected %d (the header on line "
                       "%d has %d matrix and %d affinity columns)",
                       ps->path, line, ps->cols[r].name, ncells, ps->nmat + (is_gpu ? ps->naff : 0), ps->header_line,
                       ps->nmat, ps->naff);
    row->line = line;
    for (int j = 0; j < ps->nmat; j++) {
        const char *cell = tok[1 + j];
        int l = nvsmi_cell_class(cell);
        if (l < 0)
            return p3d_err(err,
                           "%s:%d: row %s, column %s: unknown cell '%s' (expected X, "
                           "NV#, PIX, PXB, PHB, NODE or SYS)",
                           ps->path, line, ps->cols[r].name, ps->cols[j].name, cell);
        if ((l == P3D_LINK_SELF) != (j == r))
            return p3d_err(err,
                           "%s:%d: row %s, column %s: '%s' (X marks the diagonal and "
                           "only it)",
                           ps->path, line, ps->cols[r].name, ps->cols[j].name, cell);
        if (l == P3D_LINK_NVLINK) {
            row->nv[j] = nvsmi_nv_links(cell);
            if (row->nv[j] < 1 || !is_gpu || j >= ps->ngpu)
                return p3d_err(err,
                               "%s:%d: row %s, column %s: '%s' (NV# needs a link count "
                               "of 1 or more, between two GPUs)",
                               ps->path, line, ps->cols[r].name, ps->cols[j].name, cell);
        }
        row->cls[j] = (unsigned char)l;
    }
    for (int k = 0; k < ps->naff && 1 + ps->nmat + k < nt; k++) {
        const nv_col *c = &ps->cols[ps->nmat + k];
        const char *v = tok[1 + ps->nmat + k];
        if (!is_gpu || !strcmp(v, "N/A"))
            continue;
        if (c->kind == COL_CPUAFF) {
            if (!nvsmi_cpulist_ok(v, NVSMI_MAX_CPU, NULL))
                return p3d_err(err,
                               "%s:%d: row %s, CPU Affinity '%s' (expected a CPU list "
                               "such as 0-19,40-59 with ranges low-high and CPUs up to %d, or N/A)",
                               ps->path, line, ps->cols[r].name, v, NVSMI_MAX_CPU);
            row->cpus = strdup(v);
            if (!row->cpus)
                return p3d_err(err, "%s: out of memory", ps->path);
        } else if (c->kind == COL_NUMAAFF) {
            /* One node normally; a list ("0-1") when the GPU is equally
             * close to several: keep the lowest, as hwloc sources do. */
            if (!nvsmi_cpulist_ok(v, NVSMI_MAX_NUMA, &row->numa))
                return p3d_err(err,
                               "%s:%d: row %s, NUMA Affinity '%s' (expected a NUMA node "
                               "number 0..%d, a list, or N/A)",
                               ps->path, line, ps->cols[r].name, v, NVSMI_MAX_NUMA);
            row->numa_multi = strspn(v, "0123456789") != strlen(v);
        } else if (c->kind == COL_GPUNUMA && !nvsmi_cpulist_ok(v, NVSMI_MAX_NUMA, NULL)) {
            return p3d_err(err, "%s:%d: row %s, GPU NUMA ID '%s' (expected a NUMA node number 0..%d, or N/A)", ps->path,
                           line, ps->cols[r].name, v, NVSMI_MAX_NUMA);
        }
        /* GPU NUMA ID is the GPU memory's own NUMA node on coherent
         * systems (Grace Hopper/Blackwell); the placement needs the CPU
         * side, so it is not used. */
    }
    return 0;
}

/* "  NIC0: mlx5_0" below "NIC Legend:" renames matrix column NIC0. */
static int apply_nic_legend(nv_parse *ps, char **tok, int nt, int line, char **err)
{
    if (nt != 2)
        return 0;
    size_t l = strlen(tok[0]);
    if (l < 2 || tok[0][l - 1] != ':')
        return 0;
    tok[0][l - 1] = 0;
    for (int j = ps->ngpu; j < ps->nmat; j++) {
        if (strcmp(ps->cols[j].name, tok[0]))
            continue;
        if (!nvsmi_nic_label_ok(tok[1]))
            return p3d_err(err, "%s:%d: NIC Legend gives '%s' for %s (not a device name)", ps->path, line, tok[1],
                           tok[0]);
        snprintf(ps->cols[j].name, sizeof ps->cols[j].name, "%s", tok[1]);
        return 0;
    }
    return 0;
}

/* Cross-checks the two halves of the matrix: nvidia-smi prints it
 * symmetric, so a mismatch means a damaged file, not hardware. */
static int check_symmetry(const nv_parse *ps, char **err)
{
    for (int i = 0; i < ps->nmat; i++) {
        if (!ps->rows[i].line) {
            if (i < ps->ngpu)
                return p3d_err(err, "%s: no row for %s (the header on line %d lists it)", ps->path, ps->cols[i].name,
                               ps->header_line);
            continue; /* a NIC row may be missing: the GPU rows hold GPU<->NIC */
        }
        for (int j = 0; j < i; j++) {
            const nv_row *a = &ps->rows[j], *b = &ps->rows[i];
            if (!a->line || (i >= ps->ngpu && j >= ps->ngpu))
                continue; /* NIC<->NIC cells are not used */
            if (a->cls[i] != b->cls[j] || a->nv[i] != b->nv[j]) {
                char ca[16], cb[16];
                if (a->cls[i] == P3D_LINK_NVLINK)
                    snprintf(ca, sizeof ca, "NV%d", a->nv[i]);
                else
                    snprintf(ca, sizeof ca, "%s", p3d_link_name(a->cls[i]));
                if (b->cls[j] == P3D_LINK_NVLINK)
                    snprintf(cb, sizeof cb, "NV%d", b->nv[j]);
                else
                    snprintf(cb, sizeof cb, "%s", p3d_link_name(b->cls[j]));
                return p3d_err(err,
                               "%s:%d: asymmetric matrix: row %s says %s for %s, but row "
                               "%s (line %d) says %s",
                               ps->path, b->line, ps->cols[i].name, cb, ps->cols[j].name, ps->cols[j].name, a->line,
                               ca);
            }
        }
    }
    return 0;
}

static int build_node(nv_parse *ps, p3d_node **out, char **err)
{
    int rc = -1;
    p3d_node *n = NULL;
    int *nic_of_col = NULL; /* matrix column -> index in n->nics */
    int *order = NULL;
    int ng = ps->ngpu, nn = ps->nnic;

    n = p3d_node_new(NULL, ps->path, "nvidia-smi");
    nic_of_col = calloc((size_t)ps->nmat + 1, sizeof *nic_of_col);
    order = calloc((size_t)nn + 1, sizeof *order);
    if (!n || !nic_of_col || !order) {
        p3d_err(err, "%s: out of memory", ps->path);
        goto out;
    }
    if (p3d_node_alloc(n, ng, nn, err) < 0)
        goto out;

    /* NICs in natural name order (insertion sort: a handful of entries). */
    for (int k = 0; k < nn; k++) {
        int c = ps->ngpu + k, pos = k;
        while (pos > 0 && nvsmi_natural_cmp(ps->cols[order[pos - 1]].name, ps->cols[c].name) > 0) {
            order[pos] = order[pos - 1];
            pos--;
        }
        order[pos] = c;
    }
    for (int k = 0; k < nn; k++) {
        const nv_col *c = &ps->cols[order[k]];
        for (int m = 0; m < k; m++)
            if (!strcmp(n->nics[m].name, c->name)) {
                p3d_err(err, "%s: NIC '%s' appears twice (after the NIC Legend)", ps->path, c->name);
                goto out;
            }
        nic_of_col[order[k]] = k;
        snprintf(n->nics[k].name, sizeof n->nics[k].name, "%s", c->name);
        snprintf(n->nics[k].kind, sizeof n->nics[k].kind, "%s", nvsmi_nic_kind(c->name));
        n->nics[k].pci[0] = 0;
        n->nics[k].numa = -1;
    }

    int have_numa = 0, have_nv = 0;
    for (int g = 0; g < ng; g++) {
        nv_row *row = &ps->rows[g];
        p3d_gpu *gpu = &n->gpus[g];
        gpu->index = gpu->phys = g;
        gpu->numa = row->numa;
        have_numa |= row->numa >= 0;
        if (row->numa_multi)
            p3d_node_note(n, "GPU%d: NUMA Affinity lists several nodes; using %d", g, row->numa);
        gpu->cpus = row->cpus; /* ownership moves to the node */
        row->cpus = NULL;
        for (int h = 0; h < ng; h++) {
            n->gg_class[g * ng + h] = row->cls[h];
            n->nvlink[g * ng + h] = row->nv[h] * NVSMI_GBPS_PER_LINK;
            have_nv |= row->nv[h] > 0;
        }
        for (int c = ng; c < ps->nmat; c++)
            n->gn_class[g * nn + nic_of_col[c]] = row->cls[c];
    }
    /* A NIC's NUMA node is that of any GPU it reaches without crossing the
     * SMP interconnect (PIX..NODE all stay inside one NUMA node); a NIC
     * that is SYS to every GPU keeps -1. */
    for (int k = 0; k < nn; k++)
        for (int g = 0; g < ng && n->nics[k].numa < 0; g++)
            if (n->gpus[g].numa >= 0 && n->gn_class[g * nn + k] <= P3D_LINK_NODE)
                n->nics[k].numa = n->gpus[g].numa;

    p3d_node_note(n,
                  "read from nvidia-smi topo text: NV# counted as %g GB/s per link "
                  "per direction; PCI ids, GPU models and package numbers are not in "
                  "this text",
                  NVSMI_GBPS_PER_LINK);
    if (!have_numa)
        p3d_node_note(n, "no NUMA Affinity column: NUMA nodes unknown");
    if (!have_nv && ng > 1)
        p3d_node_note(n, "no NV# cells: no NVLink, or a PCIe-only view (topo -mp)");

    if (p3d_node_finish(n, err) < 0)
        goto out;
    *out = n;
    n = NULL;
    rc = 0;
out:
    p3d_node_free(n);
    free(nic_of_col);
    free(order);
    return rc;
}

/* The last line before the header that was not a comment, in case it was
 * a broken header. */
typedef struct nv_before {
    int line;      /* 0: none */
    char text[48]; /* its first characters, for the message */
} nv_before;

/* A line before the header: the header itself (returns 1), a GPU row too
 * early (an error), or anything else (a title, a pasted prompt: ignored,
 * but remembered in *before). */
static int read_pre_header(nv_parse *ps, char **tok, int nt, int line, const char *keep, nv_before *before, char **err)
{
    if (!strcmp(tok[0], "GPU0") && (nt == 1 || nvsmi_cell_class(tok[1]) < 0))
        return parse_header(ps, tok, nt, line, err) < 0 ? -1 : 1;
    if (nvsmi_gpu_label(tok[0]) >= 0 && nt >= 2 && nvsmi_cell_class(tok[1]) >= 0) {
        if (before->line)
            return p3d_err(err,
                           "%s:%d: mangled header '%s%s' (expected the column names "
                           "GPU0 GPU1 ... CPU Affinity above the first GPU row)",
                           ps->path, before->line, before->text,
                           strlen(before->text) >= sizeof before->text - 1 ? "..." : "");
        return p3d_err(err,
                       "%s:%d: GPU row before any header line (expected the "
                       "column names GPU0 GPU1 ... first)",
                       ps->path, line);
    }
    before->line = line;
    snprintf(before->text, sizeof before->text, "%s", keep);
    for (char *q = before->text; *q; q++)
        if (*q == '\t')
            *q = ' ';
    return 0;
}

/* A row of the matrix, labelled by a column of the header. */
static int read_row(nv_parse *ps, char **tok, int nt, int line, char **err)
{
    int r = -1;
    for (int j = 0; j < ps->nmat; j++)
        if (!strcmp(ps->cols[j].name, tok[0])) {
            r = j;
            break;
        }
    if (r < 0)
        return p3d_err(err,
                       "%s:%d: row label '%s' is not a GPU or NIC column of the header "
                       "on line %d",
                       ps->path, line, tok[0], ps->header_line);
    if (nt > ps->tokcap)
        return p3d_err(err, "%s:%d: row %s has too many fields", ps->path, line, tok[0]);
    return parse_row(ps, r, tok, nt, line, err);
}

/* Room in ps->tok for the fields of a line of len characters. */
static int grow_tokens(nv_parse *ps, size_t len, char **err)
{
    if ((int)(len / 2 + 2) > ps->tokcap) {
        int cap = (int)(len / 2 + 2);
        char **t = realloc(ps->tok, (size_t)cap * sizeof *t);
        if (!t)
            return p3d_err(err, "%s: out of memory", ps->path);
        ps->tok = t;
        ps->tokcap = cap;
    }
    return 0;
}

int p3d_topo_parse_nvsmi(const char *path, const char *text, p3d_node **out, char **err)
{
    int rc = -1;
    nv_parse ps = {.path = path ? path : "(text)"};
    enum { PRE, ROWS, LEGEND, NIC_LEGEND } state = PRE;
    nv_before before = {0};

    *out = NULL;
    if (!text)
        return p3d_err(err, "%s: no text", ps.path);
    ps.buf = strdup(text);
    ps.tokcap = 64;
    ps.tok = malloc((size_t)ps.tokcap * sizeof *ps.tok);
    if (!ps.buf || !ps.tok) {
        p3d_err(err, "%s: out of memory", ps.path);
        goto out;
    }

    int line = 0;
    for (char *p = ps.buf, *next; p; p = next) {
        line++;
        next = strchr(p, '\n');
        if (next)
            *next++ = 0;
        size_t len = strlen(p);
        if (len && p[len - 1] == '\r')
            p[--len] = 0;
        if (grow_tokens(&ps, len, err) < 0)
            goto out;
        char keep[48];
        snprintf(keep, sizeof keep, "%s", p);
        int nt = nvsmi_split_ws(p, ps.tok, ps.tokcap);
        char **tok = ps.tok;
        if (nt == 0 || nvsmi_is_comment(tok[0]))
            continue;
        if (!strcmp(tok[0], "Legend:") || (nt >= 2 && !strcmp(tok[0], "NIC") && !strcmp(tok[1], "Legend:"))) {
            if (state == PRE)
                break; /* no header: reported below */
            state = strcmp(tok[0], "NIC") ? LEGEND : NIC_LEGEND;
            continue;
        }
        int got = 0;
        if (state == NIC_LEGEND)
            got = apply_nic_legend(&ps, tok, nt, line, err);
        else if (state == PRE)
            got = read_pre_header(&ps, tok, nt, line, keep, &before, err);
        else if (state == ROWS)
            got = read_row(&ps, tok, nt, line, err);
        if (got < 0)
            goto out;
        if (state == PRE && got == 1)
            state = ROWS;
    }
    if (state == PRE) {
        p3d_err(err,
                "%s: not an nvidia-smi topo -m text: no header line starting with "
                "GPU0 (and no GPU rows)%s",
                ps.path, text[strspn(text, " \t\r\n")] ? "" : " (the file is empty)");
        goto out;
    }
    if (check_symmetry(&ps, err) < 0)
        goto out;
    rc = build_node(&ps, out, err);
out:
    nv_parse_free(&ps);
    return rc;
}
