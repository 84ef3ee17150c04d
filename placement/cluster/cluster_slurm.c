/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * cluster_slurm.c — the one applier of a Slurm topology to a cluster,
 * whichever file it came from: topology.conf (slurm_conf.c) or the tree
 * and block topologies of a topology.yaml (slurm_yaml.c), both read into
 * slurm_topo.h's structure.
 *
 *  tree   (switches with nodes and child switches): a node's leaf switch
 *         becomes its rack; switch hops between leaf switches become
 *         rack_dist.
 *  block  (blocks with nodes): each block becomes a multi-node NVLink
 *         domain.
 *
 * What is an error and what is a warning (docs/cluster-file.md):
 *  errors   — a switch or block defined twice; a child naming an undefined
 *             switch; a cycle among switches (found by an iterative DFS,
 *             so no input can make it loop or recurse deeply); no node of
 *             the cluster under any switch/in any block (the file describes
 *             another machine, or uses InfiniBand GUIDs instead of host
 *             names). The readers report syntax and shape.
 *  warnings — names that match no node of the cluster (a topology file
 *             usually covers the whole machine, the cluster only part); a
 *             node under two leaf switches or in two blocks (the first in
 *             file order wins, as it does for Slurm's own lookups); nodes
 *             under no switch (each becomes its own rack, distance unknown);
 *             a switch with several parents (distances take the shortest
 *             path); a switch or block with neither nodes nor children.
 */
#include "cluster_internal.h"
#include "slurm_topo.h"
#include "strmap.h"

#include <ctype.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MAX_NAME_WARNINGS 5 /* per kind, then one summary line */
#define MAX_RACK_DIST 4096  /* racks; beyond that rack_dist stays NULL */

typedef struct tc_ent { /* a switch or a block; strings owned by the topology */
    const char *name;
    size_t line;
    const char *nodes;    /* hostlist or NULL */
    const char *switches; /* child switches (hostlist) or NULL */
    size_t *child, nchild;
    size_t nparents;
    int rack; /* rack/domain index once used, else -1 */
} tc_ent;

typedef struct tc_ctx {
    const char *path;
    p3d_cluster *c;
    const p3d_st_topo *t; /* spellings for messages */
    tc_ent *ents;
    size_t nents;
    int kind;           /* 1 tree, 2 block */
    p3d_strmap by_name; /* entity name -> index */
    size_t nunmatched_warned, nunmatched_more;
} tc_ctx;

/* Adds entity e of the topology; a name defined twice is an error. */
static int add_ent(tc_ctx *x, const p3d_st_ent *e, char **err)
{
    size_t prev;
    tc_ent *te = &x->ents[x->nents];
    memset(te, 0, sizeof *te);
    te->rack = -1;
    te->line = e->line;
    te->name = e->name;
    te->nodes = e->nodes;
    te->switches = x->kind == 1 ? e->children : NULL;
    int r = p3d_strmap_put(&x->by_name, e->name, x->nents, &prev);
    if (r < 0)
        return p3d_err(err, "%s: out of memory", x->path);
    if (r == 0)
        return p3d_err(err, "%s:%zu: %s '%s' is already defined on line %zu", x->path, e->line,
                       x->kind == 1 ? "switch" : "block", e->name, x->ents[prev].line);
    x->nents++;
    if (!te->nodes && !te->switches)
        p3d_cluster_warn(x->c, "%s:%zu: %s '%s' has neither %s nor %s", x->path, e->line,
                         x->kind == 1 ? "switch" : "block", e->name, x->t->nodes_key, x->t->children_key);
    return 0;
}

/* ---- tree: children, cycles, distances ----------------------------------- */

static int link_children(tc_ctx *x, char **err)
{
    for (size_t i = 0; i < x->nents; i++) {
        tc_ent *e = &x->ents[i];
        char **names = NULL, *he = NULL;
        size_t n = 0;
        if (!e->switches)
            continue;
        if (p3d_hostlist_expand(e->switches, &names, &n, x->nents + 1, &he) < 0) {
            p3d_err(err, "%s:%zu: switch %s: %s: %s", x->path, e->line, e->name, x->t->children_key, he);
            free(he);
            return -1;
        }
        if (!(e->child = malloc((n ? n : 1) * sizeof *e->child))) {
            p3d_strv_free(names, n);
            return p3d_err(err, "%s: out of memory", x->path);
        }
        for (size_t k = 0; k < n; k++) {
            size_t ci;
            if (!p3d_strmap_get(&x->by_name, names[k], &ci)) {
                p3d_err(err,
                        "%s:%zu: switch %s lists switch '%s', which "
                        "no %s defines",
                        x->path, e->line, e->name, names[k], x->t->switch_def);
                p3d_strv_free(names, n);
                return -1;
            }
            e->child[e->nchild++] = ci;
            x->ents[ci].nparents++;
        }
        p3d_strv_free(names, n);
    }
    return 0;
}

/* Iterative DFS over parent -> child edges; the first back edge found is
 * reported with the path that closes it. */
static int find_cycle(tc_ctx *x, char **err)
{
    int rc = -1;
    size_t S = x->nents;
    unsigned char *color = calloc(S ? S : 1, 1);
    size_t *stack = malloc((S ? S : 1) * sizeof *stack);
    size_t *next = calloc(S ? S : 1, sizeof *next);
    if (!color || !stack || !next) {
        p3d_err(err, "%s: out of memory", x->path);
        goto out;
    }
    for (size_t root = 0; root < S; root++) {
        if (color[root])
            continue;
        size_t sp = 0;
        stack[sp++] = root;
        color[root] = 1;
        while (sp) {
            size_t u = stack[sp - 1];
            if (next[u] == x->ents[u].nchild) {
                color[u] = 2;
                sp--;
                continue;
            }
            size_t v = x->ents[u].child[next[u]++];
            if (color[v] == 0) {
                color[v] = 1;
                stack[sp++] = v;
            } else if (color[v] == 1) {
                /* v is on the stack: the cycle is stack[from..sp) -> v */
                size_t from = sp - 1;
                while (stack[from] != v)
                    from--;
                char path[512];
                size_t k = 0, shown = 0;
                path[0] = 0;
                for (size_t i = from; i < sp && k < sizeof path - 64; i++) {
                    k += (size_t)snprintf(path + k, sizeof path - k, "%s -> ", x->ents[stack[i]].name);
                    shown++;
                }
                if (shown < sp - from)
                    k += (size_t)snprintf(path + k, sizeof path - k, "... -> ");
                snprintf(path + k, sizeof path - k, "%s", x->ents[v].name);
                p3d_err(err,
                        "%s:%zu: switches form a cycle: %s (topology/"
                        "tree describes a tree: each switch lists only the "
                        "switches below it)",
                        x->path, x->ents[u].line, path);
                goto out;
            }
        }
    }
    rc = 0;
out:
    free(color);
    free(stack);
    free(next);
    return rc;
}

/* Hops between every pair of used leaf switches (BFS over the undirected
 * switch graph, once per leaf). Racks without a switch get -1. */
static int rack_distances(tc_ctx *x, size_t nracks, const size_t *rack_sw, int **out, char **err)
{
    int rc = -1;
    size_t S = x->nents, E = 0;
    size_t *off = NULL, *adj = NULL, *fill = NULL, *queue = NULL;
    int *dist = NULL, *rd = NULL;
    *out = NULL;
    for (size_t i = 0; i < S; i++)
        E += x->ents[i].nchild;
    off = calloc(S + 1, sizeof *off);
    adj = malloc((E ? 2 * E : 1) * sizeof *adj);
    fill = calloc(S ? S : 1, sizeof *fill);
    queue = malloc((S ? S : 1) * sizeof *queue);
    dist = malloc((S ? S : 1) * sizeof *dist);
    rd = malloc((nracks ? nracks * nracks : 1) * sizeof *rd);
    if (!off || !adj || !fill || !queue || !dist || !rd)
        goto oom;
    for (size_t i = 0; i < S; i++)
        for (size_t k = 0; k < x->ents[i].nchild; k++) {
            off[i + 1]++;
            off[x->ents[i].child[k] + 1]++;
        }
    for (size_t i = 0; i < S; i++)
        off[i + 1] += off[i];
    for (size_t i = 0; i < S; i++)
        for (size_t k = 0; k < x->ents[i].nchild; k++) {
            size_t j = x->ents[i].child[k];
            adj[off[i] + fill[i]++] = j;
            adj[off[j] + fill[j]++] = i;
        }
    for (size_t a = 0; a < nracks; a++) {
        for (size_t b = 0; b < nracks; b++)
            rd[a * nracks + b] = a == b ? 0 : -1;
        if (rack_sw[a] == SIZE_MAX)
            continue;
        for (size_t i = 0; i < S; i++)
            dist[i] = -1;
        size_t qh = 0, qt = 0;
        queue[qt++] = rack_sw[a];
        dist[rack_sw[a]] = 0;
        while (qh < qt) {
            size_t u = queue[qh++];
            for (size_t k = off[u]; k < off[u + 1]; k++)
                if (dist[adj[k]] < 0) {
                    dist[adj[k]] = dist[u] + 1;
                    queue[qt++] = adj[k];
                }
        }
        for (size_t b = 0; b < nracks; b++)
            if (b != a && rack_sw[b] != SIZE_MAX)
                rd[a * nracks + b] = dist[rack_sw[b]];
    }
    *out = rd;
    rd = NULL;
    rc = 0;
    goto out;
oom:
    p3d_err(err, "%s: out of memory", x->path);
out:
    free(off);
    free(adj);
    free(fill);
    free(queue);
    free(dist);
    free(rd);
    return rc;
}

/* ---- matching names to the cluster --------------------------------------- */

static int looks_guid(const char *s)
{
    if (s[0] != '0' || (s[1] != 'x' && s[1] != 'X') || !s[2])
        return 0;
    for (s += 2; *s; s++)
        if (!isxdigit((unsigned char)*s))
            return 0;
    return 1;
}

/* A node whose name ends in `name` ("n019" -> "circe-n019"), or NULL. */
static const char *suffix_match(const p3d_cluster *c, const char *name)
{
    size_t ln = strlen(name);
    for (size_t i = 0; i < c->nnodes; i++) {
        size_t lc = strlen(c->nodes[i].name);
        if (lc > ln && strcmp(c->nodes[i].name + lc - ln, name) == 0)
            return c->nodes[i].name;
    }
    return NULL;
}

static void warn_unmatched(tc_ctx *x, const tc_ent *e, char **names, size_t n)
{
    if (x->nunmatched_warned >= MAX_NAME_WARNINGS) {
        x->nunmatched_more++;
        return;
    }
    x->nunmatched_warned++;
    char *list = p3d_hostlist_compress(names, n), hint[320] = "";
    const char *like = suffix_match(x->c, names[0]);
    if (like)
        snprintf(hint, sizeof hint, " (did you mean %s?)", like);
    else if (looks_guid(names[0]))
        snprintf(hint, sizeof hint,
                 " (these look like InfiniBand GUIDs, "
                 "not host names)");
    p3d_cluster_warn(x->c,
                     "%s:%zu: %s %s lists %zu name%s that match%s no "
                     "node of the cluster: %s%s",
                     x->path, e->line, x->kind == 1 ? "switch" : "block", e->name, n, n == 1 ? "" : "s",
                     n == 1 ? "es" : "", list ? list : "?", hint);
    free(list);
}

/* For every entity with Nodes=, marks each cluster node with the first
 * entity (file order) listing it in owner[]; SIZE_MAX = none. */
static int match_nodes(tc_ctx *x, size_t *owner, size_t *matched, char **err)
{
    int rc = -1;
    p3d_strmap byname = {0};
    char **unm = NULL;
    size_t ndup = 0;
    char *dups[MAX_NAME_WARNINGS];
    size_t dup_a[MAX_NAME_WARNINGS], dup_b[MAX_NAME_WARNINGS];
    *matched = 0;
    if (p3d_strmap_init(&byname, x->c->nnodes) < 0)
        goto oom;
    for (size_t i = 0; i < x->c->nnodes; i++) {
        owner[i] = SIZE_MAX;
        if (p3d_strmap_put(&byname, x->c->nodes[i].name, i, NULL) < 0)
            goto oom;
    }
    for (size_t s = 0; s < x->nents; s++) {
        tc_ent *e = &x->ents[s];
        char **names = NULL, *he = NULL;
        size_t n = 0, nunm = 0;
        if (!e->nodes)
            continue;
        if (p3d_hostlist_expand(e->nodes, &names, &n, P3D_CLUSTER_MAX_NODES, &he) < 0) {
            p3d_err(err, "%s:%zu: %s %s: %s: %s", x->path, e->line, x->kind == 1 ? "switch" : "block", e->name,
                    x->t->nodes_key, he);
            free(he);
            goto out;
        }
        free(unm);
        if (!(unm = malloc((n ? n : 1) * sizeof *unm))) {
            p3d_strv_free(names, n);
            goto oom;
        }
        for (size_t k = 0; k < n; k++) {
            size_t ni;
            if (!p3d_strmap_get(&byname, names[k], &ni)) {
                unm[nunm++] = names[k];
                continue;
            }
            if (owner[ni] == SIZE_MAX) {
                owner[ni] = s;
                (*matched)++;
            } else if (owner[ni] != s) {
                if (ndup < MAX_NAME_WARNINGS) {
                    dups[ndup] = x->c->nodes[ni].name;
                    dup_a[ndup] = owner[ni];
                    dup_b[ndup] = s;
                }
                ndup++;
            }
        }
        if (nunm)
            warn_unmatched(x, e, unm, nunm);
        p3d_strv_free(names, n);
    }
    const char *what = x->kind == 1 ? "listed under switches" : "in blocks";
    for (size_t i = 0; i < ndup && i < MAX_NAME_WARNINGS; i++)
        p3d_cluster_warn(x->c,
                         "%s:%zu: node %s is %s %s (line %zu) and %s; "
                         "using %s",
                         x->path, x->ents[dup_b[i]].line, dups[i], what, x->ents[dup_a[i]].name, x->ents[dup_a[i]].line,
                         x->ents[dup_b[i]].name, x->ents[dup_a[i]].name);
    if (ndup > MAX_NAME_WARNINGS)
        p3d_cluster_warn(x->c, "%s: %zu more nodes are %s twice", x->path, ndup - MAX_NAME_WARNINGS, what);
    if (x->nunmatched_more)
        p3d_cluster_warn(x->c,
                         "%s: %zu more %s list names that match no node "
                         "of the cluster",
                         x->path, x->nunmatched_more, x->kind == 1 ? "switches" : "blocks");
    rc = 0;
    goto out;
oom:
    p3d_err(err, "%s: out of memory", x->path);
out:
    free(unm);
    p3d_strmap_free(&byname);
    return rc;
}

/* Names of the cluster nodes with owner SIZE_MAX, compressed. */
static char *orphans(const p3d_cluster *c, const size_t *owner, size_t *count)
{
    char **v = malloc((c->nnodes ? c->nnodes : 1) * sizeof *v);
    size_t n = 0;
    if (!v)
        return NULL;
    for (size_t i = 0; i < c->nnodes; i++)
        if (owner[i] == SIZE_MAX)
            v[n++] = c->nodes[i].name;
    *count = n;
    char *s = p3d_hostlist_compress(v, n);
    free(v);
    return s;
}

/* ---- applying ------------------------------------------------------------ */

static int apply_tree(tc_ctx *x, const size_t *owner, char **err)
{
    int rc = -1;
    p3d_cluster *c = x->c;
    char **racks = NULL, *orph = NULL;
    size_t nracks = 0, cap = 0, norph = 0;
    size_t *rack_sw = NULL, *node_rack = NULL;
    int *rd = NULL;
    if (!(node_rack = malloc(c->nnodes * sizeof *node_rack)))
        goto oom;
    /* racks: leaf switches in node-list order of first use, then one rack
     * per node that no switch lists */
    for (size_t i = 0; i < c->nnodes; i++) {
        size_t s = owner[i];
        char *nm;
        if (s != SIZE_MAX && x->ents[s].rack >= 0) {
            node_rack[i] = (size_t)x->ents[s].rack;
            continue;
        }
        if (s == SIZE_MAX) {
            if (asprintf(&nm, "noswitch:%s", c->nodes[i].name) < 0)
                goto oom;
        } else if (!(nm = strdup(x->ents[s].name))) {
            goto oom;
        }
        long k = p3d_strv_push(&racks, &nracks, &cap, nm);
        if (k < 0)
            goto oom;
        size_t *a = realloc(rack_sw, cap * sizeof *a);
        if (!a)
            goto oom;
        rack_sw = a;
        rack_sw[k] = s;
        if (s != SIZE_MAX)
            x->ents[s].rack = (int)k;
        node_rack[i] = (size_t)k;
    }
    if ((orph = orphans(c, owner, &norph)) && norph)
        p3d_cluster_warn(c,
                         "%s: %zu node%s of the cluster %s under no switch; "
                         "each is its own rack at unknown distance: %s",
                         x->path, norph, norph == 1 ? "" : "s", norph == 1 ? "is" : "are", orph);
    for (size_t s = 0; s < x->nents; s++)
        if (x->ents[s].nparents > 1)
            p3d_cluster_warn(c,
                             "%s:%zu: switch %s is listed under %zu "
                             "switches; distances take the shortest path",
                             x->path, x->ents[s].line, x->ents[s].name, x->ents[s].nparents);
    if (nracks <= MAX_RACK_DIST) {
        if (rack_distances(x, nracks, rack_sw, &rd, err) < 0)
            goto out;
    } else {
        p3d_cluster_warn(c,
                         "%s: %zu racks: switch distances between racks "
                         "are not kept above %d racks",
                         x->path, nracks, MAX_RACK_DIST);
    }
    int had_racks = c->nracks > 1 || (c->nracks == 1 && strcmp(c->racks[0], "default") != 0);
    if (had_racks)
        p3d_cluster_warn(c, "%s: leaf switches replace the racks of %s", x->path,
                         c->source ? c->source : "the cluster");
    p3d_strv_free(c->racks, c->nracks);
    free(c->rack_dist);
    c->racks = racks;
    c->nracks = nracks;
    c->rack_dist = rd;
    racks = NULL;
    rd = NULL;
    for (size_t i = 0; i < c->nnodes; i++)
        c->nodes[i].rack = (int)node_rack[i];
    rc = 0;
    goto out;
oom:
    p3d_err(err, "%s: out of memory", x->path);
out:
    p3d_strv_free(racks, nracks);
    free(rack_sw);
    free(node_rack);
    free(orph);
    free(rd);
    return rc;
}

static int apply_block(tc_ctx *x, const size_t *owner, char **err)
{
    int rc = -1;
    p3d_cluster *c = x->c;
    char **doms = NULL, *orph = NULL;
    size_t ndoms = 0, cap = 0, norph = 0;
    int *node_dom = NULL;
    if (!(node_dom = malloc(c->nnodes * sizeof *node_dom)))
        goto oom;
    for (size_t i = 0; i < c->nnodes; i++) {
        size_t s = owner[i];
        if (s == SIZE_MAX) {
            node_dom[i] = -1;
            continue;
        }
        if (x->ents[s].rack < 0) {
            long k = p3d_strv_push(&doms, &ndoms, &cap, strdup(x->ents[s].name));
            if (k < 0)
                goto oom;
            x->ents[s].rack = (int)k;
        }
        node_dom[i] = x->ents[s].rack;
    }
    if ((orph = orphans(c, owner, &norph)) && norph)
        p3d_cluster_warn(c,
                         "%s: %zu node%s of the cluster %s in no block "
                         "(no multi-node NVLink domain): %s",
                         x->path, norph, norph == 1 ? "" : "s", norph == 1 ? "is" : "are", orph);
    if (c->nnvl_domains)
        p3d_cluster_warn(c, "%s: blocks replace the nvlink_domain values of %s", x->path,
                         c->source ? c->source : "the cluster");
    p3d_strv_free(c->nvl_domains, c->nnvl_domains);
    c->nvl_domains = doms;
    c->nnvl_domains = ndoms;
    doms = NULL;
    for (size_t i = 0; i < c->nnodes; i++)
        c->nodes[i].nvl_domain = node_dom[i];
    rc = 0;
    goto out;
oom:
    p3d_err(err, "%s: out of memory", x->path);
out:
    p3d_strv_free(doms, ndoms);
    free(node_dom);
    free(orph);
    return rc;
}

/* Links, checks and applies the switches (x->kind 1) or blocks (2) in x. */
static int apply_ctx(tc_ctx *x, char **err)
{
    int rc = -1;
    p3d_cluster *c = x->c;
    const char *path = x->path;
    size_t matched = 0, *owner = NULL;
    if (x->kind == 1 && (link_children(x, err) < 0 || find_cycle(x, err) < 0))
        goto out;
    if (!(owner = malloc(c->nnodes * sizeof *owner))) {
        p3d_err(err, "%s: out of memory", path);
        goto out;
    }
    if (match_nodes(x, owner, &matched, err) < 0)
        goto out;
    if (matched == 0) {
        int guid = 0;
        for (size_t i = 0; i < x->nents && !guid; i++) {
            char first[64];
            if (!x->ents[i].nodes)
                continue;
            snprintf(first, sizeof first, "%.*s", (int)strcspn(x->ents[i].nodes, ", \t"), x->ents[i].nodes);
            guid = looks_guid(first);
        }
        p3d_err(err, "%s: no node of the cluster (%s...) is %s%s%s%s", path, c->nodes[0].name,
                x->kind == 1 ? "under any switch" : "in any block",
                guid ? "; its " : "; is this the topology of another machine?", guid ? x->t->nodes_key : "",
                guid ? " hold InfiniBand GUIDs (0x...), not host names" : "");
        goto out;
    }
    if ((x->kind == 1 ? apply_tree(x, owner, err) : apply_block(x, owner, err)) < 0)
        goto out;
    rc = 0;
out:
    free(owner);
    return rc;
}

static void ctx_free(tc_ctx *x)
{
    for (size_t i = 0; i < x->nents; i++)
        free(x->ents[i].child);
    free(x->ents);
    p3d_strmap_free(&x->by_name);
}

/* The one applier: of each kind, the cluster_default topology, else the
 * first; a tree gives racks and a block NVLink domains. A topology.conf
 * is one topology of one kind; a topology.yaml may hold several. */
static int apply_topologies(p3d_cluster *c, const char *path, const p3d_st_topo *t, size_t n, char **err)
{
    int used = 0;
    for (int kind = P3D_ST_TREE; kind <= P3D_ST_BLOCK; kind++) {
        size_t pick = SIZE_MAX, count = 0;
        for (size_t i = 0; i < n; i++) {
            if (t[i].kind != kind)
                continue;
            count++;
            if (pick == SIZE_MAX || (t[i].cluster_default && !t[pick].cluster_default))
                pick = i;
        }
        if (pick == SIZE_MAX)
            continue;
        const p3d_st_topo *tp = &t[pick];
        if (count > 1)
            p3d_cluster_warn(c, "%s: %zu %s topologies; using '%s' (line %zu, %s) and ignoring the others", path, count,
                             kind == P3D_ST_TREE ? "tree" : "block", tp->name ? tp->name : "?", tp->line,
                             tp->cluster_default ? "cluster_default" : "the first");
        tc_ctx x = {.path = path, .c = c, .t = tp, .kind = kind == P3D_ST_TREE ? 1 : 2};
        int ok = p3d_strmap_init(&x.by_name, 64) == 0 &&
                 (x.ents = malloc((tp->nents ? tp->nents : 1) * sizeof *x.ents)) != NULL;
        if (!ok)
            p3d_err(err, "%s: out of memory", path);
        for (size_t k = 0; ok && k < tp->nents; k++)
            ok = add_ent(&x, &tp->ents[k], err) == 0;
        if (ok)
            ok = apply_ctx(&x, err) == 0;
        ctx_free(&x);
        if (!ok)
            return -1;
        used++;
    }
    if (!used)
        return p3d_err(err, "%s: only flat topologies: no switches or blocks to take racks or NVLink domains from",
                       path);
    return 0;
}

int p3d_cluster_apply_slurm_topology(p3d_cluster *c, const char *path, char **err)
{
    int rc = -1;
    char *buf = NULL;
    size_t len = 0, n = 0;
    p3d_st_topo *t = NULL;
    if (!c || c->nnodes == 0)
        return p3d_err(err, "%s: no cluster nodes to apply it to", path);
    if (p3d_read_small_file(path, "Slurm topology", P3D_CLUSTER_MAX_FILE, &buf, &len, err) < 0)
        goto out;
    if (memchr(buf, 0, len)) {
        p3d_err(err, "%s: binary data (NUL byte); expected a text topology.conf or topology.yaml", path);
        goto out;
    }
    size_t pl = strlen(path);
    int yaml = (pl > 5 && !strcmp(path + pl - 5, ".yaml")) || (pl > 4 && !strcmp(path + pl - 4, ".yml")) ||
               p3d_slurm_yaml_sniff(buf);
    if (yaml ? p3d_slurm_yaml_parse(c, path, buf, &t, &n, err) : p3d_slurm_conf_parse(c, path, buf, &t, err))
        goto out;
    if (!yaml)
        n = 1;
    if (apply_topologies(c, path, t, n, err) < 0)
        goto out;
    free(c->slurm_topology);
    c->slurm_topology = strdup(path);
    rc = 0;
out:
    p3d_st_free(t, n);
    free(buf);
    return rc;
}
