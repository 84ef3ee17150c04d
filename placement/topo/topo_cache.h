/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * topo_cache.h — private: the local topology cache (topo_cache.c: settings,
 * directory and entries; topo_cache_key.c: the key; topo_cache_record.c:
 * the record as text) and the hooks of live discovery that use it
 * (topo_hwloc.c). Not installed.
 *
 * What is cached is the node record as hwloc's discovery leaves it, before
 * anything that can change while the machine stays the same is added: the
 * NVML plugin (NVLink link state, fabric clique), the notes, the derived
 * fields of p3d_node_finish() and the allocation from the environment
 * (p3d_node_apply_allocation, CUDA_VISIBLE_DEVICES and Slurm's GPU
 * variables) are redone on every load, hit or miss.
 *
 * An entry is reused only when its whole key matches the key computed now:
 * boot id, hwloc's API version and library file, the PCI device list
 * (address, vendor, device, NUMA node, driver), this process's allowed CPUs
 * and memory nodes, the
 * HWLOC_* environment, the host name, par3drun's version and the entry
 * format. docs/topology.md ("The topology cache") is the user-facing story.
 */
#ifndef P3D_TOPO_CACHE_H
#define P3D_TOPO_CACHE_H

#include "topo_internal.h"

struct p3d_sb;

/* Bump whenever what discovery puts in the record, or how it is written,
 * changes: par3drun's version alone does not move between commits. */
#define TOPO_CACHE_FORMAT 2

/* The key's components, each as text (no spaces or newlines: escaped).
 * Gathered from the running system by p3d_topo_key_gather(); the unit test
 * changes one at a time. Free with p3d_topo_key_clear(). */
typedef struct p3d_topo_key {
    char *boot_id;      /* /proc/sys/kernel/random/boot_id */
    unsigned hwloc_api; /* hwloc_get_api_version() */
    char *hwloc_lib;    /* the loaded libhwloc: "path:size:mtime" */
    char *version;      /* P3D_VERSION */
    char *host;         /* gethostname() */
    char *cpus;         /* sched_getaffinity() as a list "0-15,32" */
    char *mems;         /* Mems_allowed_list of /proc/self/status */
    char *pci;          /* "BDF:VENDOR_DEVICE:numa:driver" joined by ',' */
    char *env;          /* HWLOC_*=value, sorted, joined by ',' ("-": none) */
} p3d_topo_key;

/* Reads every component. root prefixes the /proc and /sys paths ("" for
 * the real ones; a test points it at a fake tree). Returns 0, or -1 with
 * *err when a component cannot be read (then the cache is not used). */
int p3d_topo_key_gather(p3d_topo_key *k, const char *root, char **err);
/* The key as the lines an entry starts with ("key NAME VALUE\n" each).
 * Caller frees; NULL when out of memory. */
char *p3d_topo_key_text(const p3d_topo_key *k);
void p3d_topo_key_clear(p3d_topo_key *k);

/* Appends s to b as one field of an entry (topo_cache_record.c): %XX for
 * space, control bytes, '%' and non-ASCII, "-" for NULL or empty. Shared
 * by the key lines and the record. */
void p3d_cache_record_put_esc(struct p3d_sb *b, const char *s);

/* What hwloc's discovery found that the record itself does not say and the
 * completion step needs (notes). */
typedef struct p3d_topo_extra {
    int had_matrix; /* hwloc supplied an NVLinkBandwidth matrix */
    int namd;       /* AMD GPUs seen and not placed */
} p3d_topo_extra;

/* The raw record (after discovery, before p3d_node_finish) as text, and
 * back. decode validates every field; on failure it returns -1 with *why
 * ("line 7: expected 9 fields"). hostname/source are not part of it. */
char *p3d_topo_raw_encode(const p3d_node *n, const p3d_topo_extra *x);
int p3d_topo_raw_decode(const char *text, p3d_node **out, p3d_topo_extra *x, char **why);

/* Whether this process uses the cache (p3d_topo_cache_configure, else
 * P3D_TOPO_CACHE), and whether it says what it does (--verbose). */
int p3d_topo_cache_wanted(void);
int p3d_topo_cache_verbose(void);

/* The cache directory: P3D_TOPO_CACHE_DIR, else /var/cache/par3drun for
 * root, else $XDG_CACHE_HOME/par3drun, else $HOME/.cache/par3drun. NULL
 * when none can be named (no HOME). Caller frees. */
char *p3d_topo_cache_dir(void);

/* Looks up key (p3d_topo_key_text) in the cache. 1: *raw is the cached
 * record (caller frees), 0: nothing usable — absent, or an entry that is
 * corrupt, truncated, a symlink, not ours, or of another key, which is said
 * in one line on stderr and left for p3d_topo_cache_store to replace. */
int p3d_topo_cache_lookup(const char *key, p3d_node **raw, p3d_topo_extra *x);
/* Writes the entry for key atomically (a new file O_EXCL | O_NOFOLLOW
 * under a random name, renamed over the old one). Failures only matter to
 * the next run: said with --verbose, never fatal. */
void p3d_topo_cache_store(const char *key, const char *raw_text);

/* The directory entry name for key ("topo-HOST-16HEX"), for messages and
 * tests. Caller frees. */
char *p3d_topo_cache_name(const char *key);

/* Test hook of topo_hwloc.c: an XML loaded with or without the type
 * filters live discovery uses (trim), before p3d_node_finish, so a test can
 * show they change nothing the record holds. */
int p3d_topo_hwloc_xml_raw(const char *path, const char *text, size_t len, int trim, p3d_node **out, p3d_topo_extra *x,
                           char **err);
/* The same for live discovery (no cache involved). */
int p3d_topo_hwloc_local_raw(int trim, p3d_node **out, p3d_topo_extra *x, char **err);

#endif
