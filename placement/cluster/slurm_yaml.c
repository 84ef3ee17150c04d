/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * slurm_yaml.c — reads Slurm's topology.yaml (topology.yaml(5)): a YAML list
 * of topologies, each
 *
 *   - topology: NAME            (first attribute, unique)
 *     cluster_default: BOOL     (optional)
 *     tree:                     | block:                  | flat: true
 *       switches:               |   block_sizes: [4, 16]  |
 *       - switch: NAME          |   blocks:               |
 *         children: HOSTLIST    |   - block: NAME         |
 *         nodes: HOSTLIST       |     nodes: HOSTLIST     |
 *
 * The YAML accepted is the block-style subset this shape needs: block
 * sequences and mappings by indentation (a sequence may sit at its key's
 * indentation, as in the manual's example), plain, 'single' and "double"
 * quoted scalars, flow sequences of scalars ([4, 16]) and comments. Other
 * YAML (anchors, aliases, tags, flow mappings, block scalars, several
 * documents, tabs in indentation) is an error naming the line rather than a
 * silent misreading. Nesting is bounded (MAX_DEPTH), so no input recurses
 * deeply; children/nodes may also be YAML lists of names.
 */
#include "slurm_yaml.h"

#include "cluster_internal.h"
#include "strmap.h"

#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#define MAX_DEPTH 16
#define MAX_SWITCH_NAME 64 /* topology.yaml(5): a switch name is at most 64 characters */

enum { Y_NULL, Y_SCALAR, Y_SEQ, Y_MAP };

typedef struct yn {
    int t;
    size_t line;
    char *s;                    /* scalar */
    struct yn **v;              /* sequence items / mapping values */
    char **k;                   /* mapping keys */
    size_t n, cap;
} yn;

typedef struct yrec {           /* one line, or the part after a "- " */
    size_t line;
    int indent, dash;
    char *text;
} yrec;

typedef struct yp {
    const char *path;
    p3d_cluster *c;
    yrec *r;
    size_t nr, capr, i;
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
    free(y->s);
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

static int yn_push(yn *y, char *key, yn *val)
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
        }
        y->cap = nc;
    }
    if (y->t == Y_MAP)
        y->k[y->n] = key;
    y->v[y->n++] = val;
    return 0;
}

/* ---- lines ---------------------------------------------------------------- */

static int add_rec(yp *p, size_t line, int indent, int dash, const char *text, size_t len)
{
    if (p->nr == p->capr) {
        size_t nc = p->capr ? p->capr * 2 : 64;
        yrec *a = realloc(p->r, nc * sizeof *a);
        if (!a)
            return p3d_err(p->err, "%s: out of memory", p->path);
        p->r = a;
        p->capr = nc;
    }
    yrec *r = &p->r[p->nr];
    r->line = line;
    r->indent = indent;
    r->dash = dash;
    if (!(r->text = strndup(text, len)))
        return p3d_err(p->err, "%s: out of memory", p->path);
    p->nr++;
    return 0;
}

/* Length of the line without its comment: '#' at the start or after a
 * blank, outside quotes. */
static size_t strip_comment(const char *s, size_t len)
{
    char q = 0;
    for (size_t i = 0; i < len; i++) {
        char ch = s[i];
        if (q) {
            if (ch == q)
                q = 0;
        } else if (ch == '"' || ch == '\'') {
            if (i == 0 || s[i - 1] == ' ' || s[i - 1] == '[' || s[i - 1] == ',' || s[i - 1] == ':' ||
                s[i - 1] == '-')
                q = ch;
        } else if (ch == '#' && (i == 0 || s[i - 1] == ' ')) {
            return i;
        }
    }
    return len;
}

static int split(yp *p, const char *buf)
{
    size_t line = 0;
    int docs = 0, content = 0;
    for (const char *s = buf; *s;) {
        const char *e = strchr(s, '\n');
        size_t len = e ? (size_t)(e - s) : strlen(s);
        line++;
        if (len && s[len - 1] == '\r')
            len--;
        len = strip_comment(s, len);
        while (len && (s[len - 1] == ' ' || s[len - 1] == '\t'))
            len--;
        int ind = 0;
        while ((size_t)ind < len && s[ind] == ' ')
            ind++;
        if ((size_t)ind < len && s[ind] == '\t')
            return p3d_err(p->err, "%s:%zu: a tab in the indentation; YAML indents with spaces", p->path, line);
        if ((size_t)ind < len) {
            const char *t = s + ind;
            size_t tl = len - (size_t)ind;
            if (ind == 0 && tl >= 3 && (!strncmp(t, "---", 3) || !strncmp(t, "...", 3)) &&
                (tl == 3 || t[3] == ' ')) {
                if (t[0] == '.' || ++docs > 1 || content || tl > 3)
                    return p3d_err(p->err, "%s:%zu: one YAML document expected (a topology.yaml is one list of "
                                           "topologies)", p->path, line);
            } else if (ind == 0 && t[0] == '%') {
                return p3d_err(p->err, "%s:%zu: YAML directives ('%%...') are not supported here", p->path, line);
            } else {
                content = 1;
                /* "- - x" and "- key: v": a dash record per '-', then the rest
                 * at the column where it starts */
                while (tl > 0 && t[0] == '-' && (tl == 1 || t[1] == ' ')) {
                    if (add_rec(p, line, ind, 1, "", 0) < 0)
                        return -1;
                    size_t k = 1;
                    while (k < tl && t[k] == ' ')
                        k++;
                    ind += (int)k;
                    t += k;
                    tl -= k;
                }
                if (tl > 0 && add_rec(p, line, ind, 0, t, tl) < 0)
                    return -1;
            }
        }
        if (!e)
            break;
        s = e + 1;
    }
    return 0;
}

/* ---- scalars -------------------------------------------------------------- */

/* Parses one scalar at s (plain or quoted); *end is set past it. Returns a
 * new string or NULL with *err. stop: characters that end a plain scalar
 * (",]" inside a flow sequence). */
static char *scalar(yp *p, size_t line, const char *s, const char **end, const char *stop)
{
    size_t n = strlen(s);
    char *o = malloc(n + 1), q = s[0];
    size_t k = 0;
    if (!o) {
        p3d_err(p->err, "%s: out of memory", p->path);
        return NULL;
    }
    if (q == '"' || q == '\'') {
        const char *c = s + 1;
        for (;; c++) {
            if (!*c) {
                p3d_err(p->err, "%s:%zu: unterminated %s-quoted string", p->path, line,
                        q == '"' ? "double" : "single");
                free(o);
                return NULL;
            }
            if (q == '\'' && c[0] == '\'' && c[1] == '\'') {
                o[k++] = '\'';
                c++;
            } else if (*c == q) {
                c++;
                break;
            } else if (q == '"' && *c == '\\') {
                c++;
                if (*c == '"' || *c == '\\' || *c == '/')
                    o[k++] = *c;
                else {
                    p3d_err(p->err, "%s:%zu: escape '\\%c' is not supported in a name", p->path, line,
                            *c ? *c : ' ');
                    free(o);
                    return NULL;
                }
            } else if ((unsigned char)*c < 0x20) {
                p3d_err(p->err, "%s:%zu: control character 0x%02x in a string", p->path, line, (unsigned char)*c);
                free(o);
                return NULL;
            } else {
                o[k++] = *c;
            }
        }
        *end = c;
    } else {
        if (strchr("&*!|>{@`", q)) {
            p3d_err(p->err, "%s:%zu: '%c' starts a YAML construct (anchor, alias, tag, block scalar or flow "
                            "mapping) that a topology.yaml does not need; write the value plainly",
                    p->path, line, q);
            free(o);
            return NULL;
        }
        const char *c = s;
        while (*c && !strchr(stop, *c))
            c++;
        while (c > s && c[-1] == ' ')
            c--;
        k = (size_t)(c - s);
        memcpy(o, s, k);
        for (size_t i = 0; i < k; i++)
            if ((unsigned char)o[i] < 0x20) {
                p3d_err(p->err, "%s:%zu: control character 0x%02x in a value", p->path, line, (unsigned char)o[i]);
                free(o);
                return NULL;
            }
        *end = c;
    }
    o[k] = 0;
    return o;
}

/* A value after "key:" or "- ": a scalar or a flow sequence of scalars. */
static yn *inline_value(yp *p, size_t line, const char *s)
{
    if (s[0] == '[') {
        yn *y = yn_new(Y_SEQ, line);
        if (!y)
            goto oom;
        const char *c = s + 1;
        while (*c == ' ')
            c++;
        if (*c == ']')
            c++;
        else
            for (;;) {
                if (*c == '[' || *c == ',' || *c == ']') {
                    p3d_err(p->err, "%s:%zu: expected a name or number in '%s'", p->path, line, s);
                    yn_free(y);
                    return NULL;
                }
                const char *e;
                char *v = scalar(p, line, c, &e, ",]");
                yn *it = v ? yn_new(Y_SCALAR, line) : NULL;
                if (!it || yn_push(y, NULL, it) < 0) {
                    if (v && !it)
                        p3d_err(p->err, "%s: out of memory", p->path);
                    free(v);
                    free(it);
                    yn_free(y);
                    return NULL;
                }
                it->s = v;
                c = e;
                while (*c == ' ')
                    c++;
                if (*c == ',') {
                    c++;
                    while (*c == ' ')
                        c++;
                    continue;
                }
                if (*c == ']') {
                    c++;
                    break;
                }
                p3d_err(p->err, "%s:%zu: unterminated list '%s' (flow lists end on their line)", p->path, line, s);
                yn_free(y);
                return NULL;
            }
        while (*c == ' ')
            c++;
        if (*c) {
            p3d_err(p->err, "%s:%zu: unexpected '%s' after the list", p->path, line, c);
            yn_free(y);
            return NULL;
        }
        return y;
    }
    const char *e;
    char *v = scalar(p, line, s, &e, "");
    if (!v)
        return NULL;
    while (*e == ' ')
        e++;
    if (*e) {
        p3d_err(p->err, "%s:%zu: unexpected '%s' after a quoted value", p->path, line, e);
        free(v);
        return NULL;
    }
    yn *y = yn_new(Y_SCALAR, line);
    if (!y) {
        free(v);
        goto oom;
    }
    y->s = v;
    return y;
oom:
    p3d_err(p->err, "%s: out of memory", p->path);
    return NULL;
}

/* Where "key:" ends in a mapping line (the ':' followed by a blank or the
 * end, outside quotes), or NULL. */
static char *key_colon(char *t)
{
    char q = 0;
    for (char *c = t; *c; c++) {
        if (q) {
            if (*c == q)
                q = 0;
        } else if ((*c == '"' || *c == '\'') && c == t) {
            q = *c;
        } else if (*c == ':' && (c[1] == 0 || c[1] == ' ')) {
            return c;
        }
    }
    return NULL;
}

/* ---- block structure -------------------------------------------------- */

static yn *node(yp *p, int min_indent, int depth);

static yn *seq(yp *p, int ind, int depth)
{
    yn *y = yn_new(Y_SEQ, p->r[p->i].line);
    if (!y)
        goto oom;
    while (p->i < p->nr && p->r[p->i].indent == ind && p->r[p->i].dash) {
        size_t line = p->r[p->i].line;
        p->i++;
        yn *it;
        if (p->i < p->nr && p->r[p->i].indent > ind)
            it = node(p, ind + 1, depth + 1);
        else
            it = yn_new(Y_NULL, line);
        if (!it) {
            yn_free(y);
            if (!*p->err)
                goto oom;
            return NULL;
        }
        if (yn_push(y, NULL, it) < 0) {
            yn_free(it);
            yn_free(y);
            goto oom;
        }
    }
    return y;
oom:
    p3d_err(p->err, "%s: out of memory", p->path);
    return NULL;
}

static yn *map(yp *p, int ind, int depth)
{
    yn *y = yn_new(Y_MAP, p->r[p->i].line);
    if (!y)
        goto oom;
    while (p->i < p->nr && p->r[p->i].indent == ind && !p->r[p->i].dash) {
        yrec *r = &p->r[p->i];
        char *colon = key_colon(r->text);
        if (!colon) {
            p3d_err(p->err, "%s:%zu: expected 'key: value', found '%s'", p->path, r->line, r->text);
            goto fail;
        }
        *colon = 0;
        const char *ke;
        char *key = scalar(p, r->line, r->text, &ke, "");
        if (!key)
            goto fail;
        for (size_t k = 0; k < y->n; k++)
            if (!strcmp(y->k[k], key)) {
                p3d_err(p->err, "%s:%zu: '%s' appears twice (first on line %zu)", p->path, r->line, key,
                        y->v[k]->line);
                free(key);
                goto fail;
            }
        const char *val = colon + 1;
        while (*val == ' ')
            val++;
        size_t line = r->line;
        p->i++;
        yn *v;
        if (*val)
            v = inline_value(p, line, val);
        else if (p->i < p->nr && p->r[p->i].indent > ind)
            v = node(p, ind + 1, depth + 1);
        else if (p->i < p->nr && p->r[p->i].indent == ind && p->r[p->i].dash)
            v = seq(p, ind, depth + 1); /* "key:\n- item" at the key's column */
        else
            v = yn_new(Y_NULL, line);
        if (!v || yn_push(y, key, v) < 0) {
            free(key);
            yn_free(v);
            if (!*p->err)
                p3d_err(p->err, "%s: out of memory", p->path);
            goto fail;
        }
    }
    return y;
oom:
    p3d_err(p->err, "%s: out of memory", p->path);
    return NULL;
fail:
    yn_free(y);
    return NULL;
}

/* The node starting at record i, whose indentation is at least min_indent. */
static yn *node(yp *p, int min_indent, int depth)
{
    if (depth > MAX_DEPTH) {
        p3d_err(p->err, "%s:%zu: nested deeper than %d levels; a topology.yaml needs 5", p->path,
                p->r[p->i].line, MAX_DEPTH);
        return NULL;
    }
    yrec *r = &p->r[p->i];
    int ind = r->indent;
    (void)min_indent;
    yn *y;
    if (r->dash) {
        y = seq(p, ind, depth);
    } else if (key_colon(r->text)) {
        y = map(p, ind, depth);
    } else {
        y = inline_value(p, r->line, r->text);
        if (y)
            p->i++;
    }
    if (y && p->i < p->nr && p->r[p->i].indent > ind) {
        p3d_err(p->err, "%s:%zu: unexpected indentation (column %d) after the %s that starts on line %zu",
                p->path, p->r[p->i].line, p->r[p->i].indent + 1,
                y->t == Y_SEQ ? "list" : y->t == Y_MAP ? "mapping" : "value", y->line);
        yn_free(y);
        return NULL;
    }
    return y;
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
            p3d_cluster_warn(p->c, "%s:%zu: unknown key '%s' in %s ignored", p->path, m->v[i]->line, m->k[i],
                             where);
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
        return p3d_err(p->err, "%s:%zu: %s without '%s:' (it must name the %s)", p->path, m->line, what, key,
                       what);
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
                return p3d_err(p->err, "%s:%zu: block_sizes: %ld after %ld; each size must be larger than the one "
                                       "before", p->path, it->line, x, prev);
            prev = x;
            if (!*e)
                break;
            s = e + 1;
        }
    }
    return 0;
}

static int entities(yp *p, const yn *list, const char *lkey, const char *nkey, p3d_sy_topo *t)
{
    if (!list || list->t != Y_SEQ)
        return p3d_err(p->err, "%s:%zu: topology %s: '%s:' must be a list of %ss", p->path,
                       list ? list->line : t->line, t->name, lkey, nkey);
    if (list->n == 0)
        return p3d_err(p->err, "%s:%zu: topology %s: '%s:' is empty", p->path, list->line, t->name, lkey);
    if (!(t->ents = calloc(list->n, sizeof *t->ents)))
        return p3d_err(p->err, "%s: out of memory", p->path);
    static const char *const tree_keys[] = {"switch", "children", "nodes", NULL};
    static const char *const block_keys[] = {"block", "nodes", NULL};
    for (size_t i = 0; i < list->n; i++) {
        const yn *m = list->v[i];
        p3d_sy_ent *e = &t->ents[t->nents++];
        e->line = m->line;
        if (m->t != Y_MAP)
            return p3d_err(p->err, "%s:%zu: topology %s: each item of '%s:' is a mapping with '%s: NAME'", p->path,
                           m->line, t->name, lkey, nkey);
        warn_unknown(p, m, t->kind == P3D_SY_TREE ? tree_keys : block_keys, nkey);
        if (want_name(p, m, nkey, nkey, &e->name) < 0 || want_hostlist(p, get(m, "nodes"), "nodes", &e->nodes) < 0)
            return -1;
        if (t->kind == P3D_SY_TREE) {
            if (strlen(e->name) > MAX_SWITCH_NAME)
                return p3d_err(p->err, "%s:%zu: switch name '%.20s...' is longer than %d characters", p->path,
                               m->line, e->name, MAX_SWITCH_NAME);
            if (want_hostlist(p, get(m, "children"), "children", &e->children) < 0)
                return -1;
        }
        e->line = get(m, nkey)->line;
    }
    return 0;
}

static int topology(yp *p, const yn *m, p3d_sy_topo *t)
{
    static const char *const keys[] = {"topology", "cluster_default", "tree", "block", "flat", NULL};
    t->line = m->line;
    if (m->t != Y_MAP)
        return p3d_err(p->err, "%s:%zu: each item of a topology.yaml is a mapping that starts with 'topology: "
                               "NAME'", p->path, m->line);
    if (want_name(p, m, "topology", "topology", &t->name) < 0)
        return -1;
    warn_unknown(p, m, keys, "a topology");
    const yn *cd = get(m, "cluster_default"), *tree = get(m, "tree"), *block = get(m, "block"),
             *flat = get(m, "flat");
    if (cd && want_bool(p, cd, "cluster_default", &t->cluster_default) < 0)
        return -1;
    int isflat = 0;
    if (flat && want_bool(p, flat, "flat", &isflat) < 0)
        return -1;
    int kinds = !!tree + !!block + isflat;
    if (kinds != 1)
        return p3d_err(p->err, "%s:%zu: topology %s: needs exactly one of 'tree:', 'block:' or 'flat: true' "
                               "(found %d)", p->path, m->line, t->name, kinds);
    if (isflat) {
        t->kind = P3D_SY_FLAT;
        return 0;
    }
    if (tree) {
        static const char *const tk[] = {"switches", NULL};
        t->kind = P3D_SY_TREE;
        if (tree->t != Y_MAP)
            return p3d_err(p->err, "%s:%zu: topology %s: 'tree:' must hold 'switches:'", p->path, tree->line,
                           t->name);
        warn_unknown(p, tree, tk, "tree");
        return entities(p, get(tree, "switches"), "switches", "switch", t);
    }
    static const char *const bk[] = {"block_sizes", "blocks", NULL};
    t->kind = P3D_SY_BLOCK;
    if (block->t != Y_MAP)
        return p3d_err(p->err, "%s:%zu: topology %s: 'block:' must hold 'blocks:'", p->path, block->line, t->name);
    warn_unknown(p, block, bk, "block");
    if (block_sizes(p, get(block, "block_sizes")) < 0)
        return -1;
    return entities(p, get(block, "blocks"), "blocks", "block", t);
}

void p3d_slurm_yaml_free(p3d_sy_topo *t, size_t n)
{
    for (size_t i = 0; t && i < n; i++) {
        for (size_t k = 0; k < t[i].nents; k++) {
            free(t[i].ents[k].name);
            free(t[i].ents[k].nodes);
            free(t[i].ents[k].children);
        }
        free(t[i].ents);
        free(t[i].name);
    }
    free(t);
}

int p3d_slurm_yaml_parse(p3d_cluster *c, const char *path, const char *buf, p3d_sy_topo **out, size_t *n,
                         char **err)
{
    yp p = {.path = path, .c = c, .err = err};
    yn *root = NULL;
    p3d_sy_topo *t = NULL;
    size_t nt = 0;
    int rc = -1;
    *out = NULL;
    *n = 0;
    if (split(&p, buf) < 0)
        goto out;
    if (p.nr == 0) {
        p3d_err(err, "%s: no topologies (an empty topology.yaml)", path);
        goto out;
    }
    if (!(root = node(&p, 0, 0)))
        goto out;
    if (p.i < p.nr) {
        p3d_err(err, "%s:%zu: unexpected '%s' at column %d (indentation?)", path, p.r[p.i].line,
                p.r[p.i].dash ? "-" : p.r[p.i].text, p.r[p.i].indent + 1);
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
        if (topology(&p, root->v[i], &t[nt++]) < 0)
            goto out;
        for (size_t k = 0; k + 1 < nt; k++)
            if (!strcmp(t[k].name, t[nt - 1].name)) {
                p3d_err(err, "%s:%zu: topology '%s' is already defined on line %zu", path, t[nt - 1].line,
                        t[k].name, t[k].line);
                goto out;
            }
    }
    *out = t;
    *n = nt;
    t = NULL;
    rc = 0;
out:
    p3d_slurm_yaml_free(t, nt);
    yn_free(root);
    for (size_t i = 0; i < p.nr; i++)
        free(p.r[i].text);
    free(p.r);
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
