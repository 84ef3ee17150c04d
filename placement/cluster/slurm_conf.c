/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * slurm_conf.c — reads a Slurm topology.conf into the structure of
 * slurm_topo.h, which cluster_slurm.c applies (the same as a
 * topology.yaml's tree or block topology):
 *
 *  topology/tree  SwitchName=s Nodes=hostlist | Switches=hostlist
 *                 [LinkSpeed=N]
 *  topology/block BlockName=b Nodes=hostlist, BlockSizes=N,N...
 *
 * Errors here are the file's own: syntax, slurm.conf lines, a file mixing
 * SwitchName and BlockName, a key given twice, no switch or block at all.
 * Everything about names (defined twice, unknown children, cycles, nodes
 * of the cluster) is the applier's, for both file kinds alike.
 */
#include "cluster_internal.h"
#include "slurm_topo.h"

#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

typedef struct conf_line {
    char *text;  /* one logical line, comments removed */
    size_t line; /* where it starts in the file */
} conf_line;

typedef struct conf_ctx {
    const char *path;
    p3d_cluster *c;
    conf_line *lines;
    size_t nlines;
    p3d_st_topo *t;
    size_t cap_ents;
} conf_ctx;

/* Splits the text into logical lines: '#' starts a comment, a trailing '\'
 * continues the line. */
static int split_lines(conf_ctx *x, char *buf, char **err)
{
    size_t cap = 0, line = 1;
    char *p = buf;
    while (*p) {
        size_t start_line = line, cap_t = 64, n = 0;
        char *t = malloc(cap_t);
        if (!t)
            goto oom;
        int cont;
        do {
            cont = 0;
            char *eol = strchr(p, '\n');
            size_t len = eol ? (size_t)(eol - p) : strlen(p);
            char *hash = memchr(p, '#', len);
            size_t keep = hash ? (size_t)(hash - p) : len;
            while (keep && (p[keep - 1] == '\r' || p[keep - 1] == ' ' || p[keep - 1] == '\t'))
                keep--;
            if (!hash && keep && p[keep - 1] == '\\') {
                keep--;
                cont = 1;
            }
            if (n + keep + 2 > cap_t) {
                while (n + keep + 2 > cap_t)
                    cap_t *= 2;
                char *a = realloc(t, cap_t);
                if (!a) {
                    free(t);
                    goto oom;
                }
                t = a;
            }
            memcpy(t + n, p, keep);
            n += keep;
            t[n++] = ' ';
            t[n] = 0;
            p = eol ? eol + 1 : p + len;
            line++;
        } while (cont && *p);
        if (x->nlines == cap) {
            size_t nc = cap ? cap * 2 : 64;
            conf_line *a = realloc(x->lines, nc * sizeof *a);
            if (!a) {
                free(t);
                goto oom;
            }
            x->lines = a;
            cap = nc;
        }
        x->lines[x->nlines++] = (conf_line){t, start_line};
    }
    return 0;
oom:
    return p3d_err(err, "%s: out of memory", x->path);
}

/* Next "Key=Value" token of s at *pos; 0 at the end, -1 on a token
 * without '='. key/val point into s (NUL-terminated in place). */
static int next_token(char *s, size_t *pos, char **key, char **val)
{
    size_t p = *pos;
    while (s[p] == ' ' || s[p] == '\t')
        p++;
    if (!s[p])
        return 0;
    size_t start = p;
    while (s[p] && s[p] != ' ' && s[p] != '\t')
        p++;
    if (s[p])
        s[p++] = 0;
    *pos = p;
    char *eq = strchr(s + start, '=');
    *key = s + start;
    if (!eq)
        return -1;
    *eq = 0;
    char *v = eq + 1;
    size_t vl = strlen(v);
    if (vl >= 2 && v[0] == '"' && v[vl - 1] == '"') {
        v[vl - 1] = 0;
        v++;
    }
    *val = v;
    return 1;
}

static p3d_st_ent *add_ent(conf_ctx *x, const char *name, size_t line, char **err)
{
    p3d_st_topo *t = x->t;
    if (t->nents == x->cap_ents) {
        size_t nc = x->cap_ents ? x->cap_ents * 2 : 32;
        p3d_st_ent *a = realloc(t->ents, nc * sizeof *a);
        if (!a) {
            p3d_err(err, "%s: out of memory", x->path);
            return NULL;
        }
        t->ents = a;
        x->cap_ents = nc;
    }
    p3d_st_ent *e = &t->ents[t->nents];
    memset(e, 0, sizeof *e);
    e->line = line;
    if (!(e->name = strdup(name))) {
        p3d_err(err, "%s: out of memory", x->path);
        return NULL;
    }
    t->nents++;
    return e;
}

/* BlockSizes=: Slurm's allocation granularity; only checked, placement
 * does not need it. */
static int block_sizes(conf_ctx *x, const conf_line *ln, const char *val, char **err)
{
    const char *v = val;
    while (*v) {
        if (!isdigit((unsigned char)*v))
            return p3d_err(err, "%s:%zu: BlockSizes: expected a comma list of numbers, found '%s'", x->path, ln->line,
                           val);
        while (isdigit((unsigned char)*v))
            v++;
        if (*v == ',')
            v++;
    }
    return 0;
}

static int parse_line(conf_ctx *x, conf_line *ln, char **err)
{
    size_t pos = 0;
    char *key, *val;
    int r = next_token(ln->text, &pos, &key, &val);
    if (r == 0)
        return 0; /* blank or comment */
    if (r < 0)
        return p3d_err(err, "%s:%zu: expected Key=Value, found '%s'", x->path, ln->line, key);
    int kind, sizes = 0;
    if (!strcasecmp(key, "SwitchName"))
        kind = P3D_ST_TREE;
    else if (!strcasecmp(key, "BlockName"))
        kind = P3D_ST_BLOCK;
    else if (!strcasecmp(key, "BlockSizes"))
        kind = P3D_ST_BLOCK, sizes = 1;
    else if (!strcasecmp(key, "NodeName") || !strcasecmp(key, "PartitionName"))
        return p3d_err(err, "%s:%zu: %s= belongs in slurm.conf; a topology.conf has SwitchName= or BlockName= lines",
                       x->path, ln->line, key);
    else
        return p3d_err(err, "%s:%zu: expected SwitchName=, BlockName= or BlockSizes=, found '%s='", x->path, ln->line,
                       key);
    if (x->t->kind && x->t->kind != kind)
        return p3d_err(err,
                       "%s:%zu: %s= in a file that already has %s= lines; a topology.conf is either "
                       "topology/tree (SwitchName) or topology/block (BlockName)",
                       x->path, ln->line, key, x->t->kind == P3D_ST_TREE ? "SwitchName" : "BlockName");
    x->t->kind = kind;
    if (sizes)
        return block_sizes(x, ln, val, err);
    if (!*val)
        return p3d_err(err, "%s:%zu: %s= is empty", x->path, ln->line, key);
    p3d_st_ent *e = add_ent(x, val, ln->line, err);
    if (!e)
        return -1;
    while ((r = next_token(ln->text, &pos, &key, &val)) != 0) {
        if (r < 0)
            return p3d_err(err, "%s:%zu: expected Key=Value, found '%s'", x->path, ln->line, key);
        char **slot = NULL;
        if (!strcasecmp(key, "Nodes"))
            slot = &e->nodes;
        else if (kind == P3D_ST_TREE && !strcasecmp(key, "Switches"))
            slot = &e->children;
        else if (kind == P3D_ST_TREE && !strcasecmp(key, "LinkSpeed"))
            continue; /* relative weights for Slurm; placement uses link_gbps */
        if (!slot) {
            p3d_cluster_warn(x->c, "%s:%zu: unknown key '%s' ignored", x->path, ln->line, key);
            continue;
        }
        if (*slot)
            return p3d_err(err, "%s:%zu: %s= given twice", x->path, ln->line, key);
        if (!(*slot = strdup(val)))
            return p3d_err(err, "%s: out of memory", x->path);
    }
    return 0;
}

int p3d_slurm_conf_parse(p3d_cluster *c, const char *path, char *buf, p3d_st_topo **out, char **err)
{
    int rc = -1;
    conf_ctx x = {.path = path, .c = c};
    *out = NULL;
    if (!(x.t = calloc(1, sizeof *x.t))) {
        p3d_err(err, "%s: out of memory", path);
        goto out;
    }
    x.t->line = 1;
    x.t->nodes_key = "Nodes=";
    x.t->children_key = "Switches=";
    x.t->switch_def = "SwitchName= line";
    if (split_lines(&x, buf, err) < 0)
        goto out;
    for (size_t i = 0; i < x.nlines; i++)
        if (parse_line(&x, &x.lines[i], err) < 0)
            goto out;
    if (x.t->nents == 0) {
        p3d_err(err, "%s: no SwitchName= or BlockName= lines", path);
        goto out;
    }
    *out = x.t;
    x.t = NULL;
    rc = 0;
out:
    p3d_st_free(x.t, 1);
    for (size_t i = 0; i < x.nlines; i++)
        free(x.lines[i].text);
    free(x.lines);
    return rc;
}
