/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * k8s.c — `kubectl get nodes -o json` as a cluster (docs/kubernetes.md).
 *
 * A node: metadata.name; its GPUs from the GPU operator's feature-discovery
 * labels nvidia.com/gpu.count and nvidia.com/gpu.product (else
 * status.capacity["nvidia.com/gpu"]), mapped to a bundled topology by the
 * table below (without a product label: the EC2 instance type's, aws.c)
 * unless --topology names one; its rack and multi-node NVLink
 * domain from the first label present in the orders below. Nodes without
 * GPUs (control plane, CPU pools) are left out, with a warning.
 *
 * Why a fixed label order and not "whatever is set": a node can carry
 * several vendors' labels (topograph on GKE, say); a documented order makes
 * the result the same on every run and lets a site predict it.
 */
#include "cluster_foreign.h"
#include "termsafe.h"

#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The rack: the network level nearest to the node, first label present. */
static const char *const rack_labels[] = {
    "network.topology.nvidia.com/block",      /* NVIDIA topograph: leaf switch block */
    "cloud.google.com/gce-topology-subblock", /* GKE */
    "topology.k8s.aws/network-node-layer-3",  /* EKS: the layer nearest the instance */
    "network.topology.nvidia.com/spine",      /* coarser levels when the finer are absent */
    "cloud.google.com/gce-topology-block",    "topology.k8s.aws/network-node-layer-2",
    "network.topology.nvidia.com/datacenter", "topology.k8s.aws/network-node-layer-1",
};

/* The multi-node NVLink domain. */
static const char *const nvl_labels[] = {
    "nvidia.com/gpu.clique",                   /* GPU operator: <cluster UUID>.<clique id> */
    "network.topology.nvidia.com/accelerator", /* topograph */
};

/* gpu.product (as feature discovery writes it, e.g. NVIDIA-H100-80GB-HBM3)
 * and count -> bundled topology. First match wins; "PCIe" products have no
 * NVSwitch and match nothing here. */
static const struct {
    const char *has;
    int count;
    const char *topo;
} product_table[] = {
    {"GB200", 4, "gb200-tray.xml"}, {"H100", 8, "dgx-h100.xml"}, {"H200", 8, "dgx-h100.xml"},
    {"H800", 8, "dgx-h100.xml"},    {"A100", 8, "dgx-a100.xml"}, {"A800", 8, "dgx-a100.xml"},
    {"V100", 8, "dgx1-v100.xml"},
};

static const char *label(const cJSON *labels, const char *k)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(labels, k);
    return cJSON_IsString(v) && v->valuestring[0] ? v->valuestring : NULL;
}

static const char *first_label(const cJSON *labels, const char *const *keys, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        const char *v = label(labels, keys[i]);
        if (v)
            return v;
    }
    return NULL;
}

/* GPU count: the label, else the capacity; -1 when malformed. */
static long gpu_count(const cJSON *labels, const cJSON *item)
{
    const char *s = label(labels, "nvidia.com/gpu.count");
    if (!s) {
        const cJSON *st = cJSON_GetObjectItemCaseSensitive(item, "status");
        const cJSON *cap = cJSON_GetObjectItemCaseSensitive(st, "capacity");
        const cJSON *g = cJSON_GetObjectItemCaseSensitive(cap, "nvidia.com/gpu");
        if (cJSON_IsNumber(g))
            return g->valuedouble >= 0 && g->valuedouble <= 4096 ? (long)g->valuedouble : -1;
        s = cJSON_IsString(g) ? g->valuestring : NULL;
    }
    if (!s)
        return 0;
    char *end;
    long v = strtol(s, &end, 10);
    return (end == s || *end || v < 0 || v > 4096) ? -1 : v;
}

static int icontains(const char *s, const char *sub)
{
    size_t n = strlen(sub);
    for (; *s; s++)
        if (!strncasecmp(s, sub, n))
            return 1;
    return 0;
}

static const char *bundled_for(const char *product, long count)
{
    if (!product || icontains(product, "PCIE"))
        return NULL;
    for (size_t i = 0; i < sizeof product_table / sizeof product_table[0]; i++)
        if (icontains(product, product_table[i].has) && count == product_table[i].count)
            return product_table[i].topo;
    return NULL;
}

int p3d_k8s_to_cluster(const char *path, const cJSON *root, const char *topology, cJSON **out, char **warn, char **err)
{
    const cJSON *items = cJSON_GetObjectItemCaseSensitive(root, "items");
    cJSON *doc = cJSON_CreateObject(), *nodes = cJSON_AddArrayToObject(doc, "nodes");
    char *topo = NULL, *skipped = NULL;
    size_t nskipped = 0, n = 0, idx = 0;
    *out = NULL;
    *warn = NULL;
    if (!doc || !nodes)
        goto oom;
    if (!cJSON_IsArray(items))
        return cJSON_Delete(doc), p3d_err(err, "%s: \"items\" must be an array of Node objects", path);
    for (const cJSON *it = items->child; it; it = it->next, idx++) {
        const cJSON *md = cJSON_GetObjectItemCaseSensitive(it, "metadata");
        const cJSON *nm = cJSON_GetObjectItemCaseSensitive(md, "name");
        const cJSON *kind = cJSON_GetObjectItemCaseSensitive(it, "kind");
        if (!cJSON_IsObject(it) || !cJSON_IsString(nm) || !nm->valuestring[0]) {
            p3d_err(err, "%s: items[%zu]: expected a Node with metadata.name (the output of kubectl get nodes -o json)",
                    path, idx);
            goto fail;
        }
        if (cJSON_IsString(kind) && strcmp(kind->valuestring, "Node")) {
            p3d_err(err, "%s: items[%zu] (%s): kind '%s', expected Node (kubectl get nodes -o json)", path, idx,
                    p3d_tesc(nm->valuestring), p3d_tesc(kind->valuestring));
            goto fail;
        }
        const cJSON *labels = cJSON_GetObjectItemCaseSensitive(md, "labels");
        long count = gpu_count(labels, it);
        if (count < 0) {
            p3d_err(err, "%s: node %s: nvidia.com/gpu.count / capacity[\"nvidia.com/gpu\"] is not a GPU count", path,
                    p3d_tesc(nm->valuestring));
            goto fail;
        }
        if (count == 0) { /* control plane, CPU pools */
            if (nskipped++ < 3) {
                char *s = NULL;
                if (asprintf(&s, "%s%s%s", skipped ? skipped : "", skipped ? ", " : "", p3d_tesc(nm->valuestring)) < 0)
                    goto oom;
                free(skipped);
                skipped = s;
            }
            continue;
        }
        const char *product = label(labels, "nvidia.com/gpu.product");
        const char *b = NULL;
        if (!topology || !topology[0]) {
            b = bundled_for(product, count);
            if (!b && !product) /* EKS without feature discovery: the instance type */
                b = p3d_aws_type_topology(label(labels, "node.kubernetes.io/instance-type"));
            if (!b) {
                p3d_err(err,
                        "%s: node %s: %ld x '%s' has no bundled topology (docs/kubernetes.md lists the table); give "
                        "--topology FILE for these nodes",
                        path, p3d_tesc(nm->valuestring), count,
                        product ? p3d_tesc(product) : "(no nvidia.com/gpu.product label)");
                goto fail;
            }
        }
        free(topo);
        if (!(topo = p3d_foreign_topology(topology, b)))
            goto oom;
        if (p3d_foreign_node(nodes, nm->valuestring, topo,
                             first_label(labels, rack_labels, sizeof rack_labels / sizeof *rack_labels),
                             first_label(labels, nvl_labels, sizeof nvl_labels / sizeof *nvl_labels)) < 0)
            goto oom;
        n++;
    }
    if (!n) {
        p3d_err(err, "%s: no node with NVIDIA GPUs (labels nvidia.com/gpu.count or capacity nvidia.com/gpu)", path);
        goto fail;
    }
    if (nskipped && asprintf(warn, "%s: %zu node%s without GPUs left out (%s%s)", path, nskipped,
                             nskipped == 1 ? "" : "s", skipped, nskipped > 3 ? ", ..." : "") < 0)
        *warn = NULL;
    char desc[256];
    snprintf(desc, sizeof desc, "kubectl get nodes -o json: %zu GPU nodes", n);
    if (!cJSON_AddStringToObject(doc, "description", desc))
        goto oom;
    free(topo);
    free(skipped);
    *out = doc;
    return 1;
oom:
    p3d_err(err, "%s: out of memory", path);
fail:
    free(topo);
    free(skipped);
    cJSON_Delete(doc);
    return -1;
}

int p3d_cluster_foreign(const char *path, const cJSON *root, const char *topology, cJSON **out, char **warn, char **err)
{
    *out = NULL;
    *warn = NULL;
    if (cJSON_GetObjectItemCaseSensitive(root, "nodes"))
        return 0;
    if (cJSON_GetObjectItemCaseSensitive(root, "items"))
        return p3d_k8s_to_cluster(path, root, topology, out, warn, err);
    if (cJSON_GetObjectItemCaseSensitive(root, "Instances"))
        return p3d_aws_to_cluster(path, root, topology, out, warn, err);
    return 0;
}
