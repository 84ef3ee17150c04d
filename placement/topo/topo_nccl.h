/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * topo_nccl.h — the NCCL topology XML reader (topo_nccl_xml.c) and its
 * attribute values (topo_nccl_attr.c), shared with the part that builds the
 * node record from them (topo_nccl.c); private to placement/topo.
 *
 * The document (read by libxml2's streaming reader) goes into two arrays: elements in document order
 * (a tree by parent index, so a parent always comes before its children)
 * and every element's attributes, decoded. Every refusal is one line that
 * names file:line and what was expected, handed over in *err.
 */
#ifndef P3D_TOPO_NCCL_H
#define P3D_TOPO_NCCL_H

#include <stddef.h>
#include <stdint.h>

/* Real files are a few KB (an 8-GPU dump with NVSwitch links: 11 KB). */
#define NX_MAX_BYTES ((size_t)1 << 20)
#define NX_MAX_DEPTH 32
#define NX_MAX_ELEMENTS 65536
#define NX_MAX_ATTRS 32
#define NX_MAX_VALUE 1024
#define NX_MAX_CPUS 8192
#define NX_MAX_LINKS 64 /* NVLinks of one GPU to one target (H100: 18 in all) */

typedef struct nx_attr {
    char *name; /* malloc'd */
    size_t nlen;
    char *val; /* decoded, NUL-terminated, malloc'd */
    int line;
} nx_attr;

typedef struct nx_el {
    char *name; /* malloc'd */
    size_t nlen;
    int line, parent, depth;
    int attr0, nattr;
} nx_el;

typedef struct nx_doc {
    const char *path, *text, *end;
    nx_el *el;
    int nel, capel;
    nx_attr *at;
    int nat, capat;
    const struct p3d_xmllib *xml; /* set by p3d_nccl_xml_parse (topo_xml.h) */
} nx_doc;

/* ---- the XML reader (topo_nccl_xml.c) ---- */

/* Frees what p3d_nccl_xml_parse() stored in d and zeroes it. */
void p3d_nccl_xml_free(nx_doc *d);

/* Reads the whole document d->text .. d->end into d->el / d->at; d->path
 * names the file in messages. 0, or -1 with *err; either way the caller
 * frees d with p3d_nccl_xml_free(). */
int p3d_nccl_xml_parse(nx_doc *d, char **err);

/* 1 when element e is named s, else 0. */
int p3d_nccl_xml_is_name(const nx_el *e, const char *s);

/* Attribute name of element e, or NULL when e has none by that name. */
const nx_attr *p3d_nccl_xml_get(nx_doc *d, const nx_el *e, const char *name);

/* ---- attribute values (topo_nccl_attr.c) ---- */

/* Each returns 0, or -1 with one line in *err naming file:line, element,
 * attribute, the value and want (what was expected). */

/* -1 with that line for attribute a of e: the value is not want. */
int p3d_nccl_attr_bad_val(nx_doc *d, const nx_el *e, const nx_attr *a, const char *want, char **err);

/* *out = attribute attr of e; -1 when e has none. */
int p3d_nccl_attr_need(nx_doc *d, const nx_el *e, const char *attr, const char *want, const nx_attr **out, char **err);

/* A decimal integer in [lo, hi]. */
int p3d_nccl_attr_dec(nx_doc *d, const nx_el *e, const nx_attr *a, long lo, long hi, const char *want, long *out,
                      char **err);

/* "0x030200" (up to 8 hex digits). */
int p3d_nccl_attr_hex(nx_doc *d, const nx_el *e, const nx_attr *a, const char *want, unsigned long *out, char **err);

/* These three take the text alone and say nothing: the caller names it. */

/* "0000:0c:00.0" -> a sortable key and the lower-case canonical text;
 * 0, or -1 when malformed. */
int p3d_nccl_attr_busid(const char *s, uint64_t *key, char canon[32]);

/* A Linux cpumask ("0000ffff,0000ffff") into bits[NX_MAX_CPUS/8]; 0, or -1
 * when malformed or too wide. */
int p3d_nccl_attr_mask(const char *s, unsigned char *bits);

/* The CPUs of bits as a list "0-23,48-71", *count their number; NULL when
 * there is none or out of memory. Caller frees. */
char *p3d_nccl_attr_mask_list(const unsigned char *bits, int *count);

#endif
