/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * cluster_foreign.c — what both foreign readers (k8s.c, aws.c;
 * cluster_foreign.h) build with: the topology a node gets (the one given,
 * or a bundled one for its type) and the node entry of the equivalent
 * cluster file. Below both readers: it calls neither.
 */
#include "cluster_foreign.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

char *p3d_foreign_topology(const char *topology, const char *bundled)
{
    char *s = NULL;
    if (topology && topology[0]) {
        if (!strncmp(topology, "synthetic:", 10) || topology[0] == '/')
            return strdup(topology);
        char *real = realpath(topology, NULL);
        if (real)
            return real;
        return strdup(topology); /* the reader names what it cannot find */
    }
    if (asprintf(&s, "%s/examples/topologies/%s", p3d_data_dir(), bundled) < 0)
        return NULL;
    return s;
}

int p3d_foreign_node(cJSON *nodes, const char *name, const char *topo, const char *rack, const char *domain)
{
    cJSON *o = cJSON_CreateObject();
    if (!o)
        return -1;
    cJSON_AddItemToArray(nodes, o);
    if (!cJSON_AddStringToObject(o, "name", name) || !cJSON_AddStringToObject(o, "topology", topo) ||
        (rack && !cJSON_AddStringToObject(o, "rack", rack)) ||
        (domain && !cJSON_AddStringToObject(o, "nvlink_domain", domain)))
        return -1;
    return 0;
}
