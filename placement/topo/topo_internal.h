/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * topo_internal.h — private interface between the topology sources
 * (topo_hwloc.c, topo_nvsmi.c, the NVML augment) and the node record
 * (node.c). Not installed; only placement/ and tests include it.
 *
 * How a source builds a node: p3d_node_new() an empty record, fill the raw
 * facts (gpus[] in PCI bus order, nics[], the NVLink matrix, gg_class and
 * gn_class), then call p3d_node_finish() which validates and derives the
 * rest (domains, nearest NIC, notes, hash). The helpers below do the memory
 * bookkeeping so every source stays about facts.
 */
#ifndef P3D_TOPO_INTERNAL_H
#define P3D_TOPO_INTERNAL_H

#include "p3d/p3d.h"

/* A fresh, empty node (all counts 0, numeric fields -1 where "unknown" is
 * -1). hostname/source/source_kind are copied when not NULL. Returns NULL
 * only when out of memory. Caller frees with p3d_node_free(). */
p3d_node *p3d_node_new(const char *hostname, const char *source, const char *source_kind);

/* Sets the GPU and NIC counts and allocates gpus[], nics[], nvlink (zeros),
 * gg_class and gn_class (filled with P3D_LINK_SYS, diagonal P3D_LINK_SELF).
 * Every GPU starts with index = position, numa/package/nearest_nic/domain
 * = -1. Call once per node. Returns 0 or -1 with *err. */
int p3d_node_alloc(p3d_node *n, int ngpus, int nnics, char **err);

/* Appends one line to n->notes (copied). */
void p3d_node_note(p3d_node *n, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* Validates an NVLink matrix of k*k GB/s values (finite, non-negative,
 * symmetric within 1e-6 relative, zero diagonal ignored). what names the
 * source in the message ("file.xml: NVLinkBandwidth"). */
int p3d_nvlink_validate(const double *m, int k, const char *what, char **err);

/* The sources. Each builds a complete node (p3d_node_finish called) or fails
 * with a one-line message naming path. */

/* `nvidia-smi topo -m` text already read into memory (topo_nvsmi.c). path is
 * only used in messages and as n->source. */
int p3d_topo_parse_nvsmi(const char *path, const char *text, p3d_node **out, char **err);

/* 1 when text looks like `nvidia-smi topo -m`/`-mp` output (a "GPU0 ... X"
 * row), 0 otherwise; a mangled header still counts, so the parser can name
 * the bad line (topo_nvsmi.c). */
int p3d_topo_looks_nvsmi(const char *text);

/* NCCL's topology XML (NCCL_TOPO_FILE / NCCL_TOPO_DUMP_FILE), text of len
 * bytes (topo_nccl.c). augment: let the NVML plugin fill NVLink in when the
 * file has none (on the machine itself). */
int p3d_topo_parse_nccl(const char *path, const char *text, size_t len, int augment, p3d_node **out, char **err);

/* 1 when the XML's root element is <system> (NCCL's format), 0 otherwise. */
int p3d_topo_looks_nccl(const char *text, size_t len);

/* hwloc: live discovery ("local"), an XML file, or a synthetic description
 * (topo_hwloc.c). For XML, text holds the file (NUL-terminated, len bytes
 * without the NUL) and the caller has already run p3d_topo_xml_check() and
 * p3d_topo_xml_probe(). */
int p3d_topo_hwloc_local(p3d_node **out, char **err);
int p3d_topo_hwloc_xml_buffer(const char *path, const char *text, size_t len, p3d_node **out, char **err);
int p3d_topo_hwloc_synthetic(const char *desc, p3d_node **out, char **err);

/* Checks that an hwloc XML text will not crash hwloc 2.9 (topo_xmlcheck.c):
 * well-formed enough, <topology version="2.x">, and every CPU-side object
 * carries complete_cpuset / complete_nodeset. path names the file. */
int p3d_topo_xml_check(const char *path, const char *text, size_t len, char **err);

/* Loads the XML with hwloc in a child process first (topo_xmlcheck.c), so
 * an input that still crashes or hangs hwloc becomes an error message, not a
 * dead par3drun. */
int p3d_topo_xml_probe(const char *path, const char *text, size_t len, char **err);

/* Runs the "nvml" topology source plugin (plugins/nvml/ builds
 * p3d_topo_nvml.so; found by the plugin registry, p3d/plugin.h) on a "local"
 * node (topo_load.c). Returns 1 when it filled something, else 0: absent,
 * declined, or failed (a warning on stderr says why). Never fails the load. */
int p3d_topo_nvml_augment(p3d_node *n);

/* Link class name -> p3d_link ("PIX", "NV12" -> NVLINK, "X" -> SELF);
 * -1 when unknown. Shared by the text parser and tests. */
int p3d_link_parse(const char *s);

#endif
