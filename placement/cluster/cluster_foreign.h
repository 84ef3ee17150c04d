/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * cluster_foreign.h — cluster descriptions par3drun did not write
 * (docs/kubernetes.md, docs/cluster-file.md "Other sources"): the JSON of
 * `kubectl get nodes -o json` (k8s.c) and of `aws ec2
 * describe-instance-topology` (aws.c).
 *
 * Each is translated into the cJSON tree of an equivalent cluster file and
 * read by the cluster-file reader, so a Kubernetes or AWS cluster places
 * exactly like the cluster file a site would write by hand.
 */
#ifndef P3D_CLUSTER_FOREIGN_H
#define P3D_CLUSTER_FOREIGN_H

#include <cjson/cJSON.h>

#include "cluster_internal.h"

/* Recognises root (already parsed from path). Returns 1 with *out (a
 * cluster-file tree: {"nodes": [...], "description": ...}) and *warn (NULL
 * or a malloc'd line for the report) when it is a foreign document, 0 when
 * it is not (a plain cluster file), -1 with *err. topology: --topology
 * given by the user (overrides the bundled-topology tables), or NULL. */
int p3d_cluster_foreign(const char *path, const cJSON *root, const char *topology, cJSON **out, char **warn,
                        char **err);

/* The two translators (same contract, called once root is known to be
 * theirs). */
int p3d_k8s_to_cluster(const char *path, const cJSON *root, const char *topology, cJSON **out, char **warn, char **err);
int p3d_aws_to_cluster(const char *path, const cJSON *root, const char *topology, cJSON **out, char **warn, char **err);

/* The bundled topology of an EC2 instance type (aws.c's table), or NULL;
 * also used for EKS nodes without a gpu.product label. */
const char *p3d_aws_type_topology(const char *type);

/* Shared by both: the "topology" value for a node — the user's
 * --topology (made absolute) or a bundled file by name, absolute. NULL
 * when out of memory. */
char *p3d_foreign_topology(const char *topology, const char *bundled);

/* Appends {"name", "topology", "rack"?, "nvlink_domain"?} to nodes. 0 or
 * -1 (out of memory). */
int p3d_foreign_node(cJSON *nodes, const char *name, const char *topo, const char *rack, const char *domain);

#endif
