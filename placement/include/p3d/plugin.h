/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * plugin.h — the one plugin registry (placement/util/plugin.c).
 *
 * Optional parts that need a library the core must not link (NVML, libcurl,
 * libpmix) are plugins: shared objects loaded with dlopen at run time. Every
 * kind of plugin is found, checked and reported the same way:
 *
 *  - the file is p3d_<kind>_<name>.so (kind prefixes: "topo", "rdzv",
 *    "policy") and exports ONE const p3d_plugin descriptor whose symbol is
 *    the file name without ".so" (p3d_rdzv_etcd);
 *  - the descriptor's first field is the ABI number; it is read and checked
 *    before anything else, then the kind, the name and the ops table;
 *  - the search path is $P3D_PLUGIN_DIR (':'-separated), then next to the
 *    executable (<dir>/plugins for a build tree, <dir>/../<libdir>/par3drun
 *    for a relocated install), then the configured install libdir;
 *  - a candidate file that cannot be used (dlopen fails, the symbol is
 *    missing, wrong ABI, wrong kind, incomplete descriptor) is skipped, and
 *    that is said: one line on stderr and again in the "not found" message;
 *  - built-in backends are registered in the same registry, and a built-in
 *    of a name wins over a file.
 *
 * Every ops function answers in the same three ways: P3D_PLUGIN_OK (did it),
 * P3D_PLUGIN_DECLINE ("not my environment": no library, no device, not my
 * scheme; the caller goes on without it) and P3D_PLUGIN_FAIL (it applied and
 * failed: the caller reports the message).
 *
 * Plugins cannot call p3d_* functions (the executable does not export
 * them); they only fill what they are handed, allocating with malloc.
 * Structures grow only by appending fields; any other change bumps
 * P3D_PLUGIN_ABI.
 */
#ifndef P3D_PLUGIN_H
#define P3D_PLUGIN_H

#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>

#include "p3d/topo.h"

#ifdef __cplusplus
extern "C" {
#endif

/* 1 was the per-kind ABI of the three loaders this registry replaced; a
 * plugin built against them reads as ABI 1 here and is skipped. 3: the
 * rendezvous backends' leadership (lease_ttl, campaign/keep/notify_fd/news). */
#define P3D_PLUGIN_ABI 3

typedef enum p3d_plugin_kind {
    P3D_PLUGIN_TOPO = 1, /* topology source: adds what hwloc lacks (NVML) */
    P3D_PLUGIN_RDZV,     /* rendezvous bootstrap (launcher/rdzv/rdzv.h) */
    P3D_PLUGIN_POLICY,   /* policy fetch: --policy http(s) URLs */
} p3d_plugin_kind;

enum { P3D_PLUGIN_FAIL = -1, P3D_PLUGIN_DECLINE = 0, P3D_PLUGIN_OK = 1 };

/* The one exported descriptor. */
typedef struct p3d_plugin {
    int abi;          /* P3D_PLUGIN_ABI, first */
    int kind;         /* p3d_plugin_kind */
    const char *name; /* the <name> of p3d_<kind>_<name>.so */
    const void *ops;  /* the kind's ops: p3d_topo_ops, p3d_rdzv_ops, p3d_policy_ops */
} p3d_plugin;

/* P3D_PLUGIN_TOPO. augment() fills what it knows of a local node being built
 * (before p3d_node_finish): links, fabric ids. OK when it filled something,
 * DECLINE when it has nothing to add (no library, no GPU), FAIL when the
 * source is there but broken (the node keeps hwloc's facts; a warning says
 * why). msg (msgcap bytes) takes a one-line reason for DECLINE/FAIL. */
typedef struct p3d_topo_ops {
    int (*augment)(p3d_node *n, char *msg, size_t msgcap);
} p3d_topo_ops;

/* P3D_PLUGIN_RDZV: a rendezvous backend (the launcher's rdzv stage runs it). */
/* What a backend learns; strings are copied into the fixed buffers. */
typedef struct p3d_rdzv_boot {
    int nnodes;            /* > 0 */
    int node_rank;         /* 0..nnodes-1; 0 is the leader */
    char leader_host[256]; /* where node rank 0 listens (leader: bind address) */
    int leader_port;       /* 0: the leader picks one and publish() tells others */
    char token[256];       /* the job's secret, "" when the backend has none */
    char job_id[128];      /* "" when the backend has none; holds --job-id
                              * (or "") when detect() is called */
    /* expected hostname of each node rank, for timeout messages; NULL or
     * entries "" when unknown. malloc'd by the backend, freed by
     * p3d_rdzv_close(). */
    char **hostnames;
    /* in (set before detect()): seconds a dead agent's registration, and
     * a dead leader's leadership, may outlive it in the backend: the
     * job's --node-timeout (2..3600); 0: the backend's own default */
    int lease_ttl;
} p3d_rdzv_boot;

/* What a backend's leadership tells (p3d_rdzv_ops.news). */
enum {
    P3D_RDZV_NEWS_NONE = 0,  /* nothing (yet) */
    P3D_RDZV_NEWS_WON,       /* this node's campaign won: it leads */
    P3D_RDZV_NEWS_NOT_WON,   /* the campaign gave up at its deadline */
    P3D_RDZV_NEWS_LEASE_LOST /* this agent's lease expired, or the backend
                              * did not renew it within its TTL: whatever
                              * this node leads, it leads no more */
};

/* One rendezvous backend: the ops of a P3D_PLUGIN_RDZV plugin (this header;
 * a change of shape here or in p3d_rdzv_boot bumps P3D_PLUGIN_ABI). A .so
 * p3d_rdzv_<name>.so exports the descriptor p3d_rdzv_<name> pointing at
 * these; static and slurm are built-ins of the same registry. Messages go
 * to msg (NUL-terminated, msgcap bytes): plugins cannot use p3d_err. */
typedef struct p3d_rdzv_ops {
    const char *name; /* "static", "slurm", "pmix", "etcd" */
    /* arg: what follows "name:" in --rdzv ("" when none); o_nnodes /
     * o_node_rank: --nnodes / --node-rank (0 / -1 when not given); both
     * 0 and -1 under par3drun --join: the node joins the running job,
     * registers nothing and publish() finds the job's current leader
     * (a backend that cannot find it declines or fails, msg says why).
     * Returns 1 and fills *boot (except a leader_port the leader chooses)
     * and *state when this is its environment (P3D_PLUGIN_OK), 0 to
     * decline ("not my environment"; msg says why), -1 on failure (msg). */
    int (*detect)(const char *arg, int o_nnodes, int o_node_rank, double timeout, p3d_rdzv_boot *boot, void **state,
                  char *msg, size_t msgcap);
    /* Leader side, after it listens: make "host port token" known to the
     * other nodes. Others: wait for it and fill boot->leader_host,
     * leader_port and token. NULL when detect() already knew everything
     * (static, slurm). 0 or -1 with msg; -2 with msg refuses a joiner
     * (exit 2: nothing to join, an untrusted leader value). Bounded by
     * the timeout given to detect(). */
    int (*publish)(void *state, p3d_rdzv_boot *boot, char *msg, size_t msgcap);
    /* Ends the backend's session (PMIx_Finalize, lease revoke). May be
     * NULL. */
    void (*close)(void *state);
    /* Leadership held in the backend (docs/multinode.md, "When the
     * leader dies"): all four, or none (NULL: the job's own majority
     * decides a successor). Each returns at once: the work runs on the
     * backend's threads, the answers come through notify_fd()/news(). */
    /* This node bids to lead. It wins once the leadership (held by the
     * leader with its lease) is free and no node rank of
     * before[0..nbefore) (those ahead of it in the succession) is alive in
     * the backend (a registration held with that agent's lease): checked
     * and taken in one transaction, so the backend's quorum decides, not
     * the job's nodes. value: what the leadership says from then on
     * ("PORT HOST TOKEN restart G node K"). It gives up at until
     * (CLOCK_MONOTONIC seconds): NOT_WON. A new call replaces a bid that
     * is still running. 0 started, -1 with msg. */
    int (*campaign)(void *state, const int *before, int nbefore, const char *value, double until, char *msg,
                    size_t msgcap);
    /* What the leader keeps current for a successor: one line of text
     * (at most 4096 bytes), put under the job prefix in the background
     * with the lease; the newest text wins. 0, or -1 with msg. */
    int (*keep)(void *state, const char *text, char *msg, size_t msgcap);
    /* Readable while news() has something; the backend owns it. -1 none. */
    int (*notify_fd)(void *state);
    /* Takes one piece of news (P3D_RDZV_NEWS_*), oldest first. WON: msg
     * gets the text the last leader kept ("" none); NOT_WON and
     * LEASE_LOST: msg says why. NONE when there is nothing. */
    int (*news)(void *state, char *msg, size_t msgcap);
} p3d_rdzv_ops;

/* P3D_PLUGIN_POLICY. fetch() downloads url into a malloc'd NUL-terminated
 * buffer of at most max bytes (*len excludes the NUL). OK; DECLINE when it
 * does not handle the URL's scheme; FAIL with *err (malloc'd, names the
 * URL). The caller frees *data and *err with free(). */
typedef struct p3d_policy_ops {
    int (*fetch)(const char *url, size_t max, char **data, size_t *len, char **err);
} p3d_policy_ops;

/* The descriptor a plugin exports, named after its file: in
 * p3d_rdzv_etcd.so, P3D_PLUGIN_EXPORT(rdzv, etcd, P3D_PLUGIN_RDZV, &ops)
 * defines `const p3d_plugin p3d_rdzv_etcd` for name "etcd". */
#define P3D_PLUGIN_EXPORT(prefix, name_, kind_, ops_)                                                                  \
    __attribute__((visibility("default")))                                                                             \
    const p3d_plugin p3d_##prefix##_##name_ = {P3D_PLUGIN_ABI, kind_, #name_, ops_}

/* Formats a one-line reason into msg (msgcap bytes) and returns
 * P3D_PLUGIN_FAIL, for ops that answer through a message buffer. Inline
 * because plugins cannot call into par3drun. */
static inline int p3d_plugin_say(char *msg, size_t msgcap, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static inline int p3d_plugin_say(char *msg, size_t msgcap, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, msgcap, fmt, ap);
    va_end(ap);
    return P3D_PLUGIN_FAIL;
}

/* The file-name prefix of a kind: "topo", "rdzv", "policy"; NULL if none. */
const char *p3d_plugin_kind_prefix(int kind);

/* Adds a built-in (a descriptor inside the executable). Idempotent for the
 * same descriptor; -1 with *err when it is malformed or its (kind, name) is
 * taken by another one. */
int p3d_plugin_register(const p3d_plugin *builtin, char **err);

/* The plugin of this kind and name: a registered built-in, an already
 * loaded one, or the first usable p3d_<prefix>_<name>.so on the search path
 * (loaded once, never unloaded). 1 with *out; 0 when there is none, with *err
 * "plugin FILE: not found in DIRS" plus every skipped candidate and why;
 * -1 with *err when name is not a plugin name ([A-Za-z0-9_]+). */
int p3d_plugin_find(int kind, const char *name, const p3d_plugin **out, char **err);

/* "static, slurm": the names of the registered built-ins of a kind. */
char *p3d_plugin_builtin_names(int kind);

/* The search path as a ", "-separated list, for messages and --verbose. */
char *p3d_plugin_search_path(void);

#ifdef __cplusplus
}
#endif
#endif
