/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * mnode_preflight.c — --preflight on one node of a multi-node job
 * (preflight_remote.c has the why): the node's own benchmark before it
 * joins, and the leader's verdict on the figures the records carry, which
 * excludes a slow node the way a failed pre-start --health-check does
 * (its record is marked failed, so exclude_unhealthy in mnode_place.c
 * hands its place to a spare before the policy runs).
 * The TCP ring across the hosts: a listening socket on the node's
 * listening address (rdzv_addr.c) before the join (its port in the JOIN), this node's part run from the
 * rendezvous once the leader named the next node (p3d_rdzv.ring), its
 * figures appended to the line the record carries.
 */
#include "mnode_int.h"
#include "say.h"
#include "preflight.h"

#include "termsafe.h"
#include "rdzv.h"

#include <errno.h>

#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

void p3d_mnode_own_preflight(mnode *m, const char *name)
{
    if (!m->o->preflight)
        return;
    p3d_preflight_own(m->o, name, m->own_pf, sizeof m->own_pf);
    m->own_pf_ran = 1;
    if (m->o->verbose) {
        char line[P3D_GREC_HOW_MAX + 64];
        snprintf(line, sizeof line, "par3drun: node %s: --preflight: %s\n", name, m->own_pf);
        p3d_term_fputs(line, stderr);
    }
}

/* r->ring: this node's part of the ring; own is its gathered record. */
static void mnode_ring(void *ctx, const char *addr, int port, p3d_grec *own)
{
    mnode *m = ctx;
    double out = 0, in = 0;
    char why[200] = "", line[P3D_GREC_HOW_MAX + 1];
    const char *name = m->hello.hostname;
    if (m->ring_fd < 0)
        return; /* ran already (one position per rendezvous) */
    /* the benchmark inherits the socket, nothing else does: it is closed
     * right after */
    errno = 0;
    int kfd = p3d_preflight_key_fd(m->r->boot.token);
    int ok = kfd >= 0 && fcntl(m->ring_fd, F_SETFD, 0) == 0 &&
             p3d_preflight_ring(m->o, name, m->ring_fd, kfd, addr, port, &out, &in, why, sizeof why) == 0;
    if (kfd >= 0)
        close(kfd);
    if (!ok && errno && !why[0])
        snprintf(why, sizeof why, "%s", strerror(errno));
    p3d_mnode_ring_close(m);
    if (!ok) {
        /* the next node waits for this node's stream: an empty one ends
         * its incoming link now (0 MB/s) instead of at its timeout */
        int fd = p3d_tcp_dial(addr, port, p3d_now() + 2);
        if (fd >= 0)
            close(fd);
    }
    if (m->o->verbose) {
        char say[400];
        if (ok)
            snprintf(say, sizeof say, "par3drun: node %s: --preflight TCP ring: %.4g MB/s out to %s:%d, %.4g MB/s in\n",
                     name, out, addr, port, in);
        else
            snprintf(say, sizeof say, "par3drun: node %s: --preflight TCP ring failed: %s\n", name, why);
        p3d_term_fputs(say, stderr);
    }
    if (!own->preflight || !strncmp(own->preflight, P3D_PREFLIGHT_FAILED, strlen(P3D_PREFLIGHT_FAILED)))
        return; /* its own benchmark failed already: that reason stands */
    if (ok)
        snprintf(line, sizeof line, "%s tcp_out_mbps=%.6g tcp_in_mbps=%.6g", own->preflight, out, in);
    else
        snprintf(line, sizeof line, "%sits TCP ring benchmark failed: %.160s", P3D_PREFLIGHT_FAILED, why);
    for (char *c = line; *c; c++) /* it travels as printable ASCII */
        if (*c < 32 || *c > 126)
            *c = '?';
    char *dup = strdup(line);
    if (dup) {
        free(own->preflight);
        own->preflight = dup;
    }
}

void p3d_mnode_ring_open(mnode *m, const char *name)
{
    m->ring_fd = -1;
    m->ring_port = 0;
    if (!m->o->preflight || m->nnodes < 2)
        return;
    char *e = NULL;
    m->ring_fd = p3d_tcp_listen(m->r->bind_addr, 0, &m->ring_port, &e);
    if (m->ring_fd < 0) {
        p3d_say_error("node %s: --preflight: no TCP ring through this node (%s); its TCP bandwidth is not measured",
                      name, e ? e : "cannot listen");
        m->ring_port = 0;
    } else {
        m->r->ring = mnode_ring;
        m->r->ring_ctx = m;
    }
    free(e);
}

void p3d_mnode_ring_close(mnode *m)
{
    if (m->ring_fd >= 0)
        close(m->ring_fd);
    m->ring_fd = -1;
}

int p3d_mnode_judge_preflight(mnode *m, p3d_gather *g, char **err)
{
    int n = m->nnodes, any = 0, rc = -1;
    const char **lines = calloc((size_t)n + 1, sizeof *lines);
    const char **names = calloc((size_t)n + 1, sizeof *names);
    p3d_grec **rec = calloc((size_t)n + 1, sizeof *rec);
    m->pf_names = calloc((size_t)n + 1, sizeof *m->pf_names);
    m->pf_bad = calloc((size_t)n + 1, 1);
    if (!lines || !names || !rec || !m->pf_names || !m->pf_bad) {
        p3d_err(err, "out of memory");
        goto out;
    }
    for (int i = 0; i < g->nrec; i++) {
        p3d_grec *x = &g->recs[i];
        if (x->rank < 0 || x->rank >= n)
            continue;
        rec[x->rank] = x;
        lines[x->rank] = x->preflight;
        any |= x->preflight != NULL;
    }
    if (!any) { /* no node ran one */
        rc = 0;
        goto out;
    }
    /* "host:rank" until the cluster names the nodes (p3d_mnode_name_preflight) */
    for (int i = 0; i < n; i++) {
        if (asprintf(&m->pf_names[i], "%s:%d", rec[i] && rec[i]->hostname ? rec[i]->hostname : "?", i) < 0) {
            m->pf_names[i] = NULL;
            p3d_err(err, "out of memory");
            goto out;
        }
        names[i] = m->pf_names[i];
    }
    if (p3d_preflight_gathered(m->o, names, lines, n, &m->pf) < 0) {
        p3d_err(err, "--preflight: out of memory");
        goto out;
    }
    m->have_pf = 1;
    m->pf_json = p3d_preflight_json(&m->pf); /* NULL (out of memory): placement.json goes without it */
    for (int i = 0; i < n; i++) {
        p3d_grec *x = rec[i];
        if (!m->pf.nodes[i].excluded || !x)
            continue;
        m->pf_bad[i] = 1;
        m->unhealthy[i] = 1;
        if (x->health == P3D_GREC_HEALTH_FAILED)
            continue; /* its --health-check failed too: that reason stands */
        char *how = NULL;
        if (asprintf(&how, P3D_MNODE_PF_PREFIX "%s", m->pf.nodes[i].why) < 0) {
            p3d_err(err, "out of memory");
            goto out;
        }
        if (strlen(how) > P3D_GREC_HOW_MAX)
            how[P3D_GREC_HOW_MAX] = 0;
        free(x->health_how);
        x->health_how = how;
        x->health = P3D_GREC_HEALTH_FAILED;
    }
    rc = 0;
out:
    free(lines);
    free(names);
    free(rec);
    return rc;
}

void p3d_mnode_tell_preflight(mnode *m, const p3d_cluster *c, int events_fd, double t0)
{
    if (!m->have_pf)
        return;
    for (int i = 0; c && i < m->nnodes && (size_t)i < c->nnodes; i++)
        m->pf.nodes[i].name = c->nodes[i].name;
    if (!m->o->quiet)
        p3d_preflight_table(&m->pf, stderr);
    p3d_preflight_events(events_fd, t0, &m->pf);
}

void p3d_mnode_preflight_free(mnode *m)
{
    if (m->have_pf)
        p3d_preflight_free(&m->pf);
    m->have_pf = 0;
    for (int i = 0; m->pf_names && i < m->nnodes; i++)
        free(m->pf_names[i]);
    free(m->pf_names);
    free(m->pf_bad);
    free(m->pf_json);
    m->pf_names = NULL;
    m->pf_bad = NULL;
    m->pf_json = NULL;
}
