/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * slurm_topo.h — a Slurm topology as read from either file Slurm uses:
 * topology.conf (slurm_conf.c: one tree or one block topology) and
 * topology.yaml (slurm_yaml.c: a list of named topologies). Both readers
 * fill the same structure and cluster_slurm.c is the one applier that puts
 * it onto a cluster (docs/cluster-file.md, "Slurm topology"). Private to
 * placement/cluster.
 */
#ifndef P3D_SLURM_TOPO_H
#define P3D_SLURM_TOPO_H

#include <stddef.h>

#include "p3d/cluster.h"

enum { P3D_ST_TREE = 1, P3D_ST_BLOCK = 2, P3D_ST_FLAT = 3 };

typedef struct p3d_st_ent { /* a switch (tree) or a block */
    char *name;
    char *nodes;    /* hostlist, or NULL */
    char *children; /* tree: child switches (hostlist), or NULL */
    size_t line;    /* where its name is */
} p3d_st_ent;

typedef struct p3d_st_topo {
    char *name; /* topology.yaml's name; NULL from a topology.conf */
    size_t line;
    int kind; /* P3D_ST_* */
    int cluster_default;
    p3d_st_ent *ents;
    size_t nents;
    /* how the file spells things, for messages: "Nodes=" / "nodes",
     * "Switches=" / "children", "SwitchName= line" / "'switch:' entry" */
    const char *nodes_key, *children_key, *switch_def;
} p3d_st_topo;

/* Frees n topologies and their entries (t may be NULL). */
void p3d_st_free(p3d_st_topo *t, size_t n);

/* Reads buf (NUL-terminated text of path; cut in place) as a topology.conf:
 * SwitchName= lines (topology/tree) or BlockName= and BlockSizes= lines
 * (topology/block), never both. Unknown keys are warnings on c. Returns 0
 * with *out (one topology, caller frees with p3d_st_free(*out, 1)), or -1
 * with *err naming path:line. */
int p3d_slurm_conf_parse(p3d_cluster *c, const char *path, char *buf, p3d_st_topo **out, char **err);

/* Reads buf (NUL-terminated, from path) as a topology.yaml through libyaml:
 * a list of topologies, each with `topology`, optional `cluster_default`
 * and exactly one of `tree` (switches: switch/children/nodes), `block`
 * (block_sizes, blocks: block/nodes) or `flat`. Unknown keys are warnings
 * on c; anchors, aliases, tags, duplicate keys, several documents and
 * nesting past a bound are errors naming path:line. Returns 0 with *out
 * and *n (caller frees with p3d_st_free), or -1 with *err. */
int p3d_slurm_yaml_parse(p3d_cluster *c, const char *path, const char *buf, p3d_st_topo **out, size_t *n, char **err);

/* Whether text looks like a topology.yaml rather than a topology.conf: its
 * first line that is not blank or a comment starts with '-' or "---". */
int p3d_slurm_yaml_sniff(const char *buf);

#endif
