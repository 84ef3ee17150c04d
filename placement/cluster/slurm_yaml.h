/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * slurm_yaml.h — Slurm's topology.yaml (Slurm 24.11+ multi-topology file),
 * read into the switches/blocks that cluster_slurm.c applies exactly as it
 * applies a topology.conf (docs/cluster-file.md, "Slurm topology").
 */
#ifndef P3D_SLURM_YAML_H
#define P3D_SLURM_YAML_H

#include <stddef.h>

#include "p3d/cluster.h"

enum { P3D_SY_TREE = 1, P3D_SY_BLOCK = 2, P3D_SY_FLAT = 3 };

typedef struct p3d_sy_ent {     /* a switch (tree) or a block */
    char *name;
    char *nodes;                /* hostlist, or NULL */
    char *children;             /* tree: child switches (hostlist), or NULL */
    size_t line;
} p3d_sy_ent;

typedef struct p3d_sy_topo {
    char *name;
    size_t line;
    int kind;                   /* P3D_SY_* */
    int cluster_default;
    p3d_sy_ent *ents;
    size_t nents;
} p3d_sy_topo;

/* Parses buf (NUL-terminated, from path) as a topology.yaml: a list of
 * topologies, each with `topology`, optional `cluster_default` and exactly
 * one of `tree` (switches: switch/children/nodes), `block` (block_sizes,
 * blocks: block/nodes) or `flat`. Unknown keys are warnings on c; a YAML
 * construct outside that shape (anchors, tags, flow mappings, several
 * documents, a bad indentation) is an error naming path:line. Returns 0
 * with *out and *n set, or -1 with *err. */
int p3d_slurm_yaml_parse(p3d_cluster *c, const char *path, const char *buf, p3d_sy_topo **out, size_t *n,
                         char **err);
void p3d_slurm_yaml_free(p3d_sy_topo *t, size_t n);
/* Whether text looks like a topology.yaml rather than a topology.conf: its
 * first line that is not blank or a comment starts with '-' or "---". */
int p3d_slurm_yaml_sniff(const char *buf);

#endif
