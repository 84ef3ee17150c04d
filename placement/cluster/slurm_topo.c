/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * slurm_topo.c — the Slurm topology both readers fill (slurm_topo.h:
 * topology.conf, slurm_conf.c; topology.yaml, slurm_yaml.c), freed here,
 * below them and cluster_slurm.c, so neither reader calls back up.
 */
#include "slurm_topo.h"

#include <stdlib.h>

void p3d_st_free(p3d_st_topo *t, size_t n)
{
    for (size_t i = 0; t && i < n; i++) {
        for (size_t k = 0; k < t[i].nents; k++) {
            free(t[i].ents[k].name);
            free(t[i].ents[k].nodes);
            free(t[i].ents[k].children);
        }
        free(t[i].ents);
        free(t[i].name);
    }
    free(t);
}
