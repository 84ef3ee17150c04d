/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * aws.c — `aws ec2 describe-instance-topology` as a cluster
 * (docs/cluster-file.md "Other sources").
 *
 * Each of Instances[] is a node named by its InstanceId; NetworkNodes
 * lists the network nodes above it from the top layer down, so the last
 * one — the layer nearest the instance — is its rack. The instance type
 * picks a bundled topology (table below) unless --topology names one.
 * Instance ids are not hostnames: inside a Slurm allocation
 * (SLURM_JOB_NODELIST) such a cluster matches no node; write a cluster
 * file with `par3drun cluster --format json` and rename the nodes.
 */
#include "cluster_foreign.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const struct {
    const char *type, *topo;
} type_table[] = {
    {"p5.48xlarge", "dgx-h100.xml"},   /* 8x H100 SXM, NVSwitch */
    {"p5e.48xlarge", "dgx-h100.xml"},  /* 8x H200 */
    {"p5en.48xlarge", "dgx-h100.xml"}, /* 8x H200 */
    {"p4d.24xlarge", "dgx-a100.xml"},  /* 8x A100 40GB, NVSwitch */
    {"p4de.24xlarge", "dgx-a100.xml"}, /* 8x A100 80GB */
};

const char *p3d_aws_type_topology(const char *type)
{
    for (size_t i = 0; type && i < sizeof type_table / sizeof *type_table; i++)
        if (!strcmp(type, type_table[i].type))
            return type_table[i].topo;
    return NULL;
}

int p3d_aws_to_cluster(const char *path, const cJSON *root, const char *topology, cJSON **out, char **warn, char **err)
{
    const cJSON *inst = cJSON_GetObjectItemCaseSensitive(root, "Instances");
    cJSON *doc = cJSON_CreateObject(), *nodes = cJSON_AddArrayToObject(doc, "nodes");
    char *topo = NULL;
    size_t idx = 0;
    *out = NULL;
    *warn = NULL;
    if (!doc || !nodes)
        goto oom;
    if (!cJSON_IsArray(inst) || !inst->child) {
        p3d_err(err, "%s: \"Instances\" must be a non-empty array (aws ec2 describe-instance-topology)", path);
        goto fail;
    }
    for (const cJSON *it = inst->child; it; it = it->next, idx++) {
        const cJSON *id = cJSON_GetObjectItemCaseSensitive(it, "InstanceId");
        const cJSON *ty = cJSON_GetObjectItemCaseSensitive(it, "InstanceType");
        const cJSON *nn = cJSON_GetObjectItemCaseSensitive(it, "NetworkNodes");
        if (!cJSON_IsString(id) || !id->valuestring[0]) {
            p3d_err(err, "%s: Instances[%zu]: expected a string \"InstanceId\"", path, idx);
            goto fail;
        }
        const char *rack = NULL;
        if (nn && !cJSON_IsArray(nn)) {
            p3d_err(err, "%s: Instances[%zu] (%s): \"NetworkNodes\" must be an array of strings", path, idx,
                    id->valuestring);
            goto fail;
        }
        for (const cJSON *l = nn ? nn->child : NULL; l; l = l->next) {
            if (!cJSON_IsString(l) || !l->valuestring[0]) {
                p3d_err(err, "%s: Instances[%zu] (%s): \"NetworkNodes\" must be an array of strings", path, idx,
                        id->valuestring);
                goto fail;
            }
            rack = l->valuestring; /* the last: nearest the instance */
        }
        const char *b = NULL;
        if (!topology || !topology[0]) {
            b = p3d_aws_type_topology(cJSON_IsString(ty) ? ty->valuestring : NULL);
            if (!b) {
                p3d_err(err,
                        "%s: Instances[%zu] (%s): instance type '%s' has no bundled topology "
                        "(docs/cluster-file.md lists the table); give --topology FILE",
                        path, idx, id->valuestring, cJSON_IsString(ty) ? ty->valuestring : "(none)");
                goto fail;
            }
        }
        free(topo);
        if (!(topo = p3d_foreign_topology(topology, b)) ||
            p3d_foreign_node(nodes, id->valuestring, topo, rack, NULL) < 0)
            goto oom;
    }
    char desc[256];
    snprintf(desc, sizeof desc, "aws ec2 describe-instance-topology: %zu instances", idx);
    if (!cJSON_AddStringToObject(doc, "description", desc))
        goto oom;
    free(topo);
    *out = doc;
    return 1;
oom:
    p3d_err(err, "%s: out of memory", path);
fail:
    free(topo);
    cJSON_Delete(doc);
    return -1;
}
