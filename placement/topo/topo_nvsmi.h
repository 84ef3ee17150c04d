/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * topo_nvsmi.h — the lexical helpers of the `nvidia-smi topo -m` reader
 * (topo_nvsmi_cells.c), shared with the table parser (topo_nvsmi.c);
 * private to placement/topo.
 */
#ifndef P3D_TOPO_NVSMI_H
#define P3D_TOPO_NVSMI_H

/* Longest column name kept, NUL included (NIC names are shorter). */
#define NVSMI_NAME_LEN 32

/* Largest CPU and NUMA numbers Linux can have (NR_CPUS, MAX_NUMNODES). */
#define NVSMI_MAX_CPU 8191
#define NVSMI_MAX_NUMA 1023

/* Splits line in place at tabs and spaces; tok gets up to cap pointers
 * into line. Returns the number of tokens (may exceed cap: then only cap
 * are stored). */
int nvsmi_split_ws(char *line, char **tok, int cap);

/* The link class of a matrix cell (X, NV#, PIX ... SYS, SOC), -1 if it is
 * none nvidia-smi prints. */
int nvsmi_cell_class(const char *s);

/* "NV12" -> 12 (1..999), else -1. */
int nvsmi_nv_links(const char *s);

/* "GPU12" -> 12, else -1. */
int nvsmi_gpu_label(const char *s);

/* 1 when s can be a NIC column name (and is no reserved word), else 0. */
int nvsmi_nic_label_ok(const char *s);

/* "ib", "efa", "eth" or "other" for a NIC device name (static string). */
const char *nvsmi_nic_kind(const char *name);

/* Natural order of two names: "mlx5_2" < "mlx5_10"; <0, 0 or >0. */
int nvsmi_natural_cmp(const char *a, const char *b);

/* 1 when s is a kernel cpulist ("0-19,40-59") with every number <= max,
 * *lowest (when not NULL) getting its first number; else 0. */
int nvsmi_cpulist_ok(const char *s, long max, int *lowest);

/* 1 when a line starting with this token is a comment or a shell prompt. */
int nvsmi_is_comment(const char *first_tok);

#endif
