/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * topo_nccl_xml.c — the XML reader of the NCCL topology source: the
 * tokenizer and parser that turn the file into elements and attributes
 * (topo_nccl.h); topo_nccl.c builds the node record from them.
 *
 * The XML reader is our own and strict (hwloc's parser is for hwloc's
 * format; no other XML library is linked): elements, attributes in single
 * or double quotes with the five predefined entities, comments and a
 * prolog; no text content, DTD or CDATA. Limits keep a hostile file small:
 * see NX_MAX_*. Every refusal names file:line and what was expected.
 */
#include "topo_internal.h"
#include "topo_nccl.h"

#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "termsafe.h"

void p3d_nccl_xml_free(nx_doc *d)
{
    for (int i = 0; i < d->nat; i++)
        free(d->at[i].val);
    free(d->at);
    free(d->el);
    memset(d, 0, sizeof *d);
}

/* Line of p; positions are asked for in increasing order while parsing,
 * so counting on from the last one keeps this linear. */
static int nx_line(nx_doc *d, const char *p)
{
    if (!d->lpos || p < d->lpos) {
        d->lpos = d->text;
        d->lline = 1;
    }
    for (; d->lpos < p && d->lpos < d->end; d->lpos++)
        d->lline += *d->lpos == '\n';
    return d->lline;
}

static int name_char(int c)
{
    return isalnum(c) || c == '_' || c == '-' || c == ':' || c == '.';
}

/* Decodes the value [v, ve) (quotes excluded) into a fresh string. */
static int nx_value(nx_doc *d, const char *v, const char *ve, char **out, char **err)
{
    size_t n = (size_t)(ve - v);
    if (n > NX_MAX_VALUE)
        return p3d_err(err, "%s:%d: an attribute value of %zu bytes: expected at most %d", d->path, nx_line(d, v), n,
                       NX_MAX_VALUE);
    char *s = malloc(n + 1), *o = s;
    if (!s)
        return p3d_err(err, "out of memory");
    static const struct {
        const char *ent;
        char c;
    } ents[] = {{"&amp;", '&'}, {"&lt;", '<'}, {"&gt;", '>'}, {"&quot;", '"'}, {"&apos;", '\''}};
    for (const char *p = v; p < ve;) {
        if (*p == '<') {
            free(s);
            return p3d_err(err, "%s:%d: '<' inside an attribute value: expected &lt; (not well-formed XML)", d->path,
                           nx_line(d, p));
        }
        if (*p != '&') {
            *o++ = *p++;
            continue;
        }
        size_t k = 0;
        for (; k < sizeof ents / sizeof *ents; k++)
            if ((size_t)(ve - p) >= strlen(ents[k].ent) && !memcmp(p, ents[k].ent, strlen(ents[k].ent)))
                break;
        if (k == sizeof ents / sizeof *ents) {
            free(s);
            return p3d_err(err, "%s:%d: '&' in an attribute value: expected one of &amp; &lt; &gt; &quot; &apos;",
                           d->path, nx_line(d, p));
        }
        *o++ = ents[k].c;
        p += strlen(ents[k].ent);
    }
    *o = 0;
    *out = s;
    return 0;
}

static int nx_push_el(nx_doc *d, const char *name, size_t nlen, int line, int parent, int depth, char **err)
{
    if (d->nel >= NX_MAX_ELEMENTS)
        return p3d_err(err, "%s:%d: more than %d elements: expected an NCCL topology of one machine", d->path, line,
                       NX_MAX_ELEMENTS);
    if (d->nel == d->capel) {
        int cap = d->capel ? d->capel * 2 : 64;
        nx_el *e = realloc(d->el, (size_t)cap * sizeof *e);
        if (!e)
            return p3d_err(err, "out of memory");
        d->el = e;
        d->capel = cap;
    }
    d->el[d->nel++] = (nx_el){name, nlen, line, parent, depth, d->nat, 0};
    return 0;
}

static int nx_push_attr(nx_doc *d, const char *name, size_t nlen, char *val, int line, char **err)
{
    if (d->nat == d->capat) {
        int cap = d->capat ? d->capat * 2 : 256;
        nx_attr *a = realloc(d->at, (size_t)cap * sizeof *a);
        if (!a) {
            free(val);
            return p3d_err(err, "out of memory");
        }
        d->at = a;
        d->capat = cap;
    }
    d->at[d->nat++] = (nx_attr){name, nlen, val, line};
    d->el[d->nel - 1].nattr++;
    return 0;
}

int p3d_nccl_xml_is_name(const nx_el *e, const char *s)
{
    return e->nlen == strlen(s) && !memcmp(e->name, s, e->nlen);
}

/* Skips whitespace, comments and processing instructions; 0, or -1 with
 * *err on an unterminated one or a DTD/CDATA. */
int p3d_nccl_xml_skip_misc(nx_doc *d, const char **pp, char **err)
{
    const char *p = *pp;
    for (;;) {
        while (p < d->end && isspace((unsigned char)*p))
            p++;
        if (p + 1 < d->end && p[0] == '<' && p[1] == '?') {
            const char *e = memmem(p, (size_t)(d->end - p), "?>", 2);
            if (!e)
                return p3d_err(err, "%s:%d: '<?' never closed (truncated file?)", d->path, nx_line(d, p));
            p = e + 2;
            continue;
        }
        if (p + 3 < d->end && !memcmp(p, "<!--", 4)) {
            const char *e = memmem(p + 4, (size_t)(d->end - p - 4), "-->", 3);
            if (!e)
                return p3d_err(err, "%s:%d: comment never closed (truncated file?)", d->path, nx_line(d, p));
            p = e + 3;
            continue;
        }
        if (p + 1 < d->end && p[0] == '<' && p[1] == '!')
            return p3d_err(err, "%s:%d: '<!' (a DTD or CDATA section): not expected in an NCCL topology file",
                           d->path, nx_line(d, p));
        break;
    }
    *pp = p;
    return 0;
}

/* Text where an element must start: after </system>, or between elements. */
static int nx_stray_text(nx_doc *d, const char *p, int done, char **err)
{
    char snip[24];
    size_t k = 0;
    while (k < 20 && p + k < d->end && p[k] != '<' && p[k] != '\n')
        k++;
    snprintf(snip, sizeof snip, "%.*s", (int)k, p);
    if (done)
        return p3d_err(err, "%s:%d: content after </system>: expected the end of the file", d->path, nx_line(d, p));
    return p3d_err(err, "%s:%d: text '%s' between elements: an NCCL topology file has elements and "
                        "attributes only",
                   d->path, nx_line(d, p), p3d_tesc(snip));
}

/* The rest of a closing tag </name, which must close the open element. */
static int nx_close_tag(nx_doc *d, const char **pp, const char *name, size_t nlen, int line, const nx_el *open,
                        char **err)
{
    const char *p = *pp;
    while (p < d->end && isspace((unsigned char)*p))
        p++;
    if (p >= d->end)
        return p3d_err(err, "%s:%d: </%.*s never closed (truncated file?)", d->path, line, (int)nlen, name);
    if (*p != '>')
        return p3d_err(err, "%s:%d: </%.*s: expected '>'", d->path, line, (int)nlen, name);
    *pp = p + 1;
    if (!open || open->nlen != nlen || memcmp(open->name, name, nlen))
        return p3d_err(err, "%s:%d: </%.*s> does not close %s%.*s%s", d->path, line, (int)nlen, name,
                       open ? "<" : "any open element", open ? (int)open->nlen : 0, open ? open->name : "",
                       open ? ">" : "");
    return 0;
}

/* One attribute name="value" of the last element <name, starting at *pp
 * (after the whitespace that began at ws). */
static int nx_read_attr(nx_doc *d, const char **pp, const char *ws, const char *name, size_t nlen, int line,
                        char **err)
{
    const char *p = *pp;
    const char *an = p;
    while (p < d->end && name_char((unsigned char)*p))
        p++;
    size_t anlen = (size_t)(p - an);
    int aline = nx_line(d, an);
    if (!anlen || ws == an)
        return p3d_err(err, "%s:%d: malformed attribute in <%.*s>: expected name=\"value\"", d->path, aline,
                       (int)nlen, name);
    while (p < d->end && isspace((unsigned char)*p))
        p++;
    if (p >= d->end)
        return p3d_err(err, "%s:%d: <%.*s never closed (truncated file?)", d->path, line, (int)nlen, name);
    if (*p != '=')
        return p3d_err(err, "%s:%d: attribute '%.*s' of <%.*s>: expected name=\"value\"", d->path, aline,
                       (int)anlen, an, (int)nlen, name);
    p++;
    while (p < d->end && isspace((unsigned char)*p))
        p++;
    if (p >= d->end)
        return p3d_err(err, "%s:%d: <%.*s never closed (truncated file?)", d->path, line, (int)nlen, name);
    if (*p != '"' && *p != '\'')
        return p3d_err(err, "%s:%d: attribute '%.*s' of <%.*s>: expected a quoted value", d->path, aline,
                       (int)anlen, an, (int)nlen, name);
    char q = *p++;
    const char *ve = memchr(p, q, (size_t)(d->end - p));
    if (!ve)
        return p3d_err(err, "%s:%d: attribute '%.*s' has no closing quote (truncated file?)", d->path, aline,
                       (int)anlen, an);
    const nx_el *e = &d->el[d->nel - 1];
    if (e->nattr >= NX_MAX_ATTRS)
        return p3d_err(err, "%s:%d: <%.*s> has more than %d attributes", d->path, aline, (int)nlen, name,
                       NX_MAX_ATTRS);
    for (int i = e->attr0; i < e->attr0 + e->nattr; i++)
        if (d->at[i].nlen == anlen && !memcmp(d->at[i].name, an, anlen))
            return p3d_err(err, "%s:%d: attribute '%.*s' given twice in <%.*s>", d->path, aline, (int)anlen, an,
                           (int)nlen, name);
    char *val = NULL;
    if (nx_value(d, p, ve, &val, err) < 0 || nx_push_attr(d, an, anlen, val, aline, err) < 0)
        return -1;
    *pp = ve + 1;
    return 0;
}

/* The attributes of the element just pushed, up to its '>' or '/>' (*self). */
static int nx_read_attrs(nx_doc *d, const char **pp, const char *name, size_t nlen, int line, int *self,
                         char **err)
{
    const char *p = *pp;
    *self = 0;
    for (;;) {
        const char *ws = p;
        while (p < d->end && isspace((unsigned char)*p))
            p++;
        if (p >= d->end)
            return p3d_err(err, "%s:%d: <%.*s never closed (truncated file?)", d->path, line, (int)nlen, name);
        if (*p == '>') {
            p++;
            break;
        }
        if (*p == '/') {
            if (p + 1 >= d->end)
                return p3d_err(err, "%s:%d: <%.*s never closed (truncated file?)", d->path, line, (int)nlen, name);
            if (p[1] != '>')
                return p3d_err(err, "%s:%d: <%.*s: '/' not followed by '>'", d->path, nx_line(d, p), (int)nlen,
                               name);
            p += 2;
            *self = 1;
            break;
        }
        if (nx_read_attr(d, &p, ws, name, nlen, line, err) < 0)
            return -1;
    }
    *pp = p;
    return 0;
}

/* Reads the whole document into d->el / d->at (a tree by parent index). */
int p3d_nccl_xml_parse(nx_doc *d, char **err)
{
    const char *p = d->text;
    int stack[NX_MAX_DEPTH + 1], depth = 0, done = 0;
    if (p + 3 <= d->end && !memcmp(p, "\xef\xbb\xbf", 3))
        p += 3;
    for (;;) {
        if (p3d_nccl_xml_skip_misc(d, &p, err) < 0)
            return -1;
        if (p >= d->end)
            break;
        if (*p != '<' || done)
            return nx_stray_text(d, p, done, err);
        const char *lt = p++;
        int closing = p < d->end && *p == '/';
        if (closing)
            p++;
        const char *name = p;
        while (p < d->end && name_char((unsigned char)*p))
            p++;
        size_t nlen = (size_t)(p - name);
        int line = nx_line(d, lt);
        if (!nlen)
            return p3d_err(err, "%s:%d: '<' not followed by an element name: not well-formed XML", d->path, line);
        if (closing) {
            if (nx_close_tag(d, &p, name, nlen, line, depth ? &d->el[stack[depth - 1]] : NULL, err) < 0)
                return -1;
            if (--depth == 0)
                done = 1;
            continue;
        }
        if (depth >= NX_MAX_DEPTH)
            return p3d_err(err, "%s:%d: elements nested deeper than %d: expected an NCCL topology (a few levels of "
                                "PCI bridges)",
                           d->path, line, NX_MAX_DEPTH);
        int self;
        if (nx_push_el(d, name, nlen, line, depth ? stack[depth - 1] : -1, depth, err) < 0 ||
            nx_read_attrs(d, &p, name, nlen, line, &self, err) < 0)
            return -1;
        if (self) {
            if (depth == 0)
                done = 1;
        } else {
            stack[depth++] = d->nel - 1;
        }
    }
    if (depth)
        return p3d_err(err, "%s: the file ends inside <%.*s> opened at line %d (truncated file?)", d->path,
                       (int)d->el[stack[depth - 1]].nlen, d->el[stack[depth - 1]].name, d->el[stack[depth - 1]].line);
    if (!d->nel)
        return p3d_err(err, "%s: no element: expected <system version=\"1\"> (an NCCL topology file)", d->path);
    return 0;
}

const nx_attr *p3d_nccl_xml_get(nx_doc *d, const nx_el *e, const char *name)
{
    for (int i = e->attr0; i < e->attr0 + e->nattr; i++)
        if (d->at[i].nlen == strlen(name) && !memcmp(d->at[i].name, name, d->at[i].nlen))
            return &d->at[i];
    return NULL;
}
