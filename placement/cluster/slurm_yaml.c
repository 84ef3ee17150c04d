/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * slurm_yaml.c — reads Slurm's topology.yaml (topology.yaml(5)) through
 * libyaml into slurm_topo.h's structure: a YAML list of topologies, each
 *
 *   - topology: NAME            (first attribute, unique)
 *     cluster_default: BOOL     (optional)
 *     tree:                     | block:                  | flat: true
 *       switches:               |   block_sizes: [4, 16]  |
 *       - switch: NAME          |   blocks:               |
 *         children: HOSTLIST    |   - block: NAME         |
 *         nodes: HOSTLIST       |     nodes: HOSTLIST     |
 *
 * libyaml's event parser does the YAML (any block or flow style, quoting,
 * comments); the events are built here into a small tree, iteratively and
 * with nesting bounded (MAX_DEPTH), so no input recurses or grows a deep
 * stack. Refused with the line named, because a topology.yaml never needs
 * them and each can make a file mean something its reader does not see:
 * anchors and aliases, tags, directives, several documents, duplicate
 * keys, non-scalar keys. children/nodes may be a hostlist or a YAML list
 * of names.
 */
#include "slurm_topo.h"

#include "cluster_internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <yaml.h>

#define MAX_DEPTH 16
#define MAX_SWITCH_NAME 64 /* topology.yaml(5): a switch name is at most 64 characters */

enum { Y_NULL, Y_SCALAR, Y_SEQ, Y_MAP };

typedef struct yn {
    int t;
    size_t line;
    char *s;       /* scalar */
    struct yn **v; /* sequence items / mapping values */
    char **k;      /* mapping keys */
    size_t *kline; /* and the lines they are on */
    size_t n, cap;
    char *key; /* a mapping being built: the key waiting for its value */
    size_t key_line;
} yn;

typedef struct yp {
    const char *path;
    p3d_cluster *c;
    char **err;
} yp;

static void yn_free(yn *y)
{
    if (!y)
        return;
    for (size_t i = 0; i < y->n; i++) {
        yn_free(y->v[i]);
        if (y->k)
            free(y->k[i]);
    }
    free(y->v);
    free(y->k);
    free(y->kline);
    free(y->s);
    free(y->key);
    free(y);
}

static yn *yn_new(int t, size_t line)
{
    yn *y = calloc(1, sizeof *y);
    if (y) {
        y->t = t;
        y->line = line;
    }
    return y;
}

static int yn_push(yn *y, char *key, size_t kline, yn *val)
{
    if (y->n == y->cap) {
        size_t nc = y->cap ? y->cap * 2 : 8;
        yn **v = realloc(y->v, nc * sizeof *v);
        if (!v)
            return -1;
        y->v = v;
        if (y->t == Y_MAP) {
            char **k = realloc(y->k, nc * sizeof *k);
            if (!k)
                return -1;
            y->k = k;
            size_t *kl = realloc(y->kline, nc * sizeof *kl);
            if (!kl)
                return -1;
            y->kline = kl;
        }
        y->cap = nc;
    }
    if (y->t == Y_MAP) {
        y->k[y->n] = key;
        y->kline[y->n] = kline;
    }
    y->v[y->n++] = val;
    return 0;
}

/* ---- events to a tree ---------------------------------------------------- */

/* libyaml's own error, as PATH:LINE:COL. A tab where the indentation is
 * gets its own message: libyaml only says the character cannot start a
 * token. */
static int syntax_error(yp *p, const char *buf, const yaml_parser_t *ps)
{
    size_t line = ps->problem_mark.line + 1, col = ps->problem_mark.column + 1;
    const char *s = buf;
    for (size_t l = 1; l < line && s; l++) {
        s = strchr(s, '\n');
        if (s)
            s++;
    }
    if (s) {
        size_t k = strspn(s, " ");
        if (s[k] == '\t')
            return p3d_err(p->err, "%s:%zu: a tab in the indentation; YAML indents with spaces", p->path, line);
    }
    if (ps->error == YAML_MEMORY_ERROR)
        return p3d_err(p->err, "%s: out of memory", p->path);
    const char *problem = ps->problem ? ps->problem : "a syntax error";
    const char *hint = strstr(problem, "mapping values") ? " (is the indentation right?)" : "";
    /* where the construct started is where to look ("while scanning a
     * quoted scalar": the quote that is never closed) */
    if (ps->context)
        return p3d_err(p->err, "%s:%zu:%zu: invalid YAML: %s (line %zu, column %zu) %s", p->path,
                       (size_t)ps->context_mark.line + 1, (size_t)ps->context_mark.column + 1, problem, line, col,
                       ps->context);
    return p3d_err(p->err, "%s:%zu:%zu: invalid YAML: %s%s", p->path, line, col, problem, hint);
}

/* What a topology.yaml does not need, refused by name. */
static int refuse(yp *p, size_t line, const char *what, const char *text)
{
    return p3d_err(p->err,
                   "%s:%zu: %s%s%s%s is not accepted in a topology.yaml (it needs none); write the value "
                   "plainly",
                   p->path, line, what, text ? " '" : "", text ? text : "", text ? "'" : "");
}

/* A scalar's value as a node: plain empty, "~" and "null" are null; a
 * control character (from an escape) is refused. */
static yn *scalar_node(yp *p, const yaml_event_t *ev, size_t line)
{
    const char *v = (const char *)ev->data.scalar.value;
    size_t len = ev->data.scalar.length;
    if (ev->data.scalar.style == YAML_PLAIN_SCALAR_STYLE &&
        (len == 0 || !strcmp(v, "~") || !strcmp(v, "null") || !strcmp(v, "Null") || !strcmp(v, "NULL")))
        return yn_new(Y_NULL, line);
    for (size_t i = 0; i < len; i++)
        if ((unsigned char)v[i] < 0x20) {
            p3d_err(p->err, "%s:%zu: control character 0x%02x in a value", p->path, line, (unsigned char)v[i]);
            return NULL;
        }
    yn *y = yn_new(Y_SCALAR, line);
    if (y && !(y->s = strndup(v, len))) {
        free(y);
        y = NULL;
    }
    if (!y)
        p3d_err(p->err, "%s: out of memory", p->path);
    return y;
}

/* Puts node y into its parent (the top of stack), or makes it the root.
 * In a mapping a node is first its key (a scalar), then the value. */
static int attach(yp *p, yn **stack, int depth, yn **root, yn *y)
{
    if (depth == 0) {
        *root = y;
        return 0;
    }
    yn *top = stack[depth - 1];
    if (top->t == Y_SEQ) {
        if (yn_push(top, NULL, 0, y) < 0)
            goto oom;
        return 0;
    }
    if (!top->key) {
        if (y->t != Y_SCALAR && y->t != Y_NULL) {
            size_t line = y->line;
            const char *what = y->t == Y_SEQ ? "list" : "mapping";
            yn_free(y);
            return p3d_err(p->err, "%s:%zu: a mapping key must be a name, not a %s", p->path, line, what);
        }
        for (size_t k = 0; y->s && k < top->n; k++)
            if (!strcmp(top->k[k], y->s)) {
                p3d_err(p->err, "%s:%zu: '%s' appears twice (first on line %zu)", p->path, y->line, y->s,
                        top->kline[k]);
                yn_free(y);
                return -1;
            }
        if (!y->s) {
            size_t line = y->line;
            yn_free(y);
            return p3d_err(p->err, "%s:%zu: an empty mapping key; expected 'key: value'", p->path, line);
        }
        top->key = y->s;
        top->key_line = y->line;
        y->s = NULL;
        yn_free(y);
        return 0;
    }
    if (yn_push(top, top->key, top->key_line, y) < 0)
        goto oom;
    top->key = NULL;
    return 0;
oom:
    yn_free(y);
    return p3d_err(p->err, "%s: out of memory", p->path);
}

/* Parses buf into *root (NULL for an empty stream). 0 or -1 with *err. */
static int build(yp *p, const char *buf, yn **root)
{
    yaml_parser_t ps;
    yaml_event_t ev;
    yn *stack[MAX_DEPTH + 1];
    int depth = 0, rc = -1, docs = 0, done = 0;
    *root = NULL;
    if (!yaml_parser_initialize(&ps))
        return p3d_err(p->err, "%s: out of memory", p->path);
    yaml_parser_set_input_string(&ps, (const unsigned char *)buf, strlen(buf));
    while (!done) {
        if (!yaml_parser_parse(&ps, &ev)) {
            syntax_error(p, buf, &ps);
            goto out;
        }
        size_t line = ev.start_mark.line + 1;
        yn *y = NULL;
        const yaml_char_t *anchor = NULL, *tag = NULL;
        int fail = 0;
        switch (ev.type) {
        case YAML_STREAM_END_EVENT: done = 1; break;
        case YAML_DOCUMENT_START_EVENT:
            if (++docs > 1)
                fail = p3d_err(p->err,
                               "%s:%zu: one YAML document expected (a topology.yaml is one list of "
                               "topologies)",
                               p->path, line);
            else if (ev.data.document_start.version_directive ||
                     ev.data.document_start.tag_directives.start != ev.data.document_start.tag_directives.end)
                fail = p3d_err(p->err, "%s:%zu: YAML directives ('%%...') are not supported here", p->path, line);
            break;
        case YAML_ALIAS_EVENT: fail = refuse(p, line, "an alias", (const char *)ev.data.alias.anchor); break;
        case YAML_SCALAR_EVENT:
            anchor = ev.data.scalar.anchor;
            tag = ev.data.scalar.tag;
            if (!anchor && !tag && !(y = scalar_node(p, &ev, line)))
                fail = -1;
            break;
        case YAML_SEQUENCE_START_EVENT:
        case YAML_MAPPING_START_EVENT:
            anchor =
                ev.type == YAML_SEQUENCE_START_EVENT ? ev.data.sequence_start.anchor : ev.data.mapping_start.anchor;
            tag = ev.type == YAML_SEQUENCE_START_EVENT ? ev.data.sequence_start.tag : ev.data.mapping_start.tag;
            if (anchor || tag)
                break;
            if (depth >= MAX_DEPTH)
                fail = p3d_err(p->err, "%s:%zu: nested deeper than %d levels; a topology.yaml needs 5", p->path, line,
                               MAX_DEPTH);
            else if (!(y = yn_new(ev.type == YAML_SEQUENCE_START_EVENT ? Y_SEQ : Y_MAP, line)))
                fail = p3d_err(p->err, "%s: out of memory", p->path);
            break;
        case YAML_SEQUENCE_END_EVENT:
        case YAML_MAPPING_END_EVENT: depth--; break;
        default: break;
        }
        if (!fail && anchor)
            fail = refuse(p, line, "an anchor", (const char *)anchor);
        else if (!fail && tag) {
            /* as written: libyaml hands "!!str" over resolved */
            static const char core[] = "tag:yaml.org,2002:";
            char shown[128];
            const char *tg = (const char *)tag;
            if (!strncmp(tg, core, sizeof core - 1))
                snprintf(shown, sizeof shown, "!!%.100s", tg + sizeof core - 1);
            else
                snprintf(shown, sizeof shown, "%.120s", tg);
            fail = refuse(p, line, "a tag", shown);
        }
        yaml_event_delete(&ev);
        if (fail)
            goto out;
        if (!y)
            continue;
        int container = y->t == Y_SEQ || y->t == Y_MAP;
        if (attach(p, stack, depth, root, y) < 0)
            goto out;
        if (container)
            stack[depth++] = y;
    }
    rc = 0;
out:
    if (rc < 0) {
        yn_free(*root);
        *root = NULL;
    }
    yaml_parser_delete(&ps);
    return rc;
}

/* ---- topology.yaml's shape ---------------------------------------------------- */

static const yn *get(const yn *m, const char *key)
{
    for (size_t i = 0; m && m->t == Y_MAP && i < m->n; i++)
        if (!strcmp(m->k[i], key))
            return m->v[i];
    return NULL;
}

static void warn_unknown(yp *p, const yn *m, const char *const *known, const char *where)
{
    for (size_t i = 0; i < m->n; i++) {
        int ok = 0;
        for (size_t k = 0; known[k] && !ok; k++)
            ok = !strcmp(m->k[i], known[k]);
        if (!ok)
            p3d_cluster_warn(p->c, "%s:%zu: unknown key '%s' in %s ignored", p->path, m->v[i]->line, m->k[i], where);
    }
}

static int want_bool(yp *p, const yn *v, const char *key, int *out)
{
    static const char *const t[] = {"true", "yes", "on", NULL}, *const f[] = {"false", "no", "off", NULL};
    if (v && v->t == Y_SCALAR) {
        for (size_t i = 0; t[i]; i++)
            if (!strcasecmp(v->s, t[i]))
                return *out = 1, 0;
        for (size_t i = 0; f[i]; i++)
            if (!strcasecmp(v->s, f[i]))
                return *out = 0, 0;
    }
    return p3d_err(p->err, "%s:%zu: %s: expected true or false, found '%s'", p->path, v ? v->line : 0, key,
                   v && v->t == Y_SCALAR ? v->s : "a list or mapping");
}

/* A name: a non-empty scalar. */
static int want_name(yp *p, const yn *m, const char *key, const char *what, char **out)
{
    const yn *v = get(m, key);
    if (!v || v->t == Y_NULL)
        return p3d_err(p->err, "%s:%zu: %s without '%s:' (it must name the %s)", p->path, m->line, what, key, what);
    if (v->t != Y_SCALAR || !v->s[0])
        return p3d_err(p->err, "%s:%zu: %s: expected a name", p->path, v->line, key);
    if (!(*out = strdup(v->s)))
        return p3d_err(p->err, "%s: out of memory", p->path);
    return 0;
}

/* A hostlist: a scalar ("n[1-4],n9") or a list of them, joined by commas. */
static int want_hostlist(yp *p, const yn *v, const char *key, char **out)
{
    *out = NULL;
    if (!v || v->t == Y_NULL)
        return 0;
    if (v->t == Y_SCALAR) {
        if (!v->s[0])
            return 0;
        return (*out = strdup(v->s)) ? 0 : p3d_err(p->err, "%s: out of memory", p->path);
    }
    if (v->t != Y_SEQ)
        return p3d_err(p->err, "%s:%zu: %s: expected a host list ('n[01-04]') or a list of names", p->path, v->line,
                       key);
    size_t len = 1;
    for (size_t i = 0; i < v->n; i++) {
        if (v->v[i]->t != Y_SCALAR || !v->v[i]->s[0])
            return p3d_err(p->err, "%s:%zu: %s: item %zu is not a name", p->path, v->v[i]->line, key, i + 1);
        len += strlen(v->v[i]->s) + 1;
    }
    if (v->n == 0)
        return 0;
    char *s = malloc(len);
    if (!s)
        return p3d_err(p->err, "%s: out of memory", p->path);
    s[0] = 0;
    for (size_t i = 0; i < v->n; i++) {
        if (i)
            strcat(s, ",");
        strcat(s, v->v[i]->s);
    }
    *out = s;
    return 0;
}

static int block_sizes(yp *p, const yn *v)
{
    if (!v || v->t == Y_NULL)
        return 0;
    /* a list of numbers, or one scalar "4,16" as in topology.conf */
    size_t n = v->t == Y_SEQ ? v->n : 1;
    long prev = 0;
    for (size_t i = 0; i < n; i++) {
        const yn *it = v->t == Y_SEQ ? v->v[i] : v;
        const char *s = it->t == Y_SCALAR ? it->s : "";
        while (1) {
            char *e;
            long x = strtol(s, &e, 10);
            if (e == s || x <= 0 || x > (long)P3D_CLUSTER_MAX_NODES || (*e && *e != ','))
                return p3d_err(p->err, "%s:%zu: block_sizes: expected positive node counts, found '%s'", p->path,
                               it->line, it->t == Y_SCALAR ? it->s : "a mapping");
            if (prev && x <= prev)
                return p3d_err(p->err,
                               "%s:%zu: block_sizes: %ld after %ld; each size must be larger than the one "
                               "before",
                               p->path, it->line, x, prev);
            prev = x;
            if (!*e)
                break;
            s = e + 1;
        }
    }
    return 0;
}

static int entities(yp *p, const yn *list, const char *lkey, const char *nkey, p3d_st_topo *t)
{
    if (!list || list->t != Y_SEQ)
        return p3d_err(p->err, "%s:%zu: topology %s: '%s:' must be a list of %ss", p->path, list ? list->line : t->line,
                       t->name, lkey, nkey);
    if (list->n == 0)
        return p3d_err(p->err, "%s:%zu: topology %s: '%s:' is empty", p->path, list->line, t->name, lkey);
    if (!(t->ents = calloc(list->n, sizeof *t->ents)))
        return p3d_err(p->err, "%s: out of memory", p->path);
    static const char *const tree_keys[] = {"switch", "children", "nodes", NULL};
    static const char *const block_keys[] = {"block", "nodes", NULL};
    for (size_t i = 0; i < list->n; i++) {
        const yn *m = list->v[i];
        p3d_st_ent *e = &t->ents[t->nents++];
        e->line = m->line;
        if (m->t != Y_MAP)
            return p3d_err(p->err, "%s:%zu: topology %s: each item of '%s:' is a mapping with '%s: NAME'", p->path,
                           m->line, t->name, lkey, nkey);
        warn_unknown(p, m, t->kind == P3D_ST_TREE ? tree_keys : block_keys, nkey);
        if (want_name(p, m, nkey, nkey, &e->name) < 0 || want_hostlist(p, get(m, "nodes"), "nodes", &e->nodes) < 0)
            return -1;
        if (t->kind == P3D_ST_TREE) {
            if (strlen(e->name) > MAX_SWITCH_NAME)
                return p3d_err(p->err, "%s:%zu: switch name '%.20s...' is longer than %d characters", p->path, m->line,
                               e->name, MAX_SWITCH_NAME);
            if (want_hostlist(p, get(m, "children"), "children", &e->children) < 0)
                return -1;
        }
        e->line = get(m, nkey)->line;
    }
    return 0;
}

static int topology(yp *p, const yn *m, p3d_st_topo *t)
{
    static const char *const keys[] = {"topology", "cluster_default", "tree", "block", "flat", NULL};
    t->line = m->line;
    if (m->t != Y_MAP)
        return p3d_err(p->err,
                       "%s:%zu: each item of a topology.yaml is a mapping that starts with 'topology: "
                       "NAME'",
                       p->path, m->line);
    if (want_name(p, m, "topology", "topology", &t->name) < 0)
        return -1;
    warn_unknown(p, m, keys, "a topology");
    const yn *cd = get(m, "cluster_default"), *tree = get(m, "tree"), *block = get(m, "block"), *flat = get(m, "flat");
    if (cd && want_bool(p, cd, "cluster_default", &t->cluster_default) < 0)
        return -1;
    int isflat = 0;
    if (flat && want_bool(p, flat, "flat", &isflat) < 0)
        return -1;
    int kinds = !!tree + !!block + isflat;
    if (kinds != 1)
        return p3d_err(p->err,
                       "%s:%zu: topology %s: needs exactly one of 'tree:', 'block:' or 'flat: true' "
                       "(found %d)",
                       p->path, m->line, t->name, kinds);
    if (isflat) {
        t->kind = P3D_ST_FLAT;
        return 0;
    }
    if (tree) {
        static const char *const tk[] = {"switches", NULL};
        t->kind = P3D_ST_TREE;
        if (tree->t != Y_MAP)
            return p3d_err(p->err, "%s:%zu: topology %s: 'tree:' must hold 'switches:'", p->path, tree->line, t->name);
        warn_unknown(p, tree, tk, "tree");
        return entities(p, get(tree, "switches"), "switches", "switch", t);
    }
    static const char *const bk[] = {"block_sizes", "blocks", NULL};
    t->kind = P3D_ST_BLOCK;
    if (block->t != Y_MAP)
        return p3d_err(p->err, "%s:%zu: topology %s: 'block:' must hold 'blocks:'", p->path, block->line, t->name);
    warn_unknown(p, block, bk, "block");
    if (block_sizes(p, get(block, "block_sizes")) < 0)
        return -1;
    return entities(p, get(block, "blocks"), "blocks", "block", t);
}

int p3d_slurm_yaml_parse(p3d_cluster *c, const char *path, const char *buf, p3d_st_topo **out, size_t *n, char **err)
{
    yp p = {.path = path, .c = c, .err = err};
    yn *root = NULL;
    p3d_st_topo *t = NULL;
    size_t nt = 0;
    int rc = -1;
    *out = NULL;
    *n = 0;
    if (build(&p, buf, &root) < 0)
        goto out;
    if (!root || root->t == Y_NULL) {
        p3d_err(err, "%s: no topologies (an empty topology.yaml)", path);
        goto out;
    }
    if (root->t != Y_SEQ) {
        p3d_err(err, "%s:%zu: a topology.yaml is a list of topologies ('- topology: NAME')", path, root->line);
        goto out;
    }
    if (!(t = calloc(root->n ? root->n : 1, sizeof *t))) {
        p3d_err(err, "%s: out of memory", path);
        goto out;
    }
    for (size_t i = 0; i < root->n; i++) {
        p3d_st_topo *tp = &t[nt++];
        tp->nodes_key = "nodes";
        tp->children_key = "children";
        tp->switch_def = "'switch:' entry";
        if (topology(&p, root->v[i], tp) < 0)
            goto out;
        for (size_t k = 0; k + 1 < nt; k++)
            if (!strcmp(t[k].name, tp->name)) {
                p3d_err(err, "%s:%zu: topology '%s' is already defined on line %zu", path, tp->line, t[k].name,
                        t[k].line);
                goto out;
            }
    }
    *out = t;
    *n = nt;
    t = NULL;
    rc = 0;
out:
    p3d_st_free(t, nt);
    yn_free(root);
    return rc;
}

int p3d_slurm_yaml_sniff(const char *buf)
{
    const char *s = buf;
    while (*s) {
        while (*s == ' ' || *s == '\t' || *s == '\r' || *s == '\n')
            s++;
        if (*s == '#') {
            s += strcspn(s, "\n");
            continue;
        }
        return *s == '-';
    }
    return 0;
}
