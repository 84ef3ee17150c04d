/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * cmd_cluster.c — `par3drun cluster`: the cluster as par3drun resolves it
 * (docs/cluster-file.md "par3drun cluster").
 *
 * Sources: --cluster (a cluster file, kubectl get nodes -o json, aws ec2
 * describe-instance-topology), else this node (--topology, default local)
 * with its allocation applied and its rack from SLURM_TOPOLOGY_ADDR; then
 * --slurm-topology. Text lists nodes in hostlist groups; --format json
 * writes a cluster file a site can install (topologies by absolute path).
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "commands.h"
#include "termsafe.h"
#include "plan.h"
#include "strbuf.h"

static int load(const p3d_opts *o, p3d_cluster **c, char **err)
{
    const char *t = o->topology && strcmp(o->topology, "local") ? o->topology : NULL;
    if (o->cluster) {
        if (p3d_cluster_load_as(o->cluster, t, c, err) < 0)
            return -1;
    } else {
        p3d_node *n = NULL;
        if (p3d_topo_load(o->topology ? o->topology : "local", &n, err) < 0)
            return -1;
        if (p3d_node_apply_allocation(&n, 0, err) < 0) {
            p3d_node_free(n);
            return -1;
        }
        if (p3d_cluster_from_node(n, c, err) < 0)
            return -1;
        char *rack = p3d_slurm_env_rack();
        int e = rack ? p3d_cluster_set_racks(*c, &rack, err) : 0;
        free(rack);
        if (e < 0)
            return -1;
    }
    if (o->slurm_topology && p3d_cluster_apply_slurm_topology(*c, o->slurm_topology, err) < 0)
        return -1;
    /* --exclude: those nodes are gone, as for every other command */
    if (o->exclude) {
        p3d_job none;
        memset(&none, 0, sizeof none);
        if (p3d_place_roles(o, *c, &none, err) < 0 || p3d_place_keep_usable(*c, err) < 0)
            return -1;
    }
    return 0;
}

/* Nodes with the same topology, rack and domain, as hostlist groups. */
static char *text(const p3d_cluster *c, const char *excluded)
{
    p3d_sb b = {0};
    p3d_sb_printf(&b, "cluster: %zu node%s, %zu GPUs, %zu rack%s, %zu multi-node NVLink domain%s\n", c->nnodes,
                  c->nnodes == 1 ? "" : "s", p3d_cluster_gpus(c), c->nracks, c->nracks == 1 ? "" : "s", c->nnvl_domains,
                  c->nnvl_domains == 1 ? "" : "s");
    p3d_sb_printf(&b, "source: %s%s%s\n", c->source ? p3d_tesc(c->source) : "this node",
                  c->slurm_topology ? "; slurm topology " : "", c->slurm_topology ? p3d_tesc(c->slurm_topology) : "");
    if (excluded)
        p3d_sb_printf(&b, "excluded (--exclude): %s\n", p3d_tesc(excluded));
    char **names = malloc(sizeof *names * (c->nnodes ? c->nnodes : 1));
    unsigned char *done = calloc(c->nnodes ? c->nnodes : 1, 1);
    if (!names || !done) {
        free(names);
        free(done);
        p3d_sb_free(&b);
        return NULL;
    }
    p3d_sb_printf(&b, "\n%-28s %5s  %-12s %-14s %s\n", "nodes", "GPUs", "rack", "NVLink domain", "topology");
    for (size_t i = 0; i < c->nnodes; i++) {
        if (done[i])
            continue;
        const p3d_cnode *a = &c->nodes[i];
        size_t k = 0;
        for (size_t j = i; j < c->nnodes; j++) {
            const p3d_cnode *x = &c->nodes[j];
            if (!done[j] && x->topo == a->topo && x->rack == a->rack && x->nvl_domain == a->nvl_domain) {
                done[j] = 1;
                names[k++] = x->name;
            }
        }
        char *hl = p3d_hostlist_compress(names, k);
        p3d_sb_printf(&b, "%-28s %5d  %-12s %-14s %s\n", hl ? p3d_tesc(hl) : "?", a->topo ? a->topo->ngpus : 0,
                      p3d_tesc(c->racks[a->rack]), a->nvl_domain >= 0 ? p3d_tesc(c->nvl_domains[a->nvl_domain]) : "-",
                      a->topo && a->topo->source ? p3d_tesc(a->topo->source) : "?");
        free(hl);
    }
    free(names);
    free(done);
    /* what each topology says about itself: allocation exclusions, slots */
    for (size_t t = 0; t < c->ntopos; t++)
        if (c->topos[t]->notes)
            for (const char *s = c->topos[t]->notes; *s;) {
                const char *e = strchr(s, '\n');
                size_t len = e ? (size_t)(e - s) : strlen(s);
                if (!strncmp(s, "allocation:", 11)) {
                    char *note = p3d_term_dup(s, len, len, 0);
                    p3d_sb_printf(&b, "%s: %s\n", p3d_tesc(c->topos[t]->source), note ? note : "?");
                    free(note);
                }
                s += len + (e ? 1 : 0);
            }
    for (size_t w = 0; w < c->nwarnings; w++)
        p3d_sb_printf(&b, "warning: %s\n", p3d_tesc(c->warnings[w]));
    return p3d_sb_finish(&b);
}

/* A cluster file: one entry per node (names kept exact), topology by
 * absolute path so the file works from anywhere. */
static char *json(const p3d_cluster *c, char **err)
{
    p3d_sb b = {0};
    p3d_sb_puts(&b, "{\n  \"description\": ");
    char desc[512];
    snprintf(desc, sizeof desc, "written by par3drun cluster from %s", c->source ? c->source : "this node");
    p3d_sb_json_str(&b, desc);
    p3d_sb_puts(&b, ",\n  \"nodes\": [\n");
    for (size_t i = 0; i < c->nnodes; i++) {
        const p3d_cnode *a = &c->nodes[i];
        const char *src = a->topo && a->topo->source ? a->topo->source : "";
        if (!strcmp(src, "local") || !src[0]) {
            p3d_sb_free(&b);
            p3d_err(err,
                    "node %s: its topology was discovered live, which a cluster file cannot name: save it "
                    "first (lstopo --of xml FILE, or nvidia-smi topo -m > FILE) and give --topology FILE",
                    p3d_tesc(a->name));
            return NULL;
        }
        char *real = strncmp(src, "synthetic:", 10) ? realpath(src, NULL) : NULL;
        p3d_sb_puts(&b, "    {\"name\": ");
        p3d_sb_json_str(&b, a->name);
        p3d_sb_puts(&b, ", \"topology\": ");
        p3d_sb_json_str(&b, real ? real : src);
        free(real);
        p3d_sb_puts(&b, ", \"rack\": ");
        p3d_sb_json_str(&b, c->racks[a->rack]);
        if (a->nvl_domain >= 0) {
            p3d_sb_puts(&b, ", \"nvlink_domain\": ");
            p3d_sb_json_str(&b, c->nvl_domains[a->nvl_domain]);
        }
        p3d_sb_puts(&b, i + 1 < c->nnodes ? "},\n" : "}\n");
    }
    p3d_sb_puts(&b, "  ]\n}\n");
    char *s = p3d_sb_finish(&b);
    if (!s)
        p3d_err(err, "out of memory");
    return s;
}

int p3d_cmd_cluster(const p3d_opts *o)
{
    p3d_cluster *c = NULL;
    char *err = NULL, *out = NULL;
    int rc = P3D_EXIT_OK;
    const char *fmt = o->format ? o->format : "text";
    if (strcmp(fmt, "text") && strcmp(fmt, "json")) {
        p3d_err(&err, "--format %s: cluster writes text or json (a cluster file)", fmt);
        return p3d_fail_input(err);
    }
    if (load(o, &c, &err) < 0) {
        p3d_cluster_free(c); /* a step after loading failed */
        return p3d_fail_input(err);
    }
    out = strcmp(fmt, "json") ? text(c, o->exclude) : json(c, &err);
    if (!out) {
        rc = p3d_fail_input(err);
        goto done;
    }
    FILE *f = o->output ? fopen(o->output, "w") : stdout;
    if (!f) {
        p3d_err(&err, "--output %s: cannot create: %s", o->output, strerror(errno));
        rc = p3d_fail_input(err);
        goto done;
    }
    int bad = fputs(out, f) < 0;
    bad |= o->output ? fclose(f) != 0 : fflush(f) != 0;
    if (bad) {
        fprintf(stderr, "par3drun: cluster: write failed: %s\n", strerror(errno));
        rc = P3D_EXIT_FAIL;
    }
done:
    free(out);
    p3d_cluster_free(c);
    return rc;
}
