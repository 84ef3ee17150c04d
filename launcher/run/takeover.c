/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * takeover.c — what a successor places with (failover.h; docs/multinode.md,
 * "When the leader dies"). It has no gathered records of the other nodes,
 * but it holds what the old leader last sent every node: the compact
 * placement, which carries every node's name, topology, rack and NVLink
 * domain and every rank's node and GPU, and the placement JSON, which says
 * the nodes' roles (spares, excluded, lost). From those it rebuilds the
 * plan result the leader kept, so that the one replacement path
 * (p3d_replace_place) runs on it exactly as it would have on the leader.
 */
#include "mnode.h"

#include "p3d/base.h"

#include <cjson/cJSON.h>
#include <stdlib.h>
#include <string.h>

/* The role of every node the JSON lists under key (an array of names). */
static int set_roles(p3d_cluster *c, const cJSON *doc, const char *key, int role, char **err)
{
    const cJSON *a = cJSON_GetObjectItemCaseSensitive(doc, key);
    if (!a)
        return 0;
    if (!cJSON_IsArray(a))
        return p3d_err(err, "the placement JSON's %s is not an array of node names", key);
    const cJSON *v;
    cJSON_ArrayForEach(v, a)
    {
        if (!cJSON_IsString(v))
            return p3d_err(err, "the placement JSON's %s holds a value that is not a node name", key);
        size_t i = 0;
        while (i < c->nnodes && strcmp(c->nodes[i].name, v->valuestring) != 0)
            i++;
        if (i == c->nnodes)
            return p3d_err(err, "the placement JSON's %s names node '%s', which is not in the placement", key,
                           v->valuestring);
        c->nodes[i].role = role;
    }
    return 0;
}

int p3d_takeover_plan(const p3d_opts *o, const unsigned char *cplace, size_t len, p3d_plan_result *out,
                      p3d_place_msg *pm, char **err)
{
    int rc = -1;
    p3d_cluster *c = NULL;
    cJSON *doc = NULL;
    memset(out, 0, sizeof *out);
    if (p3d_cplace_decode_cluster(cplace, len, pm, &c, err) < 0)
        return -1;
    doc = cJSON_ParseWithLength(pm->json, pm->json_len);
    if (!doc) {
        p3d_err(err, "the placement JSON the leader sent does not parse");
        goto out;
    }
    for (size_t i = 0; i < c->nnodes; i++)
        c->nodes[i].role = P3D_NODE_USE;
    if (set_roles(c, doc, "spares", P3D_NODE_SPARE, err) < 0 ||
        set_roles(c, doc, "excluded", P3D_NODE_EXCLUDED, err) < 0 || set_roles(c, doc, "lost", P3D_NODE_LOST, err) < 0)
        goto out;
    out->cluster = c;
    c = NULL;
    if (p3d_opts_job(o, &out->job, err) < 0)
        goto out;
    out->job.spares = o->spares;
    /* dp as the leader resolved it: over the nodes that run ranks; an
     * elastic job's full width and floor from the frame (it may run
     * narrower now: whole replicas of world / dp ranks each) */
    size_t gpus = 0;
    int dp_now = p3d_mesh_size(&pm->pl->mesh, P3D_DIM_DP);
    for (size_t i = 0; i < out->cluster->nnodes; i++)
        if (out->cluster->nodes[i].role == P3D_NODE_USE)
            gpus += (size_t)out->cluster->nodes[i].topo->ngpus;
    if (pm->full_dp > 0)
        gpus = (size_t)pm->full_dp * (size_t)(pm->pl->world / (dp_now > 0 ? dp_now : 1));
    out->job.min_dp = pm->min_dp;
    if (p3d_job_resolve_dp(&out->job, gpus, err) < 0)
        goto out;
    for (int q = 0; q < pm->pl->world; q++) {
        int n = pm->pl->ranks[q].node;
        if (n < 0 || (size_t)n >= out->cluster->nnodes || out->cluster->nodes[n].role != P3D_NODE_USE) {
            p3d_err(err, "rank %d is placed on node %d, which is not a node that runs ranks", q, n);
            goto out;
        }
    }
    out->pl = pm->pl;
    pm->pl = NULL;
    p3d_job at = out->job; /* the checks read the width it runs at */
    at.mesh.size[P3D_DIM_DP] = dp_now;
    if (p3d_analyze(out->cluster, &at, out->pl, &out->an, err) < 0)
        goto out;
    rc = 0;
out:
    cJSON_Delete(doc);
    p3d_cluster_free(c);
    if (rc < 0)
        p3d_plan_result_free(out);
    return rc;
}

char *p3d_takeover_preflight(const char *json, size_t len)
{
    cJSON *doc = cJSON_ParseWithLength(json, len);
    const cJSON *pf = cJSON_GetObjectItemCaseSensitive(doc, "preflight");
    char *s = cJSON_IsObject(pf) ? cJSON_PrintUnformatted(pf) : NULL;
    cJSON_Delete(doc);
    return s;
}
