/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * fuzz_cluster_json.c — cluster description JSON (placement/cluster/cluster_file.c)
 * through p3d_cluster_load on a temp file, then what every command does
 * with a loaded cluster: GPU count, link classes, hostlist compression of
 * the node names, restricting to a node list.
 */
#include "fuzz_topofiles.h"

#include "p3d/p3d.h"

static char json_path[512];

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    (void)argc, (void)argv;
    fz_topo_dir();
    fz_path(json_path, sizeof json_path, "cluster.json");
    return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char *err = NULL, *names = NULL;
    p3d_cluster *c = NULL;
    fz_write(json_path, data, size);
    if (p3d_cluster_load(json_path, &c, &err) < 0) {
        if (getenv("P3D_FUZZ_VERBOSE"))
            fprintf(stderr, "rejected: %s\n", err);
        if (!err || !*err || c)
            abort();
        goto out;
    }
    if (!c || c->nnodes == 0)
        abort(); /* a loaded cluster has nodes */
    size_t g = p3d_cluster_gpus(c), last = c->nnodes - 1;
    (void)g;
    for (size_t i = 0; i < c->nnodes; i++)
        if (!c->nodes[i].name || !c->nodes[i].topo || c->nodes[i].rack < 0 ||
            (size_t)c->nodes[i].rack >= c->nracks ||
            c->nodes[i].nvl_domain >= (int)c->nnvl_domains)
            abort();
    if (c->nodes[0].topo->ngpus > 0 && c->nodes[last].topo->ngpus > 0) {
        p3d_link l = p3d_cluster_link(c, 0, 0, last, c->nodes[last].topo->ngpus - 1);
        if ((int)l < 0 || l >= P3D_LINK_COUNT)
            abort();
    }
    {
        char **v = malloc(c->nnodes * sizeof *v);
        if (!v)
            abort();
        for (size_t i = 0; i < c->nnodes; i++)
            v[i] = c->nodes[i].name;
        names = p3d_hostlist_compress(v, c->nnodes);
        free(v);
    }
    if (!names)
        abort();
    free(err);
    err = NULL;
    if (p3d_cluster_restrict(c, names, &err) < 0 && (!err || !*err))
        abort();
out:
    p3d_cluster_free(c);
    free(names);
    free(err);
    return 0;
}
