/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * fuzz_slurm_topo.c — Slurm topology.conf and topology.yaml (placement/cluster/
 * slurm_conf.c, slurm_yaml.c, and the applier cluster_slurm.c),
 * applied to a fixed cluster whose node names are the ones of the real
 * topology.conf fixtures (tests/fixtures/realdata/slurm/), so mutations of
 * those files reach the tree/block logic and not only the "no node
 * matches" exit.
 */
#include "fuzz_topofiles.h"

#include "p3d/p3d.h"

static char cluster_path[512], conf_path[512];

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    (void)argc, (void)argv;
    static const char cluster[] =
        "{\"nodes\": [\n"
        " {\"name\": \"hpcbench-hpc-[1-72]\", \"topology\": \"a.txt\", \"rack\": \"r0\"},\n"
        " {\"name\": \"circe-n[001-080]\", \"topology\": \"a.txt\", \"rack\": \"r1\"},\n"
        " {\"name\": \"n[001-008]\", \"topology\": \"a.txt\", \"rack\": \"r2\"},\n"
        " {\"name\": \"node[1-4]\", \"topology\": \"a.txt\", \"nvlink_domain\": \"d0\", \"rack\": \"r2\"}\n"
        "]}\n";
    fz_topo_dir();
    fz_path(cluster_path, sizeof cluster_path, "cluster.json");
    fz_path(conf_path, sizeof conf_path, "topology.conf");
    fz_write(cluster_path, cluster, sizeof cluster - 1);
    return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char *err = NULL;
    p3d_cluster *c = NULL;
    if (p3d_cluster_load(cluster_path, &c, &err) < 0) {
        fprintf(stderr, "fuzz_slurm_topo: fixed cluster does not load: %s\n", err);
        abort();
    }
    fz_write(conf_path, data, size);
    if (p3d_cluster_apply_slurm_topology(c, conf_path, &err) < 0) {
        if (getenv("P3D_FUZZ_VERBOSE"))
            fprintf(stderr, "rejected: %s\n", err);
        if (!err || !*err)
            abort();
        goto out;
    }
    for (size_t i = 0; i < c->nnodes; i++)
        if (c->nodes[i].rack < 0 || (size_t)c->nodes[i].rack >= c->nracks ||
            c->nodes[i].nvl_domain >= (int)c->nnvl_domains)
            abort();
    if (c->rack_dist)
        for (size_t a = 0; a < c->nracks; a++)
            for (size_t b = 0; b < c->nracks; b++)
                if (c->rack_dist[a * c->nracks + b] != c->rack_dist[b * c->nracks + a])
                    abort(); /* switch hops are symmetric */
    (void)p3d_cluster_link(c, 0, 0, c->nnodes - 1, 0);
out:
    p3d_cluster_free(c);
    free(err);
    return 0;
}
