/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * preflight_remote.c — --preflight in a multi-node job (docs/launch.md,
 * "Preflight"): each node benchmarks itself before it joins the
 * rendezvous (all nodes at once, on their own hosts, while they would wait
 * for each other anyway), its figures line travels in its gathered record
 * (wire protocol 8), and the leader judges every node against the medians
 * exactly as preflight.c does for nodes of one host. A node the verdict
 * excludes is excluded like one that failed its --health-check before the
 * start: a spare takes its place before the policy runs.
 *
 * The TCP figures come from a ring across the hosts that runs during the
 * rendezvous (rdzv.h, p3d_rdzv.ring): every node listens on a port of its
 * own (in its JOIN), the leader names each node's next one in the tree
 * position it sends once every node joined, and each node streams to its
 * next one while it takes its previous one's stream (p3d_preflight_ring,
 * preflight.c), then appends "tcp_out_mbps=O tcp_in_mbps=I" to the line
 * its record carries. A node whose ring part failed carries
 * "failed: its TCP ring benchmark failed: ..." instead.
 *
 * The line is a peer's input: the leader parses it strictly
 * (p3d_preflight_parse); one it cannot read excludes the node with the
 * reason.
 */
#include "preflight.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

const char P3D_PREFLIGHT_FAILED[] = "failed: ";

static const char PF_TCP_REMOTE[] = "not measured: fewer than two nodes took part in the ring";

void p3d_preflight_own(const p3d_opts *o, const char *name, char *line, size_t cap)
{
    p3d_preflight pf;
    char *err = NULL;
    if (p3d_preflight_run(o, &name, 1, &pf, &err) < 0)
        snprintf(line, cap, "%sits benchmark could not start: %s", P3D_PREFLIGHT_FAILED, err ? err : "?");
    else if (!pf.nodes[0].ran) /* why says it: "its benchmark failed: ...", "... gave no figures: ..." */
        snprintf(line, cap, "%s%s", P3D_PREFLIGHT_FAILED, pf.nodes[0].why);
    else {
        const p3d_preflight_node *nd = &pf.nodes[0];
        char gpu[80] = "";
        if (nd->gpus > 0 && nd->p2p_gbps >= 0)
            snprintf(gpu, sizeof gpu, "gpus=%d p2p_gbps=%.6g ", nd->gpus, nd->p2p_gbps);
        else if (nd->gpus > 0)
            snprintf(gpu, sizeof gpu, "gpus=%d ", nd->gpus);
        snprintf(line, cap, "preflight %sgflops=%.6g mem_gbps=%.6g seconds=%.3f", gpu, nd->gflops, nd->mem_gbps,
                 nd->seconds > 0 ? nd->seconds : 0);
    }
    free(err);
    p3d_preflight_free(&pf);
    /* it travels as printable ASCII (wire_tree.c refuses anything else) */
    for (char *c = line; *c; c++)
        if (*c < 32 || *c > 126)
            *c = '?';
}

int p3d_preflight_gathered(const p3d_opts *o, const char *const *names, const char *const *lines, int n,
                           p3d_preflight *pf)
{
    if (p3d_preflight_begin(pf, o, n) < 0)
        return -1;
    size_t nf = strlen(P3D_PREFLIGHT_FAILED);
    int ntcp = 0;
    for (int i = 0; i < n; i++) {
        p3d_preflight_node *nd = &pf->nodes[i];
        nd->name = names[i];
        nd->seconds = -1;
        char why[200];
        if (!lines[i]) {
            pf->nrun_none++; /* started without --preflight: not judged */
            continue;
        }
        if (!strncmp(lines[i], P3D_PREFLIGHT_FAILED, nf)) {
            snprintf(nd->why, sizeof nd->why, "%s", lines[i] + nf); /* as the node said it */
        } else if (p3d_preflight_parse(lines[i], nd, why, sizeof why) < 0) {
            snprintf(nd->why, sizeof nd->why, "its benchmark gave no figures: %s", why);
        } else {
            nd->ran = 1;
            nd->links = p3d_preflight_node_links(o, nd);
            ntcp += nd->tcp_out_mbps >= 0 && nd->tcp_in_mbps >= 0;
            if (nd->seconds > pf->seconds) /* they ran at once: the slowest is the time */
                pf->seconds = nd->seconds;
            continue;
        }
        p3d_preflight_node_clear(nd);
        nd->excluded = 1;
        pf->nexcluded++;
    }
    if (!ntcp)
        pf->tcp_note = PF_TCP_REMOTE;
    return p3d_preflight_judge(pf);
}
