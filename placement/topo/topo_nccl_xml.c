/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * topo_nccl_xml.c — the XML reader of the NCCL topology source: libxml2's
 * parser turns the file into the element and attribute arrays of
 * topo_nccl.h; topo_nccl.c builds the node record from them.
 *
 * libxml2 (which Debian's hwloc links already) does the XML: well-formedness,
 * quoting, entities, encodings — fuzzed and kept by others, where our own
 * tokenizer was one more parser of hostile bytes to keep. What stays ours is
 * what an NCCL topology may hold: elements and attributes only (no text, no
 * CDATA, no DTD, no entity declarations: the last are refused before libxml2
 * sees the text, so no expansion can blow up), and the limits NX_MAX_* that
 * keep a hostile file small (the '<' are counted before the parse, so the
 * tree libxml2 builds is bounded too: topo_xml.c). Every refusal names
 * file:line and what was expected.
 */
#include "topo_internal.h"
#include "topo_nccl.h"
#include "topo_xml.h"

#include <libxml/parser.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "termsafe.h"

void p3d_nccl_xml_free(nx_doc *d)
{
    for (int i = 0; i < d->nat; i++) {
        free(d->at[i].name);
        free(d->at[i].val);
    }
    for (int i = 0; i < d->nel; i++)
        free(d->el[i].name);
    free(d->at);
    free(d->el);
    memset(d, 0, sizeof *d);
}

static int nx_push_el(nx_doc *d, char *name, size_t nlen, int line, int parent, int depth, char **err)
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

static int nx_push_attr(nx_doc *d, char *name, size_t nlen, char *val, int line, char **err)
{
    if (d->nat == d->capat) {
        int cap = d->capat ? d->capat * 2 : 256;
        nx_attr *a = realloc(d->at, (size_t)cap * sizeof *a);
        if (!a) {
            free(name);
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

/* Element e with its attributes, as the child of parent at depth. */
static int nx_take_element(nx_doc *d, xmlNode *e, int parent, int depth, char **err)
{
    int line = (int)d->xml->GetLineNo(e);
    if (depth >= NX_MAX_DEPTH)
        return p3d_err(err,
                       "%s:%d: elements nested deeper than %d: expected an NCCL topology (a few levels of PCI "
                       "bridges)",
                       d->path, line, NX_MAX_DEPTH);
    char *own = strdup((const char *)e->name);
    if (!own)
        return p3d_err(err, "out of memory");
    if (nx_push_el(d, own, strlen(own), line, parent, depth, err) < 0) {
        free(own);
        return -1;
    }
    int n = 0;
    for (xmlAttr *a = e->properties; a; a = a->next) {
        if (++n > NX_MAX_ATTRS)
            return p3d_err(err, "%s:%d: <%s> has more than %d attributes", d->path, line, p3d_tesc(own), NX_MAX_ATTRS);
        char *aown = strdup((const char *)a->name);
        char *vown = (char *)d->xml->NodeListGetString(e->doc, a->children, 1);
        char *v = vown ? strdup(vown) : strdup(""); /* ours is free()d, libxml2's xmlFree()d */
        (*d->xml->Free)(vown);
        if (!aown || !v) {
            free(aown);
            free(v);
            return p3d_err(err, "out of memory");
        }
        if (strlen(v) > NX_MAX_VALUE) {
            p3d_err(err, "%s:%d: an attribute value of %zu bytes: expected at most %d", d->path, line, strlen(v),
                    NX_MAX_VALUE);
            free(aown);
            free(v);
            return -1;
        }
        if (nx_push_attr(d, aown, strlen(aown), v, line, err) < 0)
            return -1; /* it freed both */
    }
    return 0;
}

/* Text where only elements may be: its first 20 characters, escaped. */
static int nx_stray_text(nx_doc *d, xmlNode *t, char **err)
{
    const char *v = t->content ? (const char *)t->content : "";
    char snip[24];
    v += strspn(v, " \t\r\n");
    int k = (int)strcspn(v, "\n");
    snprintf(snip, sizeof snip, "%.*s", k < 20 ? k : 20, v);
    return p3d_err(err, "%s:%d: text '%s' between elements: an NCCL topology file has elements and attributes only",
                   d->path, (int)d->xml->GetLineNo(t), p3d_tesc(snip));
}

static int nx_blank(const xmlNode *t)
{
    const char *v = t->content ? (const char *)t->content : "";
    return v[strspn(v, " \t\r\n")] == 0;
}

/* The children of the element at index parent, depth first, in document
 * order; the recursion is bounded by NX_MAX_DEPTH. */
static int nx_walk(nx_doc *d, xmlNode *first, int parent, int depth, char **err)
{
    for (xmlNode *c = first; c; c = c->next) {
        if (c->type == XML_ELEMENT_NODE) {
            if (nx_take_element(d, c, parent, depth, err) < 0 ||
                nx_walk(d, c->children, d->nel - 1, depth + 1, err) < 0)
                return -1;
        } else if ((c->type == XML_TEXT_NODE && !nx_blank(c)) || c->type == XML_CDATA_SECTION_NODE ||
                   c->type == XML_ENTITY_REF_NODE) {
            return nx_stray_text(d, c, err);
        }
    }
    return 0;
}

int p3d_nccl_xml_parse(nx_doc *d, char **err)
{
    size_t len = (size_t)(d->end - d->text);
    if (p3d_xml_prescan(d->path, d->text, len, 2 * (size_t)NX_MAX_ELEMENTS + 64, "an NCCL topology file", err) < 0)
        return -1;
    const p3d_xmllib *x = d->xml = p3d_xmllib_get(d->path, err);
    if (!x)
        return -1;
    xmlParserCtxtPtr ctx = x->NewParserCtxt();
    if (!ctx)
        return p3d_err(err, "out of memory");
    xmlError first = {0};
    x->SetStructuredErrorFunc(&first, p3d_xml_keep_first);
    xmlDocPtr doc = x->CtxtReadMemory(ctx, d->text, (int)len, NULL, NULL,
                                      XML_PARSE_NONET | XML_PARSE_NOERROR | XML_PARSE_NOWARNING);
    x->SetStructuredErrorFunc(NULL, NULL);
    int rc = 0;
    if (!doc)
        rc = p3d_xml_refuse(d->path, d->text, len, &first, err);
    else if (doc->intSubset)
        rc = p3d_err(err, "%s:%d: a DTD (<!DOCTYPE ...>): not expected in an NCCL topology file", d->path,
                     p3d_xml_line_of(d->text, len, "<!DOCTYPE"));
    else
        rc = nx_walk(d, doc->children, -1, 0, err);
    free(first.message);
    x->FreeDoc(doc);
    x->FreeParserCtxt(ctx);
    if (rc == 0 && !d->nel)
        rc = p3d_err(err, "%s: no element: expected <system version=\"1\"> (an NCCL topology file)", d->path);
    return rc;
}

const nx_attr *p3d_nccl_xml_get(nx_doc *d, const nx_el *e, const char *name)
{
    for (int i = e->attr0; i < e->attr0 + e->nattr; i++)
        if (d->at[i].nlen == strlen(name) && !memcmp(d->at[i].name, name, d->at[i].nlen))
            return &d->at[i];
    return NULL;
}
