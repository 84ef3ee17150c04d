/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * etcd_join.c — the join endpoint in the leader key's fields (etcd_join.h;
 * docs/multinode.md, "Adding a node to a running job").
 */
#include "etcd_join.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* A port in plain decimal digits, 0..65535, ending at a space or the end:
 * its value and *end past it, or -1. */
static long port_at(const char *p, const char **end)
{
    long v = 0;
    const char *q = p;
    while (*q >= '0' && *q <= '9' && q - p < 6)
        v = v * 10 + (*q++ - '0');
    if (q == p || (*q && *q != ' ') || v > 65535)
        return -1;
    *end = q;
    return v;
}

int etcd_join_endpoint(const char *fields, char *host, size_t hcap, int *port, char *msg, size_t cap)
{
    const char *p = fields, *e;
    long first = port_at(p, &e);
    if (first < 0 || *e != ' ' || !e[1] || e[1] == ' ') {
        snprintf(msg, cap, "malformed (expected \"PORT HOST ...\")");
        return -1;
    }
    p = e + 1;
    size_t hl = strcspn(p, " ");
    if (hl >= hcap) {
        snprintf(msg, cap, "its host is over %zu bytes", hcap - 1);
        return -1;
    }
    memcpy(host, p, hl);
    host[hl] = 0;
    p += hl;
    if (!*p) { /* the first leader: its rendezvous port takes joiners */
        if (first < 1) {
            snprintf(msg, cap, "the leader's port is 0");
            return -1;
        }
        *port = (int)first;
        return 0;
    }
    /* a successor's: " restart G node N join J", the join port last */
    const char *j = strstr(p, " join ");
    long jp = j ? port_at(j + 6, &e) : -1;
    if (!j || jp < 0 || *e) {
        snprintf(msg, cap,
                 "a successor's value without its join port (\"... join PORT\"): a par3drun older than "
                 "this one leads the job, which cannot take joiners after a failover");
        return -1;
    }
    if (jp == 0) {
        snprintf(msg, cap,
                 "the job's leader (a successor after a failover) could not open a join port: it takes "
                 "no joiners (its log says why)");
        return -1;
    }
    *port = (int)jp;
    return 0;
}
