/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * cluster_file.c — reads a cluster description (JSON, docs/cluster-file.md):
 *
 *   { "nodes": [ { "name": "node[001-016]", "topology": "dgx-h100.xml",
 *                  "rack": "r1", "nvlink_domain": "nvl72-0" }, ... ],
 *     "link_gbps": { "RACK": 50, "XRACK": 25 },
 *     "description": "free text" }
 *
 * Topologies are loaded once per distinct file and shared by every node
 * naming it. cJSON keeps no positions, so messages get their line numbers
 * from a small scan of the text that finds where each nodes[] entry and its
 * keys sit (only when a message needs one). Hand-written on purpose: of the
 * Debian JSON libraries only yajl's event parser reports byte offsets, and
 * rebuilding the tree from its callbacks for this one file would be more
 * code than this scan, which runs on text cJSON already accepted and only
 * on the error path. Syntax errors get their line and column from cJSON's
 * own error pointer (cf_syntax_error() below).
 */
#include "cluster_internal.h"
#include "cluster_foreign.h"
#include "cluster_file.h"
#include "strmap.h"

#include <cjson/cJSON.h>
#include <dirent.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <unistd.h>

#define MAX_KEY_WARNINGS 5

static const char *json_type(const cJSON *j)
{
    if (cJSON_IsString(j))
        return "a string";
    if (cJSON_IsNumber(j))
        return "a number";
    if (cJSON_IsBool(j))
        return "a boolean";
    if (cJSON_IsNull(j))
        return "null";
    if (cJSON_IsArray(j))
        return "an array";
    if (cJSON_IsObject(j))
        return "an object";
    return "something else";
}

/* ---- topologies ---------------------------------------------------------- */

static int cmp_str(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

/* "dgx-a100.xml, dgx-h100.xml, ..." — what a user could have meant. */
static char *bundled_list(const char *dir)
{
    DIR *d = opendir(dir);
    char **v = NULL, *out = NULL;
    size_t n = 0, cap = 0;
    if (!d)
        return strdup("none installed");
    struct dirent *e;
    while ((e = readdir(d))) {
        /* only topology files: READMEs and the like are not a choice */
        size_t nl = strlen(e->d_name);
        if (e->d_name[0] == '.' ||
            !(nl > 4 && (!strcmp(e->d_name + nl - 4, ".xml") || !strcmp(e->d_name + nl - 4, ".txt"))))
            continue;
        if (p3d_strv_push(&v, &n, &cap, strdup(e->d_name)) < 0)
            break;
    }
    closedir(d);
    if (n == 0) {
        free(v);
        return strdup("none installed");
    }
    qsort(v, n, sizeof *v, cmp_str);
    size_t len = 0;
    for (size_t i = 0; i < n && i < 12; i++)
        len += strlen(v[i]) + 2;
    if ((out = malloc(len + 8))) {
        out[0] = 0;
        for (size_t i = 0; i < n && i < 12; i++) {
            if (i)
                strcat(out, ", ");
            strcat(out, v[i]);
        }
        if (n > 12)
            strcat(out, ", ...");
    }
    p3d_strv_free(v, n);
    return out;
}

static int is_file(const char *p)
{
    struct stat st;
    return stat(p, &st) == 0 && S_ISREG(st.st_mode);
}

/* Where a "topology" value points: "synthetic:..." as is; an absolute
 * path; relative to the cluster file; then among the bundled topologies.
 * *src gets a malloc'd string; NULL with *err when nothing matches. */
static int resolve_topo(cf_ctx *x, const char *t, const char *at, char **src, char **err)
{
    char *cand = NULL, *bdir = NULL, *list = NULL;
    int rc = -1;
    *src = NULL;
    if (strncmp(t, "synthetic:", 10) == 0 || t[0] == '/') {
        if (t[0] == '/' && !is_file(t)) {
            p3d_err(err, "%s: no such file '%s'", at, t);
            goto out;
        }
        *src = strdup(t);
        rc = *src ? 0 : p3d_err(err, "%s: out of memory", at);
        goto out;
    }
    if (asprintf(&bdir, "%s/examples/topologies", p3d_data_dir()) < 0) {
        bdir = NULL;
        goto oom;
    }
    const char *dirs[] = {x->dir, bdir};
    for (size_t i = 0; i < sizeof dirs / sizeof *dirs; i++) {
        if (asprintf(&cand, "%s/%s", dirs[i], t) < 0) {
            cand = NULL;
            goto oom;
        }
        if (is_file(cand)) {
            *src = cand;
            cand = NULL;
            rc = 0;
            goto out;
        }
        P3D_FREE(&cand);
    }
    list = bundled_list(bdir);
    p3d_err(err,
            "%s: no such file '%s' (looked next to %s and in %s; "
            "bundled: %s)",
            at, t, x->path, bdir, list ? list : "?");
    goto out;
oom:
    p3d_err(err, "%s: out of memory", at);
out:
    free(cand);
    free(bdir);
    free(list);
    return rc;
}

/* Index into c->topos for the value t of nodes[entry].topology, loading
 * the file the first time any spelling of it is seen. */
static int get_topo(cf_ctx *x, size_t entry, const char *t, size_t *idx, char **err)
{
    int rc = -1;
    char at[512], *src = NULL, *real = NULL, *e = NULL;
    p3d_node *node = NULL;
    if (p3d_strmap_get(&x->topo_by_str, t, idx))
        return 0;
    cf_where(x, entry, "topology", at, sizeof at);
    if (resolve_topo(x, t, at, &src, err) < 0)
        goto out;
    real = strncmp(src, "synthetic:", 10) == 0 ? strdup(src) : realpath(src, NULL);
    if (!real) {
        p3d_err(err, "%s: cannot resolve '%s'", at, src);
        goto out;
    }
    if (!p3d_strmap_get(&x->topo_by_real, real, idx)) {
        if (p3d_topo_load(src, &node, &e) < 0) {
            p3d_err(err, "%s: %s", at, e ? e : "cannot load topology");
            goto out;
        }
        if (node->ngpus <= 0)
            p3d_cluster_warn(x->c, "%s: topology '%s' has no GPUs", at, t);
        if (x->c->ntopos == x->cap_topos) {
            size_t nc = x->cap_topos ? x->cap_topos * 2 : 4;
            p3d_node **a = realloc(x->c->topos, nc * sizeof *a);
            if (!a)
                goto oom;
            x->c->topos = a;
            x->cap_topos = nc;
        }
        *idx = x->c->ntopos;
        x->c->topos[x->c->ntopos++] = node;
        node = NULL;
        if (p3d_strv_push(&x->reals, &x->nreals, &x->cap_reals, real) < 0) {
            real = NULL;
            goto oom;
        }
        if (p3d_strmap_put(&x->topo_by_real, real, *idx, NULL) < 0) {
            real = NULL;
            goto oom;
        }
        real = NULL; /* owned by x->reals */
    }
    /* key t lives in the cJSON tree, which outlives the map */
    if (p3d_strmap_put(&x->topo_by_str, t, *idx, NULL) < 0)
        goto oom;
    rc = 0;
    goto out;
oom:
    p3d_err(err, "%s: out of memory", at);
out:
    p3d_node_free(node);
    free(src);
    free(real);
    free(e);
    return rc;
}

/* ---- names: racks and NVLink domains ------------------------------------ */

static int intern(p3d_strmap *m, char ***v, size_t *n, size_t *cap, const char *name, int *idx)
{
    size_t i;
    if (p3d_strmap_get(m, name, &i)) {
        *idx = (int)i;
        return 0;
    }
    long k = p3d_strv_push(v, n, cap, strdup(name));
    if (k < 0 || p3d_strmap_put(m, (*v)[k], (size_t)k, NULL) < 0)
        return -1;
    *idx = (int)k;
    return 0;
}

/* ---- the document -------------------------------------------------------- */

static void warn_key(cf_ctx *x, size_t entry, const char *key, const char *known)
{
    char at[512];
    if (++x->nkey_warnings > MAX_KEY_WARNINGS)
        return;
    cf_where(x, entry, NULL, at, sizeof at);
    if (entry == SIZE_MAX)
        snprintf(at, sizeof at, "%s", x->path);
    p3d_cluster_warn(x->c, "%s: unknown key '%s' ignored (known: %s)", at, key, known);
}

static int get_string(cf_ctx *x, size_t entry, const cJSON *o, const char *key, int required, const char **out,
                      char **err)
{
    char at[512];
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, key);
    *out = NULL;
    if (!v) {
        if (!required)
            return 0;
        cf_where(x, entry, NULL, at, sizeof at);
        return p3d_err(err, "%s: missing \"%s\"", at, key);
    }
    if (cJSON_IsString(v) && v->valuestring[0]) {
        *out = v->valuestring;
        return 0;
    }
    /* positions cost a scan of the text: only on the error path */
    cf_where(x, entry, key, at, sizeof at);
    if (!cJSON_IsString(v))
        return p3d_err(err, "%s: expected a string, found %s", at, json_type(v));
    return p3d_err(err, "%s: empty string", at);
}

static int add_node(cf_ctx *x, size_t entry, char *name, size_t topo, int rack, int dom, char **err)
{
    p3d_cluster *c = x->c;
    size_t prev;
    if (c->nnodes == x->cap_nodes) {
        size_t nc = x->cap_nodes ? x->cap_nodes * 2 : 64;
        p3d_cnode *a = realloc(c->nodes, nc * sizeof *a);
        size_t *b = a ? realloc(x->entry_of_node, nc * sizeof *b) : NULL;
        if (a)
            c->nodes = a;
        if (!b) {
            free(name);
            return p3d_err(err, "%s: out of memory", x->path);
        }
        x->entry_of_node = b;
        x->cap_nodes = nc;
    }
    int r = p3d_strmap_put(&x->names, name, c->nnodes, &prev);
    if (r <= 0) {
        char at[512];
        cf_where(x, entry, "name", at, sizeof at);
        if (r == 0)
            p3d_err(err,
                    "%s: node '%s' is already listed in nodes[%zu]; "
                    "every node name must be unique",
                    at, name, x->entry_of_node[prev]);
        else
            p3d_err(err, "%s: out of memory", at);
        free(name);
        return -1;
    }
    p3d_cnode *cn = &c->nodes[c->nnodes];
    cn->name = name;
    cn->topo = c->topos[topo];
    cn->rack = rack;
    cn->nvl_domain = dom;
    cn->role = P3D_NODE_USE;
    x->entry_of_node[c->nnodes++] = entry;
    return 0;
}

static int read_entry(cf_ctx *x, size_t entry, const cJSON *o, int *saw_rack, int *saw_norack, char **err)
{
    static const char *const known[] = {"name", "topology", "rack", "nvlink_domain"};
    char at[512], *e = NULL, **names = NULL;
    size_t nn = 0, topo;
    const char *name, *t, *rack, *dom;
    int rc = -1, ri, di = -1;
    if (!cJSON_IsObject(o)) {
        cf_where(x, entry, NULL, at, sizeof at);
        return p3d_err(err,
                       "%s: expected an object {\"name\": ..., "
                       "\"topology\": ...}, found %s",
                       at, json_type(o));
    }
    for (const cJSON *k = o->child; k; k = k->next) {
        size_t i;
        for (i = 0; i < 4 && strcmp(k->string, known[i]) != 0; i++)
            ;
        if (i == 4)
            warn_key(x, entry, k->string, "name, topology, rack, nvlink_domain");
        else if (cJSON_GetObjectItemCaseSensitive(o, k->string) != k) {
            cf_where(x, entry, k->string, at, sizeof at);
            return p3d_err(err, "%s: key given twice", at);
        }
    }
    if (get_string(x, entry, o, "name", 1, &name, err) < 0 || get_string(x, entry, o, "topology", 1, &t, err) < 0 ||
        get_string(x, entry, o, "rack", 0, &rack, err) < 0 ||
        get_string(x, entry, o, "nvlink_domain", 0, &dom, err) < 0)
        return -1;
    size_t room = P3D_CLUSTER_MAX_NODES - x->c->nnodes;
    if (p3d_hostlist_expand(name, &names, &nn, room, &e) < 0) {
        cf_where(x, entry, "name", at, sizeof at);
        p3d_err(err, "%s: %s", at, e);
        goto out;
    }
    if (nn == 0) {
        cf_where(x, entry, "name", at, sizeof at);
        p3d_err(err, "%s: names no node (expected e.g. \"node[001-016]\")", at);
        goto out;
    }
    if (get_topo(x, entry, t, &topo, err) < 0)
        goto out;
    *(rack ? saw_rack : saw_norack) = 1;
    if (intern(&x->racks, &x->c->racks, &x->c->nracks, &x->cap_racks, rack ? rack : "default", &ri) < 0 ||
        (dom && intern(&x->domains, &x->c->nvl_domains, &x->c->nnvl_domains, &x->cap_domains, dom, &di) < 0)) {
        p3d_err(err, "%s: out of memory", x->path);
        goto out;
    }
    for (size_t i = 0; i < nn; i++) {
        char *nm = names[i];
        names[i] = NULL;
        if (add_node(x, entry, nm, topo, ri, di, err) < 0)
            goto out;
    }
    rc = 0;
out:
    free(e);
    p3d_strv_free(names, nn);
    return rc;
}

/* A link faster than this (GB/s per direction) is a typo: 1e6 is ~1000x
 * today's NVLink. */
#define P3D_CLUSTER_MAX_GBPS 1e6

static int read_link_gbps(cf_ctx *x, const cJSON *o, char **err)
{
    char at[512];
    cf_where(x, SIZE_MAX, "link_gbps", at, sizeof at);
    if (!cJSON_IsObject(o))
        return p3d_err(err,
                       "%s: expected an object such as {\"RACK\": 50, "
                       "\"XRACK\": 25}, found %s",
                       at, json_type(o));
    for (const cJSON *k = o->child; k; k = k->next) {
        int l;
        for (l = 0; l < P3D_LINK_COUNT; l++)
            if (strcasecmp(k->string, p3d_link_name((p3d_link)l)) == 0)
                break;
        if (l == P3D_LINK_COUNT)
            return p3d_err(err,
                           "%s: unknown link class '%s' (known: X, NV, "
                           "MNNVL, PIX, PXB, PHB, NODE, SYS, RACK, XRACK)",
                           at, k->string);
        if (!cJSON_IsNumber(k) || !isfinite(k->valuedouble) || k->valuedouble <= 0 ||
            k->valuedouble > P3D_CLUSTER_MAX_GBPS)
            return p3d_err(err,
                           "%s.%s: expected a positive number of GB/s "
                           "per direction, at most %g, found %s",
                           at, k->string, (double)P3D_CLUSTER_MAX_GBPS,
                           !cJSON_IsNumber(k)          ? json_type(k)
                           : !isfinite(k->valuedouble) ? "a number out of range"
                           : k->valuedouble <= 0       ? "a number <= 0"
                                                       : "a larger number");
        x->c->link_gbps[l] = k->valuedouble;
    }
    return 0;
}

int p3d_cluster_load(const char *path, p3d_cluster **out, char **err)
{
    return p3d_cluster_load_as(path, NULL, out, err);
}

/* The raw bytes before cJSON sees them: not empty, no NUL or control byte
 * cJSON would let through. */
static int check_raw_text(const cf_ctx *x, size_t skip, char **err)
{
    const char *path = x->path, *buf = x->buf;
    size_t len = x->len;
    size_t ws = skip;
    while (ws < len && strchr(" \t\r\n", buf[ws]))
        ws++;
    if (ws == len)
        return p3d_err(err, "%s: empty file (expected a JSON object with \"nodes\")", path);
    /* A raw NUL byte would cut a C string (cJSON copies it into one) and
     * raw control characters inside strings are not JSON (RFC 8259 wants
     * them escaped) and would reach the terminal in names: refuse both. */
    for (size_t i = skip, instr = 0; i < len; i++) {
        unsigned char ch = (unsigned char)buf[i];
        if (ch == 0 || (instr && ch < 0x20)) {
            size_t line = 1, col = 1;
            for (size_t k = 0; k < i; k++, col++)
                if (buf[k] == '\n')
                    line++, col = 0;
            return p3d_err(err, "%s:%zu:%zu: a raw %s byte 0x%02x%s (write it as a \\u escape, or leave it out)", path,
                           line, col, ch ? "control" : "NUL", ch, instr ? " inside a string" : "");
        }
        if (instr && ch == '\\')
            i++;
        else if (ch == '"')
            instr = !instr;
    }
    /* cJSON decodes "\u0000" into a C string that silently ends there
     * ("n\u0000x" would become node "n"): refuse it up front. An escape
     * starts after an odd run of backslashes. */
    for (size_t i = skip; i + 6 <= len; i++) {
        if (buf[i] != '\\' || strncasecmp(buf + i + 1, "u0000", 5) != 0)
            continue;
        size_t run = 0;
        while (i >= skip + run + 1 && buf[i - run - 1] == '\\')
            run++;
        if (run % 2)
            continue;
        size_t line = 1;
        for (size_t k = 0; k < i; k++)
            line += buf[k] == '\n';
        return p3d_err(err,
                       "%s:%zu: a string contains \\u0000 (NUL), which no "
                       "host, rack or file name can hold",
                       path, line);
    }
    return 0;
}

/* One JSON object, nothing after it. *root: the tree (the caller frees it). */
static int parse_root(cf_ctx *x, size_t skip, cJSON **root, char **err)
{
    const char *path = x->path, *buf = x->buf, *end = NULL;
    size_t len = x->len;
    *root = cJSON_ParseWithLengthOpts(buf + skip, len - skip, &end, 0);
    if (!*root) {
        cf_syntax_error(x, end, err);
        return -1;
    }
    while (end && end < buf + len && strchr(" \t\r\n", *end))
        end++;
    if (end && end < buf + len) {
        cJSON_Delete(*root);
        *root = NULL;
        size_t off = (size_t)(end - buf), line = 1;
        for (size_t i = 0; i < off; i++)
            line += buf[i] == '\n';
        return p3d_err(err,
                       "%s:%zu: unexpected text after the JSON object (one "
                       "object per file)",
                       path, line);
    }
    if (!cJSON_IsObject(*root))
        return p3d_err(err, "%s: expected a JSON object {\"nodes\": [...]}, found %s", path, json_type(*root));
    return 0;
}

/* kubectl get nodes -o json, aws ec2 describe-instance-topology: replaces
 * *root with the cluster file it translates to. */
static int translate_foreign(cf_ctx *x, cJSON **root, const char *topology, char **err)
{
    cJSON *conv = NULL;
    char *fw = NULL;
    int f = p3d_cluster_foreign(x->path, *root, topology, &conv, &fw, err);
    if (f < 0)
        return -1;
    if (f > 0) {
        cJSON_Delete(*root);
        *root = conv;
        x->len = 0; /* no positions in a translated tree */
        if (fw)
            p3d_cluster_warn(x->c, "%s", fw);
        free(fw);
    } else if (topology) {
        p3d_cluster_warn(x->c, "--topology %s is ignored: the cluster file names each node's topology", topology);
    }
    return 0;
}

static int check_top_keys(cf_ctx *x, const cJSON *root, char **err)
{
    for (const cJSON *k = root->child; k; k = k->next) {
        if (strcmp(k->string, "nodes") && strcmp(k->string, "link_gbps") && strcmp(k->string, "description"))
            warn_key(x, SIZE_MAX, k->string, "nodes, link_gbps, description");
        /* cJSON keeps both copies of a repeated key and lookups see the
         * first: a second "nodes" would be silently ignored */
        int known = !strcmp(k->string, "nodes") || !strcmp(k->string, "link_gbps") || !strcmp(k->string, "description");
        for (const cJSON *d = root->child; known && d != k; d = d->next)
            if (!strcmp(d->string, k->string))
                return p3d_err(err, "%s: top-level key \"%s\" appears twice (one file, one \"%s\")", x->path, k->string,
                               k->string);
    }
    return 0;
}

/* "description", "link_gbps" and every entry of "nodes" into x->c. */
static int read_top(cf_ctx *x, const cJSON *root, char **err)
{
    const char *path = x->path;
    int saw_rack = 0, saw_norack = 0;
    const cJSON *nodes = cJSON_GetObjectItemCaseSensitive(root, "nodes");
    const cJSON *gbps = cJSON_GetObjectItemCaseSensitive(root, "link_gbps");
    const cJSON *desc = cJSON_GetObjectItemCaseSensitive(root, "description");
    char at[512];
    if (desc && !cJSON_IsString(desc)) {
        cf_where(x, SIZE_MAX, "description", at, sizeof at);
        return p3d_err(err, "%s: expected a string, found %s", at, json_type(desc));
    }
    if (gbps && read_link_gbps(x, gbps, err) < 0)
        return -1;
    if (!nodes)
        return p3d_err(err,
                       "%s: missing \"nodes\" (an array of {\"name\": ..., "
                       "\"topology\": ...})",
                       path);
    cf_where(x, SIZE_MAX, "nodes", at, sizeof at);
    if (!cJSON_IsArray(nodes))
        return p3d_err(err, "%s: expected an array, found %s", at, json_type(nodes));
    if (!nodes->child)
        return p3d_err(err, "%s: empty; list at least one node", at);
    size_t nentries = (size_t)cJSON_GetArraySize(nodes);
    if (p3d_strmap_init(&x->names, nentries * 8) < 0)
        return p3d_err(err, "%s: out of memory", path);
    size_t entry = 0;
    for (const cJSON *o = nodes->child; o; o = o->next, entry++)
        if (read_entry(x, entry, o, &saw_rack, &saw_norack, err) < 0)
            return -1;
    if (saw_rack && saw_norack)
        p3d_cluster_warn(x->c,
                         "%s: some nodes have no \"rack\"; they are put "
                         "in a rack named 'default'",
                         path);
    if (x->nkey_warnings > MAX_KEY_WARNINGS)
        p3d_cluster_warn(x->c, "%s: %zu more unknown keys ignored", path, x->nkey_warnings - MAX_KEY_WARNINGS);
    return 0;
}

int p3d_cluster_load_as(const char *path, const char *topology, p3d_cluster **out, char **err)
{
    int rc = -1;
    char *buf = NULL;
    size_t len = 0;
    cJSON *root = NULL;
    cf_ctx x = {0};
    *out = NULL;
    x.path = path;
    if (p3d_read_small_file(path, "cluster file", P3D_CLUSTER_MAX_FILE, &buf, &len, err) < 0)
        goto out;
    x.buf = buf;
    x.len = len;
    {
        const char *slash = strrchr(path, '/');
        x.dir = slash ? strndup(path, (size_t)(slash - path) + (slash == path)) : strdup(".");
    }
    if (!(x.c = p3d_cluster_new()) || !x.dir || !(x.c->source = strdup(path))) {
        p3d_err(err, "%s: out of memory", path);
        goto out;
    }
    /* a UTF-8 byte order mark is harmless; cJSON would reject it */
    size_t skip = len >= 3 && memcmp(buf, "\xEF\xBB\xBF", 3) == 0 ? 3 : 0;
    if (check_raw_text(&x, skip, err) < 0 || parse_root(&x, skip, &root, err) < 0 ||
        translate_foreign(&x, &root, topology, err) < 0 || check_top_keys(&x, root, err) < 0 ||
        read_top(&x, root, err) < 0)
        goto out;
    *out = x.c;
    x.c = NULL;
    rc = 0;
out:
    cJSON_Delete(root);
    p3d_strmap_free(&x.topo_by_str);
    p3d_strmap_free(&x.topo_by_real);
    p3d_strmap_free(&x.racks);
    p3d_strmap_free(&x.domains);
    p3d_strmap_free(&x.names);
    p3d_strv_free(x.reals, x.nreals);
    free(x.entry_of_node);
    free(x.span_lo);
    free(x.span_hi);
    free(x.dir);
    free(buf);
    p3d_cluster_free(x.c);
    return rc;
}
