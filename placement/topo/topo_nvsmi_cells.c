/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * topo_nvsmi_cells.c — the words of an `nvidia-smi topo -m` table: how a
 * line splits into cells, what a cell, a GPU or NIC label, and an affinity
 * list may be. topo_nvsmi.c builds the node from them.
 */
#include "topo_internal.h"
#include "topo_nvsmi.h"

#include <ctype.h>
#include <stdlib.h>
#include <string.h>

/* Splits line in place at tabs and spaces; *tok gets up to cap pointers.
 * Returns the number of tokens (may exceed cap: then only cap are stored). */
int nvsmi_split_ws(char *line, char **tok, int cap)
{
    int n = 0;
    char *p = line;
    for (;;) {
        while (*p == ' ' || *p == '\t')
            p++;
        if (!*p)
            break;
        if (n < cap)
            tok[n] = p;
        n++;
        while (*p && *p != ' ' && *p != '\t')
            p++;
        if (*p)
            *p++ = 0;
    }
    return n;
}

/* A cell of the matrix: X, NV#, PIX, PXB, PHB, NODE, SYS (SOC: what drivers
 * before ~R384 printed for SYS). p3d_link_parse also knows our own network
 * classes (RACK, ...), which nvidia-smi never prints: refused here. */
int nvsmi_cell_class(const char *s)
{
    if (!strcmp(s, "SOC"))
        return P3D_LINK_SYS;
    int l = p3d_link_parse(s);
    if (l == P3D_LINK_SELF || l == P3D_LINK_NVLINK || (l >= P3D_LINK_PIX && l <= P3D_LINK_SYS))
        return l;
    return -1;
}

/* "NV12" -> 12 (1..999), else -1. */
int nvsmi_nv_links(const char *s)
{
    if (strncmp(s, "NV", 2) || !s[2] || strlen(s) > 5 || strspn(s + 2, "0123456789") != strlen(s + 2))
        return -1;
    int v = atoi(s + 2);
    return v >= 1 ? v : -1;
}

/* "GPU12" -> 12, else -1 ("GPU", "GPU1x", "GPU0GPU1" are not GPU labels). */
int nvsmi_gpu_label(const char *s)
{
    if (strncmp(s, "GPU", 3) || !s[3] || strlen(s) > 7)
        return -1;
    for (const char *p = s + 3; *p; p++)
        if (!isdigit((unsigned char)*p))
            return -1;
    return atoi(s + 3);
}

/* A NIC column name as nvidia-smi prints it: an RDMA/net device name
 * ("mlx5_0", "NIC3", "efa0", "bnxt_re1"). Link-class words and words of the
 * affinity columns are refused so that a header merged with a row, or
 * broken mid-word, is reported instead of read as NIC names. */
int nvsmi_nic_label_ok(const char *s)
{
    static const char *const reserved[] = {"X", "CPU", "NUMA", "Affinity", "ID", "GPU", "Legend:"};
    size_t len = strlen(s);
    if (len == 0 || len >= NVSMI_NAME_LEN)
        return 0;
    if (!isalpha((unsigned char)s[0]))
        return 0;
    for (const char *p = s; *p; p++)
        if (!isalnum((unsigned char)*p) && *p != '_' && *p != '-' && *p != '.' && *p != ':')
            return 0;
    for (size_t i = 0; i < sizeof reserved / sizeof reserved[0]; i++)
        if (!strcmp(s, reserved[i]))
            return 0;
    if (nvsmi_cell_class(s) >= 0 || !strncmp(s, "GPU", 3) || !strncmp(s, "Affinit", 7))
        return 0;
    return 1;
}

const char *nvsmi_nic_kind(const char *name)
{
    if (!strncmp(name, "mlx", 3) || !strncmp(name, "ib", 2) || !strncmp(name, "hfi", 3) || !strncmp(name, "qib", 3))
        return "ib";
    if (!strncmp(name, "efa", 3))
        return "efa";
    if (!strncmp(name, "eth", 3) || !strncmp(name, "en", 2) || !strncmp(name, "bnxt", 4) || !strncmp(name, "irdma", 5))
        return "eth";
    return "other";
}

/* Natural order: "mlx5_2" < "mlx5_10". Used to number NICs, because the
 * text's column order is not PCI order (DGX-1 prints mlx5_0, mlx5_2, ...). */
int nvsmi_natural_cmp(const char *a, const char *b)
{
    while (*a && *b) {
        if (isdigit((unsigned char)*a) && isdigit((unsigned char)*b)) {
            char *ea, *eb;
            unsigned long va = strtoul(a, &ea, 10), vb = strtoul(b, &eb, 10);
            if (va != vb)
                return va < vb ? -1 : 1;
            a = ea;
            b = eb;
            continue;
        }
        if (*a != *b)
            return (unsigned char)*a < (unsigned char)*b ? -1 : 1;
        a++;
        b++;
    }
    return *a ? 1 : *b ? -1 : 0;
}

/* A list as the kernel prints cpulists: "0-19,40-59", items a or a-b with
 * a <= b <= max, decimal, no empty items. *lowest gets the first number.
 * Every number in the table's affinity columns goes through here, so no
 * value can overflow an int or be read as a different one. */
int nvsmi_cpulist_ok(const char *s, long max, int *lowest)
{
    const char *p = s;
    long low = -1;
    for (;;) {
        long a = 0, b;
        if (!isdigit((unsigned char)*p))
            return 0;
        for (; isdigit((unsigned char)*p); p++)
            if ((a = a * 10 + (*p - '0')) > max)
                return 0;
        b = a;
        if (*p == '-') {
            p++;
            if (!isdigit((unsigned char)*p))
                return 0;
            for (b = 0; isdigit((unsigned char)*p); p++)
                if ((b = b * 10 + (*p - '0')) > max)
                    return 0;
            if (b < a)
                return 0;
        }
        if (low < 0)
            low = a;
        if (!*p)
            break;
        if (*p++ != ',')
            return 0;
    }
    if (lowest)
        *lowest = (int)low;
    return 1;
}

/* Skips a line that is a comment in our fixtures or a pasted shell prompt. */
int nvsmi_is_comment(const char *first_tok)
{
    return first_tok[0] == '#' || first_tok[0] == '$';
}

int p3d_topo_looks_nvsmi(const char *text)
{
    if (!text)
        return 0;
    const char *p = text;
    while (*p) {
        const char *e = strchr(p, '\n');
        size_t len = e ? (size_t)(e - p) : strlen(p);
        /* A "GPU0  X" row is unmistakable; look for it on the first 4 KiB
         * of each line only (rows are short). */
        char buf[64];
        size_t k = len < sizeof buf - 1 ? len : sizeof buf - 1;
        memcpy(buf, p, k);
        buf[k] = 0;
        char *tok[2];
        int nt = nvsmi_split_ws(buf, tok, 2);
        if (nt >= 2 && !strcmp(tok[0], "GPU0") && !strcmp(tok[1], "X"))
            return 1;
        if (!e)
            break;
        p = e + 1;
    }
    return 0;
}
